"""A pod class's columns, kept per node table and brought up to date row by row, equal
the full computation after any sequence of changes.

The cycle keeps, per pod class, LeastAllocated (and the fallback's allocation scores),
BalancedAllocation and NodeResourcesFit's shortfall codes for every node in the
scheduler's memo (``Memo.per_rows``), and computes again only the rows updated since:
consecutive replicas change one row, the node the previous one was assumed on. These
properties drive the runtime cache through random sequences of binds, node and pod
changes, nodes added and removed, and compare, for each pending pod, the incremental path
(one memo across the sequence, the cache's table) with the full one (a fresh memo, a
table built from the snapshot): same columns, and the same decision with every node's
verdict.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import columns, framework, model, parse, policy_defaults
from metricsched.core.plugins import balanced_allocation, node_resources_fit
from metricsched.runtime import cache as cache_mod
from tests.unit.conftest import (
    NOW,
    build_metric_spec,
    build_metric_view,
    build_pod_info,
    build_policy,
    run_cycle,
)

NODES = tuple(f"node-{index}" for index in range(6))
MIB = 1024**2
Strategy = model.FallbackStrategy


def _node(name: str, cpu: int, memory_gib: int) -> model.NodeInfo:
    return parse.node_from_body(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "pods": "110"}
            },
        }
    )


def _bound(index: int, node: str, cpu_m: int, memory_mib: int) -> model.PodInfo:
    requests = {"cpu": f"{cpu_m}m", "memory": f"{memory_mib}Mi"} if cpu_m else {}
    return parse.pod_from_body(
        {
            "metadata": {"name": f"other-{index}", "namespace": "ns", "uid": f"uid-other-{index}"},
            "spec": {
                "schedulerName": "default-scheduler",
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"phase": "Running"},
        }
    )


# The pod classes: (cpu millicores, memory MiB); (0, 0) is a best-effort pod; the last
# fits only the larger nodes, and fewer of them as pods land (NodeResourcesFit).
pod_class = st.sampled_from([(250, 256), (250, 256), (1000, 64), (0, 0), (100, 2048), (1900, 3072)])
place = st.tuples(st.just("place"), pod_class)
node_change = st.tuples(
    st.just("node"), st.sampled_from(NODES), st.sampled_from([1, 2, 4, 8]), st.sampled_from([4, 16])
)
node_gone = st.tuples(st.just("gone"), st.sampled_from(NODES))
other_pod = st.tuples(
    st.just("other"),
    st.integers(0, 5),
    st.sampled_from(NODES),
    st.integers(0, 1500),
    st.integers(0, 3000),
)
other_gone = st.tuples(st.just("other-gone"), st.integers(0, 5))
steps = st.lists(
    st.one_of(place, place, place, node_change, node_gone, other_pod, other_gone),
    min_size=1,
    max_size=30,
)


def _cluster(sizes: list[tuple[int, int]]) -> cache_mod.ClusterCache:
    cache = cache_mod.ClusterCache()
    for name, (cpu, memory) in zip(NODES, sizes, strict=False):
        cache.upsert_node(_node(name, cpu, memory))
    return cache


def _run(cache: cache_mod.ClusterCache, steps: list[tuple[object, ...]], check) -> None:
    """Apply ``steps`` to ``cache``; ``check(pod, snapshot, table, now)`` decides for each
    pod to place, and the pod is assumed where it went."""
    others: dict[int, model.PodInfo] = {}
    now = NOW
    for number, step in enumerate(steps):
        now += 1.0
        kind = step[0]
        if kind == "place":
            cpu, memory = step[1]  # type: ignore[misc]
            pod = build_pod_info(f"web-{number}", cpu=cpu, memory=memory * MIB)
            snapshot = cache.snapshot(now=now)
            node = check(pod, snapshot, cache.table(snapshot), now)
            if node is not None:
                cache.assume(pod, model.NodeName(node), now=now)
        elif kind == "node":
            _, name, cpu, memory = step
            cache.upsert_node(_node(name, cpu, memory))  # type: ignore[arg-type]
        elif kind == "gone":
            cache.remove_node(model.NodeName(step[1]))  # type: ignore[arg-type]
        elif kind == "other":
            _, index, node, cpu_m, memory_mib = step
            others[index] = _bound(index, node, cpu_m, memory_mib)  # type: ignore[arg-type]
            cache.upsert_pod(others[index], ours=False)
        elif kind == "other-gone" and step[1] in others:
            cache.remove_pod(others.pop(step[1]).uid)  # type: ignore[arg-type]


sizes = st.lists(
    st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([4, 16])), min_size=1, max_size=6
)


@settings(max_examples=150)
@given(sizes=sizes, steps=steps)
def test_a_class_columns_kept_row_by_row_equal_the_columns_computed_in_full(sizes, steps):
    memo = framework.Memo()

    def check(pod, snapshot, table, now):
        rows = np.arange(len(table), dtype=np.intp)
        for strategy in (Strategy.LEAST_ALLOCATED, Strategy.MOST_ALLOCATED):
            kept = node_resources_fit.scoring.class_scores(
                pod=pod, table=table, memo=memo, strategy=strategy
            )
            full = node_resources_fit.scoring.allocation_scores(
                pod=pod, table=columns.NodeTable.of(snapshot), rows=rows, strategy=strategy
            )
            assert kept.tolist() == full.astype(np.float64).tolist()
        incremental = framework.CycleState(pod, snapshot, table, memo)
        fresh = framework.CycleState(
            pod, snapshot, columns.NodeTable.of(snapshot), framework.Memo()
        )
        kept_balance = balanced_allocation.score(incremental, rows)
        full_balance = balanced_allocation.score(fresh, rows)
        if full_balance is None:
            assert kept_balance is None
        else:
            assert kept_balance is not None
            assert kept_balance.tolist() == full_balance.tolist()
        # placed on a node of its own choosing: every node takes pods in some sequence
        return table.names[int(pod.name.split("-")[1]) % len(table)] if len(table) else None

    _run(_cluster(sizes), steps, check)


@settings(max_examples=100)
@given(
    sizes=sizes,
    steps=steps,
    latencies=st.lists(st.sampled_from([0.1, 0.2, 0.2, 0.5]), min_size=6, max_size=6),
    by_metrics=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    row_cells=st.sampled_from([4_000_000, 8]),
)
def test_consecutive_pods_decide_on_the_kept_columns_as_on_a_fresh_cycle(
    *, sizes, steps, latencies, by_metrics, seed, row_cells
):
    """Replicas placed one after another, each assumed where it went: the cycle with the
    scheduler's memo and the cache's table decides every pod, and scores every node,
    exactly as a cycle that starts from nothing (also with a memo that can keep about one
    column: classes evict each other)."""
    policies: list[model.Policy] = []
    view: model.MetricView = {}
    if by_metrics:  # the policy's metric blended with kube-scheduler's default scores
        chosen = dataclasses.replace(
            build_policy(metrics=[build_metric_spec("latency")], burst_penalty=5.0),
            kube_weights=tuple(policy_defaults.DEFAULT_KUBE_WEIGHTS.items()),
        )
        policies = [chosen]
        view = build_metric_view(chosen, {"latency": dict(zip(NODES, latencies, strict=True))})
    memo = framework.Memo(row_cells=row_cells)

    def decide(pod, snapshot, table, memo, now):
        return run_cycle(
            pod=pod,
            snapshot=snapshot,
            table=table,
            memo=memo,
            now=now,
            seed=seed,
            policies=policies,
            metrics=view,
        )

    def check(pod, snapshot, table, now):
        kept = decide(pod, snapshot, table, memo, now)
        full = decide(pod, snapshot, columns.NodeTable.of(snapshot), framework.Memo(), now)
        assert kept == full
        return kept.node if kept.outcome is model.Outcome.BIND else None

    _run(_cluster(sizes), steps, check)


def test_many_classes_keep_at_most_the_memos_cells_and_compute_again_what_went():
    cache = _cluster([(4, 16)] * 6)
    snapshot = cache.snapshot(now=NOW)
    table = cache.table(snapshot)
    memo = framework.Memo(row_cells=12)  # two columns of six nodes
    computed: list[int] = []

    def column(key: int) -> list[float]:
        def compute(rows):
            computed.append(key)
            return rows.astype(np.float64) * key

        return memo.per_rows("test/scaled-rows", key, table, compute).tolist()

    for key in (1, 2, 3):
        column(key)
    assert computed == [1, 2, 3]  # the third evicted the first
    assert column(3) == [3.0 * row for row in range(6)]
    assert column(2) == [2.0 * row for row in range(6)]
    assert computed == [1, 2, 3]  # the last two are kept
    assert column(1) == [1.0 * row for row in range(6)]
    assert computed == [1, 2, 3, 1]  # the least recently used went: computed again
    assert column(2) == [2.0 * row for row in range(6)]
    assert computed == [1, 2, 3, 1]
