"""The ``metricsched`` command: ``run`` (the operator), ``explain``, ``shadow``, ``version``.

``explain NAMESPACE/POD`` runs the same pure cycle as the operator on current data (one
LIST of nodes, pods and policies, one query per Prometheus metric) and prints, for every
node, its filter verdict and its per-metric values and scores. For a pod that is already
bound it first shows the decision recorded on the pod (``metricsched.io/decision``), then
where the policy would place it now and what changed.

What ``explain`` sends to Prometheus is what the operator would: only the queries of the
policy that decides the pod (not every namespace's), checked by the admin's query rules.
The rules are the operator's when ``--operator NAMESPACE/DEPLOYMENT`` names its Deployment
(read from its container's ``METRICSCHED_QUERY_*``), else those of this command's own
flags and variables; without any, explain says on stderr that the queries go as written.
The decision annotation it prints comes from the pod, whose author can rewrite it: it is
printed escaped (``core.decision_record.decode``). A user who may not read what the
scheduler reads cluster-wide gets one line saying so, not a traceback.

``shadow NAMESPACE/POLICY`` reads a shadow policy's status (one GET) and prints the
latest evaluated pods and the summary.

Installed twice: as ``metricsched`` and as ``kubectl-metricsched``, kubectl's plugin
name, so ``kubectl metricsched explain shop/web-7d4`` works. ``explain`` and ``shadow``
read the kubeconfig as kubectl does (``--kubeconfig``, then ``KUBECONFIG``, then
``~/.kube/config``; ``--context``), and Prometheus settings from the same flags and
``METRICSCHED_*`` variables as ``run``; in a development checkout, the local cluster's
``.cluster/env`` fills what neither gives.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import metricsched
from metricsched import config as config_mod
from metricsched.core import (
    cycle,
    decision_record,
    estimate,
    explain,
    model,
    parse,
    policy,
    policy_defaults,
    policy_selection,
    scoring,
)
from metricsched.core import shadow as shadow_mod
from metricsched.edges import errors, kube, kube_http, metrics_auth
from metricsched.runtime import cycle_inputs
from metricsched.runtime import operator as operator_mod

CLUSTER_ENV_NAMES = {
    "KUBECONFIG": "METRICSCHED_KUBECONFIG",
    "PROMETHEUS_URL": "METRICSCHED_PROMETHEUS_URL",
}
"""Variables of the local cluster's ``.cluster/env`` and the settings they fill."""


def cluster_env_defaults(
    env: Mapping[str, str], *, cwd: pathlib.Path
) -> tuple[dict[str, str], pathlib.Path | None]:
    """Settings from the development cluster's env file (``$METRICSCHED_CLUSTER_DIR/env``
    or ``./.cluster/env``) for what neither ``METRICSCHED_*`` nor ``KUBECONFIG`` sets."""
    folder = env.get("METRICSCHED_CLUSTER_DIR")
    path = pathlib.Path(folder) / "env" if folder else cwd / ".cluster" / "env"
    try:
        text = path.read_text()
    except OSError:
        return {}, None
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep and name in CLUSTER_ENV_NAMES:
            found[CLUSTER_ENV_NAMES[name]] = value.strip().strip('"')
    if "KUBECONFIG" in env:  # kubectl's own variable wins over the development default
        found.pop("METRICSCHED_KUBECONFIG", None)
    return {k: v for k, v in found.items() if k not in env}, path


def _client_arguments(parser: argparse.ArgumentParser, *, run_flags: bool) -> None:
    if run_flags:
        config_mod.add_run_arguments(parser)
    else:
        parser.add_argument(
            "--kubeconfig", help="kubeconfig file (default: KUBECONFIG, then ~/.kube/config)"
        )
    parser.add_argument("--context", help="the kubeconfig context to use (default: current)")


def main(argv: Sequence[str] | None = None, *, prog: str = "metricsched") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="A metrics-aware Kubernetes scheduler.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator (schedules pods)")
    config_mod.add_run_arguments(run)
    ex = sub.add_parser(
        "explain",
        help="show why a pod went where it is, and where it would go now",
        description="Explains a pod with the policies of the install its spec.schedulerName "
        "names; --scheduler-name overrides that name.",
    )
    ex.add_argument("pod", metavar="NAMESPACE/POD")
    ex.add_argument(
        "--operator",
        metavar="NAMESPACE/DEPLOYMENT",
        help="apply the query rules of this operator Deployment (its METRICSCHED_QUERY_* "
        "variables), as the operator would [METRICSCHED_OPERATOR]",
    )
    _client_arguments(ex, run_flags=True)
    sh = sub.add_parser("shadow", help="show how a shadow policy compares with live placements")
    sh.add_argument("policy", metavar="NAMESPACE/POLICY")
    _client_arguments(sh, run_flags=False)
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)

    if args.command == "version":
        print(f"metricsched {metricsched.__version__}")
        return 0
    env: Mapping[str, str] = os.environ
    if args.command in ("explain", "shadow"):
        defaults, source = cluster_env_defaults(os.environ, cwd=pathlib.Path.cwd())
        if defaults and args.command == "explain":
            print(f"note: using {', '.join(sorted(defaults))} from {source}", file=sys.stderr)
        env = {**defaults, **os.environ}
    if args.command == "shadow":
        try:
            return shadow_report(
                kubeconfig=args.kubeconfig or env.get("METRICSCHED_KUBECONFIG"),
                context=args.context,
                target=args.policy,
            )
        except operator_mod.KubeconfigError as e:
            print(f"metricsched: {e}", file=sys.stderr)
            return 1
    if args.command == "explain":
        try:
            env = _with_operator_rules(args, env)
        except _ExplainError as e:
            print(f"metricsched explain: {e}", file=sys.stderr)
            return 1
    try:
        config = config_mod.from_args(args, env=env)
    except config_mod.ConfigError as e:
        print(f"metricsched: configuration error: {e}", file=sys.stderr)
        return 2
    if args.command == "run":
        try:
            asyncio.run(operator_mod.run(config))
        except KeyboardInterrupt:
            pass
        except (
            operator_mod.CrdMissingError,
            operator_mod.KubeconfigError,
            operator_mod.LeadershipLostError,
            operator_mod.TaskEndedError,
            metrics_auth.AuthError,
        ) as e:
            print(f"metricsched: {e}", file=sys.stderr)
            return 1
        return 0
    if not config.query_rules.enabled:
        print(
            "note: no query rules: the deciding policy's queries go to Prometheus as written,"
            " with your credentials (--operator NAMESPACE/DEPLOYMENT applies the operator's)",
            file=sys.stderr,
        )
    try:
        override = [n.strip() for v in args.scheduler_names or () for n in v.split(",")]
        return explain_pod(
            config,
            args.pod,
            context=getattr(args, "context", None),
            scheduler_names=frozenset(n for n in override if n) or None,
        )
    except (operator_mod.CrdMissingError, operator_mod.KubeconfigError) as e:
        print(f"metricsched: {e}", file=sys.stderr)
        return 1
    except EXPLAIN_ERRORS as e:
        print(f"metricsched explain: {explain_failure(e)}", file=sys.stderr)
        return 1


class _ExplainError(Exception):
    """A reason explain cannot start, said in one line."""


# The operator's variables that decide what it may query (its container's env).
OPERATOR_RULE_VARIABLES = (
    "METRICSCHED_QUERY_ALLOWED_METRICS",
    "METRICSCHED_QUERY_REQUIRED_MATCHERS",
)


def operator_rules_env(deployment: Mapping[str, Any]) -> dict[str, str]:
    """The query-rule variables of the operator's container (``metricsched``, else the
    only one) in a Deployment body; a variable it does not set is "" (no such rule)."""
    pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in pod_spec.get("containers") or () if isinstance(c, Mapping)]
    named = [c for c in containers if c.get("name") == "metricsched"]
    if len(named) != 1 and len(containers) != 1:
        raise _ExplainError("the Deployment has no container named metricsched")
    container = (named or containers)[0]
    values = {
        str(e.get("name")): e
        for e in container.get("env") or ()
        if isinstance(e, Mapping) and e.get("name") in OPERATOR_RULE_VARIABLES
    }
    found: dict[str, str] = {}
    for name in OPERATOR_RULE_VARIABLES:
        entry = values.get(name)
        if entry is not None and "value" not in entry:
            raise _ExplainError(f"{name} of the operator is not a plain value")
        found[name] = str(entry.get("value") or "") if entry is not None else ""
    return found


def _with_operator_rules(args: argparse.Namespace, env: Mapping[str, str]) -> Mapping[str, str]:
    """``env`` with the query rules of the operator ``--operator`` names, if any."""
    target = args.operator or env.get("METRICSCHED_OPERATOR")
    if not target:
        return env
    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name:
        raise _ExplainError("give the operator as NAMESPACE/DEPLOYMENT")
    kubeconfig = args.kubeconfig or env.get("METRICSCHED_KUBECONFIG")
    try:
        api_client = operator_mod.load_api_client(_kubeconfig(kubeconfig), context=args.context)
        body = _get_once(
            api_client, kube.path("apis/apps/v1/namespaces", namespace, "deployments", name)
        )
    except operator_mod.KubeconfigError as e:
        raise _ExplainError(str(e)) from e
    except EXPLAIN_ERRORS as e:
        raise _ExplainError(
            f"cannot read the operator's query rules from deployment {target}: {errors.describe(e)}"
        ) from e
    rules = operator_rules_env(body)
    print(f"note: applying the query rules of deployment {target}", file=sys.stderr)
    return {**env, **rules}


# What explain's API calls raise: an error answer, an answer that is not a JSON object,
# or no answer.
EXPLAIN_ERRORS = (errors.ApiError, ValueError, *kube_http.TRANSPORT_ERRORS)

# A read of explain or shadow ends within this (connecting within ``kube_http.CONNECT_S``).
READ_TIMEOUT_S = 35.0


async def _get(
    api: kube_http.AsyncApi, path: str, params: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One GET of explain or shadow: its JSON object. An error answer raises
    ``errors.ApiError``, its reason phrase the message of an empty body."""
    answer = await api.request(
        "GET", path, params=params, timeout=kube_http.timeout(READ_TIMEOUT_S)
    )
    if not answer.ok:
        raise answer.phrased_error()
    return kube_http.json_object(answer)


def _get_once(api_client: Any, path: str) -> dict[str, Any]:
    """``_get`` on an event loop of its own, for a command that reads one object."""

    async def read() -> dict[str, Any]:
        api = kube_http.AsyncApi(api_client)
        try:
            return await _get(api, path)
        finally:
            await api.close()

    return asyncio.run(read())


def explain_failure(e: BaseException) -> str:
    """One line for an API call explain could not make (no traceback)."""
    text = errors.describe(e)
    status = e.status if isinstance(e, errors.ApiError) else None
    if status in (401, 403):
        return (
            f"not allowed: {text}. explain reads what the scheduler reads, cluster-wide: "
            "nodes, the pods of every namespace, storage objects and SchedulingPolicies. "
            "Ask a cluster admin to run it, or for read access to those"
        )
    return f"the API server could not be read: {text}"


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """``kubectl metricsched ...``: kubectl passes its plugin every argument after the
    plugin's name, global flags (``--kubeconfig``, ``--context``) included, anywhere."""
    args = list(sys.argv[1:] if argv is None else argv)
    moved: list[str] = []
    while args and args[0].startswith("--") and args[0] not in ("--help", "--version"):
        flag = args.pop(0)
        moved.append(flag)
        if "=" not in flag and args:
            moved.append(args.pop(0))
    if args and args[0] in ("explain", "shadow"):
        args = [args[0], *moved, *args[1:]]
    else:
        args = moved + args
    return main(args, prog="kubectl metricsched")


def _kubeconfig(explicit: str | None) -> str | None:
    """kubectl's order: the flag, then KUBECONFIG (a ':'-separated list is merged)."""
    return explicit or os.environ.get("KUBECONFIG") or None


def shadow_report(*, kubeconfig: str | None, context: str | None, target: str) -> int:
    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name:
        print("metricsched shadow: give the policy as NAMESPACE/NAME", file=sys.stderr)
        return 2
    api_client = operator_mod.load_api_client(_kubeconfig(kubeconfig), context=context)
    try:
        body = _get_once(api_client, _policy_path(namespace, name))
    except Exception as e:
        message = errors.describe(e)
        print(f"metricsched shadow: cannot read policy {target}: {message}", file=sys.stderr)
        return 1
    spec = body.get("spec") or {}
    goals = {
        str(m.get("name")): str(m.get("goal", policy_defaults.DEFAULT_GOAL))
        for m in spec.get("metrics") or ()
        if isinstance(m, dict)
    }
    print(
        shadow_mod.render(
            policy_key=target,
            mode=str(spec.get("mode", policy_defaults.DEFAULT_MODE)),
            block=(body.get("status") or {}).get("shadow"),
            goals=goals,
        ),
        end="",
    )
    return 0


def explain_pod(
    config: config_mod.Config,
    target: str,
    *,
    context: str | None = None,
    scheduler_names: frozenset[str] | None = None,
) -> int:
    """Explain ``target`` with the policies of the install its spec.schedulerName names
    (``scheduler_names``, from --scheduler-name, overrides it)."""
    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name:
        print("metricsched explain: give the pod as NAMESPACE/NAME", file=sys.stderr)
        return 2
    api_client = operator_mod.load_api_client(_kubeconfig(config.kubeconfig), context=context)
    return asyncio.run(_explain(config, api_client, target=target, scheduler_names=scheduler_names))


async def _explain(
    config: config_mod.Config,
    api_client: Any,
    *,
    target: str,
    scheduler_names: frozenset[str] | None,
) -> int:
    """``explain_pod`` on one event loop: its reads through one ``kube_http.AsyncApi``,
    the operator's LISTs and refresh round through the operator's own."""
    api = kube_http.AsyncApi(api_client)
    try:
        return await _explain_with(
            config, api_client, api, target=target, scheduler_names=scheduler_names
        )
    finally:
        await api.close()


async def _explain_with(
    config: config_mod.Config,
    api_client: Any,
    api: kube_http.AsyncApi,
    *,
    target: str,
    scheduler_names: frozenset[str] | None,
) -> int:
    namespace, _, name = target.partition("/")
    try:
        body = await _get(api, kube.path("api/v1/namespaces", namespace, "pods", name))
    except Exception as e:
        print(
            f"metricsched explain: cannot read pod {target}: {errors.describe(e)}",
            file=sys.stderr,
        )
        return 1
    pod = parse.pod_from_body(body)
    scope = explain.scope(pod, await _namespace_policies(api, namespace), override=scheduler_names)
    if scope.scheduler_names != config.scheduler_names:
        print(
            "note: explaining with the policies of schedulerName "
            + ", ".join(sorted(scope.scheduler_names))
            + (" (--scheduler-name)" if scheduler_names else "")
        )
        config = dataclasses.replace(config, scheduler_names=scope.scheduler_names)
    for line in explain.elsewhere_notes(pod, scope.elsewhere):
        print(line)
    replaced = explain.rebalanced_note(pod, await _rebalanced_events(api, pod))
    if replaced is not None:
        print(replaced)
    op = operator_mod.Operator(config, api_client)
    await op.load_once()
    record = _recorded(body)
    bound_to = pod.node_name
    if pod.node_name:
        # Where would it go now? Take it off its node and decide again.
        op.cache.remove_pod(pod.uid)
        if record is not None:
            print(explain.render_recorded(record, bound_to=bound_to))
        elif pod.scheduler_name not in config.scheduler_names:
            print(f"note: {target} was placed by {pod.scheduler_name}: no decision of ours to show")
        else:
            print(f"note: {target} carries no {decision_record.ANNOTATION} annotation")
        print(f"Now ({target} is bound to {pod.node_name}; where the policy would place it now):")
        pod = dataclasses.replace(pod, node_name="")
    now = time.time()
    policies = list(op.cache.policies.values())
    if pod.scheduler_name not in config.scheduler_names:
        trial = policy_selection.shadow_policy_for(pod, policies)
        if trial is not None:
            # Another scheduler's pod: decide as the shadow policy that evaluates it would.
            print(f"note: deciding as shadow policy {trial.key} (mode Shadow) would")
            policies = [dataclasses.replace(trial, mode=model.PolicyMode.ACTIVE)]
    chosen = policy_selection.select_policy(pod, policies)
    # The operator's own round, read-only here, for the deciding policy only: explain
    # sends no query of another policy, nor of another namespace.
    deciding = {chosen.policy.key} if chosen.policy is not None else set()
    await _refresh_once(op, deciding)
    read = cycle_inputs.build(
        cache=op.cache, store=op.store, config=config, now=now, namespace=pod.namespace
    )
    inputs = dataclasses.replace(
        read, policies=policies, scheduler_names=config.scheduler_names | {pod.scheduler_name}
    )
    snapshot = inputs.snapshot
    decision = cycle.decide(pod, inputs)
    names = [m.name for m in chosen.policy.metrics] if chosen.policy else []
    print(explain.render(decision, policy_metrics=names))
    if chosen.policy is not None:
        print(_counted(op, chosen.policy, snapshot=snapshot, now=now), end="")
    if chosen.policy is not None and chosen.policy.rebalance is not None:
        held = explain.render_held(chosen.policy.key, await _held(api, chosen.policy.key), now=now)
        print(held or "", end="")
    if record is not None and bound_to:
        print(_changes(op, record=record, decision=decision, chosen=chosen.policy, now=now), end="")
    for key, error in op.cache.policy_errors.items():
        if key.startswith(f"{namespace}/"):
            print(f"warning: policy {key} is invalid and ignored: {error}")
    op.source.close()
    return 0 if decision.outcome is model.Outcome.BIND else 1


def _counted(
    op: operator_mod.Operator, chosen: model.Policy, *, snapshot: model.ClusterSnapshot, now: float
) -> str:
    """For each metric of ``chosen`` whose estimate is Measured, the pods still counted."""
    view = op.store.view()
    table = op.cache.table(snapshot)
    out = []
    for metric in chosen.metrics:
        if metric.estimate.source is not model.EstimateFrom.MEASURED:
            continue
        series = view.get(model.MetricKey(chosen.key, metric.name))
        refreshed = {n: s.refreshed_at for n, s in series.values.items()} if series else {}
        counted = estimate.still_counted(
            metric=metric,
            table=table,
            refreshed=refreshed,
            usage=series.usage if series else None,
        )
        out.append(explain.render_counted(metric.name, counted, now=now))
    return "\n".join(out)


async def _rebalanced_events(
    api: kube_http.AsyncApi, pod: model.PodInfo
) -> list[Mapping[str, Any]]:
    """The namespace's Rebalanced events, when the pod has a controller (else none)."""
    if not pod.owner:
        return []
    try:
        listed = await _get(
            api,
            kube.path("api/v1/namespaces", pod.namespace, "events"),
            {"fieldSelector": "reason=Rebalanced"},
        )
    except Exception:
        return []  # a note, not the explanation: go on without it
    return [item for item in listed.get("items") or () if isinstance(item, Mapping)]


def _policy_path(namespace: str, name: str = "") -> str:
    """The path of the SchedulingPolicies of ``namespace``, or of the one named ``name``."""
    names = (name,) if name else ()
    prefix = f"apis/{operator_mod.GROUP}/{operator_mod.VERSION}/namespaces"
    return kube.path(prefix, namespace, operator_mod.PLURAL, *names)


async def _held(api: kube_http.AsyncApi, key: model.PolicyKey) -> object:
    """``status.rebalance.held`` of policy ``key`` as the leader wrote it (None: unreadable)."""
    namespace, _, name = key.partition("/")
    try:
        body = await _get(api, _policy_path(namespace, name))
    except Exception:
        return None  # a note, not the explanation: go on without it
    return ((body.get("status") or {}).get("rebalance") or {}).get("held")


async def _namespace_policies(api: kube_http.AsyncApi, namespace: str) -> list[model.Policy]:
    """Every valid SchedulingPolicy of ``namespace``, whichever install serves it."""
    try:
        listed = await _get(api, _policy_path(namespace))
    except Exception:
        return []  # initial_sync reports a missing CRD; explain goes on without notes
    found = []
    for item in listed.get("items") or ():
        try:
            found.append(policy.policy_from_body(item))
        except policy.PolicyError:
            continue  # reported below as an invalid policy when the install serves it
    return found


def _recorded(body: Mapping[str, Any]) -> decision_record.DecisionRecord | None:
    text = ((body.get("metadata") or {}).get("annotations") or {}).get(decision_record.ANNOTATION)
    if not text:
        return None
    try:
        return decision_record.decode(str(text))
    except ValueError as e:
        print(f"note: cannot read the {decision_record.ANNOTATION} annotation: {e}")
        return None


def _changes(
    op: operator_mod.Operator,
    *,
    record: decision_record.DecisionRecord,
    decision: model.Decision,
    chosen: model.Policy | None,
    now: float,
) -> str:
    snapshot = op.cache.snapshot(now=now)
    nodes = [record.winner.node]
    if record.runner_up is not None:
        nodes.append(record.runner_up.node)
    if decision.node is not None:
        nodes.append(decision.node)
    now_values: dict[str, dict[str, float | None]] = {}
    capacity: dict[str, str] = {}
    for name in dict.fromkeys(nodes):
        state = snapshot.nodes.get(model.NodeName(name))
        if state is None:
            continue
        capacity[name] = explain.capacity_text(state)
        if chosen is not None:
            now_values[name] = {
                m.name: scoring.metric_column(
                    policy=chosen, metric=m, nodes=[state.node], metrics=op.store.view(), now=now
                )[0]
                for m in chosen.metrics
            }
    return explain.render_changes(
        record=record, now=decision, now_values=now_values, capacity=capacity
    )


if __name__ == "__main__":
    sys.exit(main())


async def _refresh_once(op: operator_mod.Operator, only: set[model.PolicyKey]) -> None:
    """The operator's refresh round for ``only``; the metrics API's pool (a NodeMetrics
    LIST) closed on this loop, which ends with it."""
    try:
        await op.refresher.refresh_once(only=only)
    finally:
        await op.reads.close()
