"""The ``metricsched`` command: ``run`` (the operator), ``explain`` and ``version``.

``explain NAMESPACE/POD`` runs the same pure cycle as the operator on current data (one
LIST of nodes, pods and policies, one query per Prometheus metric) and prints, for every
node, its filter verdict and its per-metric values and scores. For a pod that is already
bound it shows where the pod would go now.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
import zlib
from collections.abc import Sequence
from typing import Any

import metricsched
from metricsched import config as config_mod
from metricsched.core import cycle, explain, model, parse, policy
from metricsched.edges import prometheus as prom
from metricsched.runtime import operator as operator_mod


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="metricsched", description="A metrics-aware Kubernetes scheduler."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator (schedules pods)")
    config_mod.add_run_arguments(run)
    ex = sub.add_parser("explain", help="show why a pod goes (or would go) where")
    ex.add_argument("pod", metavar="NAMESPACE/POD")
    config_mod.add_run_arguments(ex)
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)

    if args.command == "version":
        print(f"metricsched {metricsched.__version__}")
        return 0
    try:
        config = config_mod.from_args(args)
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
        ) as e:
            print(f"metricsched: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        return explain_pod(config, args.pod)
    except (operator_mod.CrdMissingError, operator_mod.KubeconfigError) as e:
        print(f"metricsched: {e}", file=sys.stderr)
        return 1


def explain_pod(config: config_mod.Config, target: str) -> int:
    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name:
        print("metricsched explain: give the pod as NAMESPACE/NAME", file=sys.stderr)
        return 2
    api_client = operator_mod.load_api_client(config.kubeconfig)
    op = operator_mod.Operator(config, api_client)
    op.initial_sync()
    try:
        raw: Any = op.core.read_namespaced_pod(name, namespace, _preload_content=False)
        body: dict[str, Any] = json.loads(raw.data)
    except Exception as e:
        print(f"metricsched explain: cannot read pod {target}: {e}", file=sys.stderr)
        return 1
    pod = parse.pod_from_body(body)
    if pod.node_name:
        # Where would it go now? Take it off its node and decide again.
        op.cache.remove_pod(pod.uid)
        print(f"note: {target} is bound to {pod.node_name}; showing where it would go now")
        pod = dataclasses.replace(pod, node_name="")
    now = time.time()
    policies = list(op.cache.policies.values())
    prom.refresh_policy_metrics(
        source=op.source, store=op.store, policies=policies, nodes=op.cache.nodes(), now=now
    )
    decision = cycle.schedule_one(
        pod=pod,
        snapshot=op.cache.snapshot(now=now),
        policies=policies,
        metrics=op.store.view(),
        default_fallback=config.default_fallback,
        now=now,
        scheduler_names=config.scheduler_names | {pod.scheduler_name},
        rr_counter=0,
        seed=zlib.crc32(pod.uid.encode()),
    )
    chosen = policy.select_policy(pod, policies)
    names = [m.name for m in chosen.policy.metrics] if chosen.policy else []
    print(explain.render(decision, policy_metrics=names))
    for key, error in op.cache.policy_errors.items():
        if key.startswith(f"{namespace}/"):
            print(f"warning: policy {key} is invalid and ignored: {error}")
    op.source.close()
    return 0 if decision.outcome is model.Outcome.BIND else 1


if __name__ == "__main__":
    sys.exit(main())
