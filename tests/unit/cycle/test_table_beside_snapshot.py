"""The node table sits beside the snapshot and is read only for the state it mirrors.

A table names the mapping of node states it was made from and that mapping's version
(``core.columns``); ``table_of`` hands the cycle a table only when both are the
snapshot's. A snapshot of the same size with a changed node is never scored from the
table of the old one, whether the caller passes that table or the cache moved on.
"""

from __future__ import annotations

import dataclasses

from metricsched.core import columns, model, parse
from metricsched.runtime import cache as cache_mod
from tests.unit.conftest import NOW, build_node_state, build_pod_info, build_snapshot, run_cycle

GIB = 1024**3


def _decide(snapshot: model.ClusterSnapshot, table: columns.NodeTable | None) -> model.Decision:
    return run_cycle(
        pod=build_pod_info("web-1", cpu=500), snapshot=snapshot, table=table, detail=False
    )


def _three_nodes() -> model.ClusterSnapshot:
    """node-2 is the emptiest: the default policy (LeastAllocated) places there."""
    return build_snapshot(
        build_node_state("node-1", requested_cpu=2000, requested_memory=4 * GIB),
        build_node_state("node-2"),
        build_node_state("node-3", requested_cpu=3000, requested_memory=6 * GIB),
    )


def test_a_same_size_snapshot_with_a_changed_node_is_never_scored_from_the_stale_table():
    before = _three_nodes()
    stale = columns.NodeTable.of(before)
    assert _decide(before, stale).node == "node-2"
    # node-2 fills up: same names, same size, another state
    full = build_node_state("node-2", requested_cpu=3900, requested_memory=7 * GIB)
    after = dataclasses.replace(before, nodes={**before.nodes, model.NodeName("node-2"): full})

    assert not stale.mirrors(after)
    assert columns.table_of(after, stale) is not stale
    assert _decide(after, stale) == _decide(after, None)
    assert _decide(after, stale).node == "node-1"


def test_a_table_mirrors_its_snapshot_and_is_used_as_it_is():
    snapshot = _three_nodes()
    table = columns.NodeTable.of(snapshot)
    assert table.mirrors(snapshot)
    assert columns.table_of(snapshot, table) is table
    # a snapshot replaced in another field (namespace labels) keeps the nodes: same table
    labelled = dataclasses.replace(snapshot, namespace_labels={})
    assert columns.table_of(labelled, table) is table
    # a table built without a snapshot mirrors none
    assert not columns.NodeTable.build(snapshot.nodes.values()).mirrors(snapshot)


def test_a_dry_runs_table_mirrors_the_dry_run_and_not_the_snapshot_it_came_from():
    snapshot = _three_nodes()
    table = columns.NodeTable.of(snapshot)
    emptied = build_node_state("node-3")
    trial, trial_table = columns.replace_state(snapshot, table, emptied)
    assert trial_table is not None and trial_table.mirrors(trial)
    assert not trial_table.mirrors(snapshot) and not table.mirrors(trial)
    assert trial_table.states[2] is emptied and table.states[2] is snapshot.nodes["node-3"]
    # a table that does not mirror the snapshot is not carried into the dry run
    assert columns.replace_state(snapshot, columns.NodeTable.of(trial), emptied)[1] is None


def _node(name: str, cpu: str) -> model.NodeInfo:
    return parse.node_from_body(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }
    )


def test_the_caches_table_is_not_read_for_a_snapshot_it_has_moved_past():
    cache = cache_mod.ClusterCache()
    for name in ("node-1", "node-2", "node-3"):
        cache.upsert_node(_node(name, "4"))
    first = cache.snapshot(now=NOW)
    kept = cache.table(first)
    assert kept.mirrors(first)

    cache.upsert_node(_node("node-2", "1"))  # same nodes, node-2 shrinks
    second = cache.snapshot(now=NOW)
    assert second.nodes_version != first.nodes_version
    assert cache.table(second) is kept and kept.mirrors(second)  # kept row by row
    assert not kept.mirrors(first)  # the older snapshot's state is not this table's
    assert cache.table(first) is not kept
