"""The node table the cache keeps row by row equals one built from scratch, after any
sequence of node and pod events, binds and failed binds, and mirrors the latest snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import columns, model, parse
from metricsched.runtime import cache as cache_mod

NODES = ("n1", "n2", "n3", "n4")


def _node(name: str, cpu: int, cordoned: bool, tainted: bool) -> model.NodeInfo:
    taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}] if tainted else []
    return parse.node_from_body(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"unschedulable": cordoned, "taints": taints},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": "8Gi", "pods": "110", "gpu.io/x": "2"}
            },
        }
    )


def _pod(name: str, *, node: str, cpu_m: int, port: int, anti: bool) -> model.PodInfo:
    spec: dict[str, Any] = {
        "schedulerName": "metricsched",
        "nodeName": node,
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": f"{cpu_m}m", "gpu.io/x": "1"}},
                "ports": [{"containerPort": 80, "hostPort": port}] if port else [],
            }
        ],
    }
    if anti:
        term = {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    return parse.pod_from_body(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


node_event = st.tuples(
    st.just("node"),
    st.sampled_from(NODES),
    st.integers(1, 8),
    st.booleans(),
    st.booleans(),
)
node_gone = st.tuples(st.just("gone"), st.sampled_from(NODES))
pod_event = st.tuples(
    st.just("pod"),
    st.integers(0, 6),
    st.sampled_from(("", *NODES)),
    st.integers(0, 900),
    st.sampled_from((0, 0, 8080)),
    st.booleans(),
)
pod_deleted = st.tuples(st.just("delete"), st.integers(0, 6))
bind = st.tuples(st.just("assume"), st.integers(0, 6), st.sampled_from(NODES))
failed_bind = st.tuples(st.just("forget"), st.integers(0, 6))
snapshot_now = st.tuples(st.just("snapshot"))
events = st.lists(
    st.one_of(node_event, node_gone, pod_event, pod_deleted, bind, failed_bind, snapshot_now),
    max_size=40,
)

# Every per-row array the table has; bind times are compared row by row below (a kept
# table may be wider), and row stamps differ by design (they count updates).
_COLUMNS = tuple(n for n in columns._ROW_ARRAYS if n not in ("bind_times", "row_stamp"))


def _same(kept: columns.NodeTable, fresh: columns.NodeTable) -> None:
    assert kept.names == fresh.names
    assert kept.states == fresh.states
    for part in ("allocatable", "requested"):
        for field in dataclasses.fields(columns.ResourceColumns):
            got = getattr(getattr(kept, part), field.name)
            want = getattr(getattr(fresh, part), field.name)
            assert np.array_equal(got, want), (part, field.name)
    for name in _COLUMNS:
        assert np.array_equal(getattr(kept, name), getattr(fresh, name)), name
    for row in range(len(kept)):
        # the kept table may be wider (widened for a row that has since had fewer binds)
        got, want = kept.bind_times[:, row], fresh.bind_times[:, row]
        assert sorted(got[np.isfinite(got)]) == sorted(want[np.isfinite(want)]), kept.names[row]
        got, want = kept.recent.at[:, row], fresh.recent.at[:, row]
        assert sorted(got[np.isfinite(got)]) == sorted(want[np.isfinite(want)]), kept.names[row]
    for since in (-np.inf, 990.0, 1010.0, 1030.0):
        assert np.array_equal(kept.binds_since(since), fresh.binds_since(since)), since
    assert np.array_equal(kept.scalar("gpu.io/x")[0], fresh.scalar("gpu.io/x")[0])
    assert np.array_equal(kept.scalar("gpu.io/x")[1], fresh.scalar("gpu.io/x")[1])


@settings(max_examples=150, deadline=None)
@given(events=events)
def test_the_kept_table_equals_one_built_from_the_snapshot(events):
    cache = cache_mod.ClusterCache()
    pods: dict[int, model.PodInfo] = {}
    now = 1000.0
    for event in events:
        now += 1.0
        kind = event[0]
        if kind == "node":
            _, name, cpu, cordoned, tainted = event
            cache.upsert_node(_node(name, cpu, cordoned, tainted))
        elif kind == "gone":
            cache.remove_node(model.NodeName(event[1]))
        elif kind == "pod":
            _, index, node, cpu_m, port, anti = event
            pods[index] = _pod(f"p{index}", node=node, cpu_m=cpu_m, port=port, anti=anti)
            cache.upsert_pod(pods[index], ours=True)
        elif kind == "delete" and event[1] in pods:
            cache.remove_pod(pods.pop(event[1]).uid)
        elif kind == "assume" and event[1] in pods and pods[event[1]].uid in cache.pending:
            # as the scheduler does: only a pending pod is assumed (never one twice)
            cache.assume(pods[event[1]], model.NodeName(event[2]), now=now)
        elif kind == "forget" and event[1] in pods:
            cache.forget(pods[event[1]])
        elif kind == "snapshot":
            # the table is brought up to date here, row by row
            cache.table(cache.snapshot(now=now))
    snapshot = cache.snapshot(now=now)
    kept = cache.table(snapshot)
    assert kept.mirrors(snapshot)
    assert cache.table(snapshot) is kept  # the kept table, not one built for the snapshot
    _same(kept, columns.NodeTable.build(snapshot.nodes.values()))
