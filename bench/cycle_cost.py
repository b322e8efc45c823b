"""Cost of one scheduling cycle versus node count, in process, on synthetic snapshots.

No cluster: nodes shaped like hack/cluster.py's (4/8/16 CPUs, 3 zones, 110 pods), a few
bound pods on each, one SchedulingPolicy with one Prometheus metric whose fresh values
cover every node, and on each node three recent binds, as during a backlog (the burst
counts). ``core.cycle.schedule_one`` is timed as the operator calls it
(``detail=False``, since git 06eb22e) and as ``metricsched explain`` does
(``detail=True``); ``core.profile.find_feasible`` alone shows how much of it is filtering,
and the same cycle with ``spec.kubeScores`` all 0 what kube-scheduler's scores (default
weights, blended since the kubescores branch) add. Two more shapes of pending pod: a
Deployment's replica (default spreading scored too), and pods each of its own class
(a fresh memo and a nodeSelector no earlier pod had): the first are what a backlog is
made of and should cost about the same at any node count; the second show the linear
cost of work that cannot be shared. And a pod no SchedulingPolicy governs (the operator's
default policy, LeastAllocated: the path of stale metrics too). Median of up to 200 runs
per size.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from metricsched.core import columns, cycle, framework, model, node_state, parse, policy, profile

SIZES = (100, 500, 1000, 2000, 5000)
PODS_PER_NODE = 5
_SHAPES = (("4", "16Gi", "zone-a"), ("8", "32Gi", "zone-b"), ("16", "64Gi", "zone-c"))


def _node(i: int) -> model.NodeInfo:
    cpu, memory, zone = _SHAPES[(i - 1) % 3]
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return parse.node_from_body(
        {
            "metadata": {
                "name": f"node-{i}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{i}",
                    "topology.kubernetes.io/zone": zone,
                },
                "annotations": {},
            },
            "spec": {},
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "addresses": [
                    {"type": "InternalIP", "address": f"10.240.{i // 250}.{i % 250 + 1}"}
                ],
            },
        }
    )


def _pod(name: str, node: str = "") -> model.PodInfo:
    return parse.pod_from_body(
        {
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "labels": {}},
            "spec": {
                "schedulerName": "metricsched",
                "nodeName": node,
                "containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
                ],
            },
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


def _policy() -> model.Policy:
    return policy.policy_from_body(
        {
            "metadata": {"name": "bench-latency", "namespace": "bench", "generation": 1},
            "spec": {
                "podSelector": {},
                "metrics": [
                    {
                        "name": "latency",
                        "prometheus": {"query": "max by (node) (node_latency_seconds)"},
                        "weight": 1,
                        "goal": "Minimize",
                    }
                ],
            },
        }
    )


def setup(n: int, now: float) -> dict[str, Any]:
    """A snapshot of ``n`` nodes, the policy, fresh metric values and a pending pod."""
    nodes = [_node(i) for i in range(1, n + 1)]
    bound = [_pod(f"b-{i}-{k}", f"node-{i}") for i in range(1, n + 1) for k in range(PODS_PER_NODE)]
    chosen = _policy()
    samples = {
        model.NodeName(f"node-{i}"): model.MetricSample(0.05 + 0.03 * ((i * 7) % 10), now)
        for i in range(1, n + 1)
    }
    view = {
        model.MetricKey(chosen.key, "latency"): model.MetricSeries(
            values=samples, last_refresh=now, error=None, error_message=""
        )
    }
    # As the runtime cache hands it out during a backlog: every node holding a few recent
    # binds (the burst counts), its node table (core.columns) beside it.
    snapshot = node_state.snapshot(nodes, bound, _backlog_binds(nodes, now))
    # The same nodes, each labelled bench/any in 7 values, for pods of distinct classes.
    distinct = node_state.snapshot(
        [
            dataclasses.replace(node, labels={**node.labels, "bench/any": f"v{i % 7}"})
            for i, node in enumerate(nodes)
        ],
        bound,
    )
    return {
        "snapshot": snapshot,
        "table": columns.NodeTable.of(snapshot),
        # As the scheduler keeps it: one memo across cycles (core.framework.Memo).
        "memo": framework.Memo(),
        "distinct_snapshot": distinct,
        "distinct_table": columns.NodeTable.of(distinct),
        "policies": [chosen],
        "metrics": view,
        "pod": _pod("pending-0"),
        "now": now,
    }


def _backlog_binds(
    nodes: Sequence[model.NodeInfo], now: float
) -> dict[model.NodeName, Sequence[float]]:
    """Binds on every node 5, 20 and 40 s ago, as in a backlog."""
    return {node.name: (now - 40.0, now - 20.0, now - 5.0) for node in nodes}


def _median_ms(fn: Callable[[], object], budget_s: float, max_runs: int) -> float:
    fn()  # warm caches (compiled selectors, policy)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < max_runs and (len(times) < 3 or time.perf_counter() < deadline):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 3)


def inputs(s: dict[str, Any], policies: list[model.Policy]) -> cycle.Inputs:
    """What the operator's cycle reads, on ``setup``'s cluster: its snapshot, table,
    metrics and memo, ``policies``, the default fallback, this install's name."""
    return cycle.Inputs(
        snapshot=s["snapshot"],
        table=s["table"],
        policies=policies,
        metrics=s["metrics"],
        default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
        scheduler_names=frozenset({"metricsched"}),
        now=s["now"],
        memo=s["memo"],
    )


def measure(sizes: tuple[int, ...] = SIZES, budget_s: float = 2.0) -> list[dict[str, Any]]:
    now = time.time()
    rows = []
    for n in sizes:
        s = setup(n, now)

        def one(detail: bool, s: dict[str, Any] = s, metrics_only: bool = False) -> model.Decision:
            policies = s["policies"]
            if metrics_only:
                policies = [dataclasses.replace(p, kube_weights=()) for p in policies]
            return cycle.decide(s["pod"], inputs(s, policies), detail=detail)

        assert one(True).outcome is model.Outcome.BIND

        def filter_only(s: dict[str, Any] = s) -> object:
            cycle_state = framework.CycleState.start(
                s["pod"], s["snapshot"], table=s["table"], memo=s["memo"]
            )
            return profile.find_feasible(cycle_state)

        distinct = iter(range(10**9))

        def one_of_a_kind(s: dict[str, Any] = s, distinct: Any = distinct) -> model.Decision:
            # A pod of its own class: a fresh memo, so nothing kept for a class applies, and
            # a nodeSelector (a seventh of the nodes match) to give NodeAffinity work.
            k = next(distinct)
            pod = dataclasses.replace(
                s["pod"], uid=f"uid-distinct-{k}", node_selector={"bench/any": f"v{k % 7}"}
            )
            distinct_inputs = dataclasses.replace(
                inputs(s, s["policies"]),
                snapshot=s["distinct_snapshot"],
                table=s["distinct_table"],
                memo=framework.Memo(),
            )
            return cycle.decide(pod, distinct_inputs, detail=False)

        def hot(
            pod: model.PodInfo, policies: list[model.Policy], s: dict[str, Any] = s
        ) -> model.Decision:
            # As the operator calls it: detail off, the scheduler's memo across cycles.
            return cycle.decide(pod, inputs(s, policies), detail=False)

        def default_policy(s: dict[str, Any] = s) -> model.Decision:
            # No SchedulingPolicy selects the pod: the default policy's LeastAllocated.
            return hot(s["pod"], [])

        def replica(s: dict[str, Any] = s) -> model.Decision:
            # One Deployment's pods: default spreading (hostname and zone) is scored too.
            return hot(
                dataclasses.replace(s["pod"], controller="ReplicaSet/bench-web"), s["policies"]
            )

        row: dict[str, Any] = {
            "nodes": n,
            "schedule_one_ms": _median_ms(lambda: one(True), budget_s, 200),
            "schedule_one_no_detail_ms": _median_ms(lambda: one(False), budget_s, 200),
            "run_filters_ms": _median_ms(filter_only, budget_s, 200),
            "schedule_one_no_detail_metrics_only_ms": _median_ms(
                lambda: one(False, metrics_only=True), budget_s, 200
            ),
            "schedule_one_replica_ms": _median_ms(replica, budget_s, 200),
            "schedule_one_distinct_ms": _median_ms(one_of_a_kind, budget_s, 50),
            "schedule_one_default_policy_ms": _median_ms(default_policy, budget_s, 200),
        }
        row["us_per_node"] = round(1000 * row["schedule_one_no_detail_ms"] / n, 2)
        print(f"[bench] cycle cost {row}", flush=True)
        rows.append(row)
    return rows
