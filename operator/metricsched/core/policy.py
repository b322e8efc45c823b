"""SchedulingPolicy: a raw body parsed into a ``model.Policy``, and the operator's default
policy.

``policy_from_body`` turns a raw SchedulingPolicy (camelCase, as the API or a YAML file
gives it) into a ``model.Policy``. It applies the CRD's defaults itself
(``policy_defaults``), because bodies do not always pass through the API server's
defaulting (files given to ``metricsched explain``, objects stored before a CRD upgrade,
tests), and it reports what the schema cannot catch or what bypassed it as a
``PolicyError`` listing every problem found, each a sentence a person can act on. The
parts of the spec are read by ``policy_fields`` (one value each), ``policy_metrics`` (with
``policy_estimate``) and ``policy_rebalance``; ``policy_selection`` chooses a policy for a
pod and ``policy_installs`` says which install serves one.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence

from metricsched.core import (
    model,
    policy_defaults,
    policy_fields,
    policy_metrics,
    policy_rebalance,
)
from metricsched.core.plugins import kube_scores


class PolicyError(ValueError):
    """A SchedulingPolicy that cannot be used; ``problems`` says why, one sentence each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(self.problems))


def _timestamp(raw: object, *, problems: policy_fields.Problems) -> float:
    if raw is None or raw == "":
        return 0.0
    if isinstance(raw, datetime.datetime):  # YAML loaders turn timestamps into datetimes
        moment = raw
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(raw))
        except ValueError:
            problems.add("metadata.creationTimestamp", f"must be RFC 3339, got {raw!r}")
            return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _shadow_schedulers(
    raw: object, *, mode: model.PolicyMode | None, problems: policy_fields.Problems
) -> tuple[str, ...]:
    shadow = policy_fields.mapping(raw or {}, path="spec.shadow", problems=problems) or {}
    if shadow and mode is not model.PolicyMode.SHADOW:
        problems.add("spec.shadow", "is only allowed with mode: Shadow")
    names = shadow.get("schedulerNames", list(policy_defaults.DEFAULT_SHADOW_SCHEDULERS))
    if (
        not isinstance(names, list)
        or not 1 <= len(names) <= policy_defaults.MAX_SHADOW_SCHEDULERS
        or not all(isinstance(n, str) and 0 < len(n) <= 253 for n in names)
    ):
        problems.add(
            "spec.shadow.schedulerNames",
            f"must list 1 to {policy_defaults.MAX_SHADOW_SCHEDULERS} scheduler names, "
            f"got {names!r}",
        )
        return policy_defaults.DEFAULT_SHADOW_SCHEDULERS
    return tuple(dict.fromkeys(names))


def _kube_weights(raw: object, *, problems: policy_fields.Problems) -> tuple[tuple[str, int], ...]:
    """spec.kubeScores: the positive weights, in kube_scores.PLUGINS order, defaults filled."""
    given = policy_fields.mapping(
        raw if raw is not None else {}, path="spec.kubeScores", problems=problems
    )
    if given is None:
        return ()
    for name in given:
        if name in policy_defaults.NOT_COMPUTED_KUBE_SCORES:
            problems.add(f"spec.kubeScores.{name}", policy_defaults.NOT_COMPUTED_KUBE_SCORES[name])
        elif name not in policy_defaults.DEFAULT_KUBE_WEIGHTS:
            known = ", ".join(kube_scores.PLUGINS)
            problems.add(f"spec.kubeScores.{name}", f"is not a score plugin; known: {known}")
    weights = []
    for name in kube_scores.PLUGINS:
        weight = policy_fields.integer(
            given.get(name, policy_defaults.DEFAULT_KUBE_WEIGHTS[name]),
            path=f"spec.kubeScores.{name}",
            problems=problems,
            low=policy_defaults.MIN_KUBE_WEIGHT,
            high=policy_defaults.MAX_KUBE_WEIGHT,
        )
        if weight:
            weights.append((name, weight))
    return tuple(weights)


def policy_from_body(body: model.RawBody) -> model.Policy:
    """Convert a raw SchedulingPolicy into a ``model.Policy``, applying the CRD's defaults.

    A missing ``metadata.namespace`` means ``default``, as with ``kubectl apply``.
    Raises ``PolicyError`` listing every problem found.
    """
    problems = policy_fields.Problems()
    metadata = (
        policy_fields.mapping(body.get("metadata", {}), path="metadata", problems=problems) or {}
    )
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        problems.add("metadata.name", "missing")
        name = ""
    namespace = metadata.get("namespace") or "default"
    if not isinstance(namespace, str):
        problems.add("metadata.namespace", f"must be a string, got {namespace!r}")
        namespace = ""
    generation = policy_fields.integer(
        metadata.get("generation", 0), path="metadata.generation", problems=problems, low=0
    )
    created = _timestamp(metadata.get("creationTimestamp"), problems=problems)

    spec = policy_fields.mapping(body.get("spec"), path="spec", problems=problems)
    if spec is None:
        raise PolicyError(problems.items)

    selector = policy_fields.label_selector(
        spec.get("podSelector", {}) or {}, path="spec.podSelector", problems=problems
    )
    priority = policy_fields.integer(
        spec.get("priority", policy_defaults.DEFAULT_PRIORITY),
        path="spec.priority",
        problems=problems,
        low=-(2**31),
        high=2**31 - 1,
    )
    metrics = policy_metrics.metrics(spec.get("metrics"), problems=problems)
    max_age = policy_fields.duration(
        spec.get("maxMetricAge", policy_defaults.DEFAULT_MAX_METRIC_AGE),
        path="spec.maxMetricAge",
        problems=problems,
        low_exclusive=True,
        high=policy_defaults.MAX_METRIC_AGE_LIMIT_S,
    )
    burst_penalty = policy_fields.integer(
        spec.get("burstPenalty", policy_defaults.DEFAULT_BURST_PENALTY),
        path="spec.burstPenalty",
        problems=problems,
        low=policy_defaults.MIN_BURST_PENALTY,
        high=policy_defaults.MAX_BURST_PENALTY,
    )
    burst_window = policy_fields.duration(
        spec.get("burstWindow", policy_defaults.DEFAULT_BURST_WINDOW),
        path="spec.burstWindow",
        problems=problems,
        low_exclusive=False,
        high=policy_defaults.MAX_BURST_WINDOW_S,
    )
    fallback_spec = policy_fields.mapping(
        spec.get("fallback") or {}, path="spec.fallback", problems=problems
    )
    fallback = policy_fields.enum_member(
        (fallback_spec or {}).get("strategy", policy_defaults.DEFAULT_FALLBACK),
        kind=model.FallbackStrategy,
        path="spec.fallback.strategy",
        problems=problems,
    )
    mode = policy_fields.enum_member(
        spec.get("mode", policy_defaults.DEFAULT_MODE),
        kind=model.PolicyMode,
        path="spec.mode",
        problems=problems,
    )
    shadow_schedulers = _shadow_schedulers(spec.get("shadow"), mode=mode, problems=problems)
    daemon_set_pods = policy_fields.enum_member(
        spec.get("daemonSetPods", policy_defaults.DEFAULT_DAEMON_SET_PODS),
        kind=model.DaemonSetPods,
        path="spec.daemonSetPods",
        problems=problems,
    )
    kube_weights = _kube_weights(spec.get("kubeScores"), problems=problems)
    rebalance = policy_rebalance.rebalance(
        spec.get("rebalance"), metrics=metrics, mode=mode, problems=problems
    )
    scheduler_name = spec.get("schedulerName", policy_defaults.DEFAULT_SCHEDULER_NAME)
    if not isinstance(scheduler_name, str) or not 0 < len(scheduler_name) <= 253:
        problems.add("spec.schedulerName", f"must be 1 to 253 characters, got {scheduler_name!r}")

    if problems.items:
        raise PolicyError(problems.items)
    assert mode is not None and daemon_set_pods is not None
    assert generation is not None and priority is not None and max_age is not None
    assert burst_penalty is not None and burst_window is not None
    assert fallback is not None
    metrics = tuple(
        dataclasses.replace(
            metric, estimate=dataclasses.replace(metric.estimate, settle_s=burst_window)
        )
        if metric.estimate.settle_s < 0
        else metric
        for metric in metrics
    )
    return model.Policy(
        namespace=namespace,
        name=name,
        generation=generation,
        creation_timestamp=created,
        priority=priority,
        pod_selector=selector,
        metrics=metrics,
        max_metric_age_s=max_age,
        burst_penalty=float(burst_penalty),
        burst_window_s=burst_window,
        fallback=fallback,
        mode=mode,
        shadow_scheduler_names=shadow_schedulers,
        kube_weights=kube_weights,
        scheduler_name=str(scheduler_name),
        rebalance=rebalance,
        daemon_set_pods=daemon_set_pods,
    )


def default_policy(strategy: model.FallbackStrategy) -> model.Policy:
    """The operator's policy for pods no SchedulingPolicy governs: no metrics, ``strategy``."""
    return model.Policy(
        namespace="",
        name=policy_defaults.DEFAULT_POLICY_NAME,
        generation=0,
        creation_timestamp=0.0,
        priority=policy_defaults.DEFAULT_PRIORITY,
        pod_selector=model.LabelSelector(match_labels={}, match_expressions=()),
        metrics=(),
        max_metric_age_s=policy_fields.parse_duration(policy_defaults.DEFAULT_MAX_METRIC_AGE),
        burst_penalty=0.0,  # nothing to penalise: the strategy decides
        burst_window_s=policy_fields.parse_duration(
            policy_defaults.DEFAULT_BURST_WINDOW
        ),  # recent binds still break ties
        fallback=strategy,
    )


def is_default(policy: model.Policy) -> bool:
    """Whether ``policy`` is the operator's default policy (not a SchedulingPolicy object)."""
    return policy.namespace == "" and policy.name == policy_defaults.DEFAULT_POLICY_NAME


def metric_names(policy: model.Policy) -> str:
    """The policy's metric names, comma-separated: ``status.metricNames`` (kubectl's column)."""
    return ",".join(metric.name for metric in policy.metrics)
