"""Scenes for kube-scheduler's score plugins: nodes, pods and snapshots as the runtime
builds them (``core.node_state``, the cluster cache's builder).

``pod`` extends the root conftest's with preferred terms and a controller; ``snapshot``
takes nodes and placed pods positionally. ``table_scores`` and ``node_scores`` call a
plugin's ``score`` over a ``framework.CycleState`` as the cycle does, and give plain floats.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from metricsched.core import columns, framework, model, node_state, parse
from metricsched.core.plugins import inter_pod_affinity
from tests.unit.conftest import build_node_body, build_pod_body

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def make_node(name: str, **features: Any) -> model.NodeInfo:
    return parse.node_from_body(build_node_body(name, **features))


def make_pod(
    name: str = "incoming",
    *,
    preferred_nodes: Sequence[Mapping[str, Any]] = (),
    preferred_pods: Sequence[Mapping[str, Any]] = (),
    preferred_away: Sequence[Mapping[str, Any]] = (),
    owner: tuple[str, str] | None = None,
    **features: Any,
) -> model.PodInfo:
    """A pod; ``preferred_*`` are preferred node / pod affinity / pod anti-affinity terms,
    ``owner`` its controller (kind, uid)."""
    body = build_pod_body(name, **features)
    affinity = body["spec"].setdefault("affinity", {})
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    for section, terms in (
        ("nodeAffinity", preferred_nodes),
        ("podAffinity", preferred_pods),
        ("podAntiAffinity", preferred_away),
    ):
        if terms:
            affinity.setdefault(section, {})[key] = [dict(t) for t in terms]
    if owner is not None:
        kind, uid = owner
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": uid, "uid": uid, "controller": True}
        ]
    return parse.pod_from_body(body)


def make_cluster(
    nodes: Sequence[model.NodeInfo], pods: Sequence[model.PodInfo] = ()
) -> model.ClusterSnapshot:
    return dataclasses.replace(node_state.snapshot(nodes, pods), namespace_labels={})


def states(snapshot: model.ClusterSnapshot) -> tuple[model.NodeState, ...]:
    """Every node of the snapshot, by name (the order the cycle scores them in)."""
    return tuple(snapshot.nodes[name] for name in sorted(snapshot.nodes))


def pod_term(labels: Mapping[str, str], key: str, weight: int) -> dict[str, Any]:
    """A weighted pod affinity term selecting ``labels`` over topology ``key``."""
    return {
        "weight": weight,
        "podAffinityTerm": {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key},
    }


@pytest.fixture(scope="session")
def pod() -> Callable[..., model.PodInfo]:
    return make_pod


@pytest.fixture(scope="session")
def snapshot() -> Callable[..., model.ClusterSnapshot]:
    return make_cluster


def rows_of(snapshot: model.ClusterSnapshot, nodes: Sequence[model.NodeState]) -> columns.Rows:
    """The table rows of ``nodes`` (the table is sorted by node name)."""
    index = columns.table_of(snapshot).rows
    return np.array([index[state.node.name] for state in nodes], dtype=np.intp)


def cycle_of(pod: model.PodInfo, snapshot: model.ClusterSnapshot) -> framework.CycleState:
    """The cycle the scheduler starts for ``pod`` over ``snapshot``."""
    return framework.CycleState.start(pod, snapshot)


def table_scores(
    plugin: ModuleType,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    nodes: Sequence[model.NodeState] | None = None,
) -> tuple[float, ...] | None:
    """``plugin.score`` over a cycle for ``pod``: one score per node of ``nodes`` (default:
    every node, by name), as plain floats; None when the plugin is skipped."""
    cycle = cycle_of(pod, snapshot)
    rows = np.arange(len(cycle.table), dtype=np.intp) if nodes is None else rows_of(snapshot, nodes)
    found = plugin.score(cycle, rows)
    return None if found is None else tuple(found.tolist())


def node_scores(
    plugin: ModuleType,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    nodes: Sequence[model.NodeState] | None = None,
) -> tuple[float, ...] | None:
    """``plugin.score`` for the plugin that still takes node states (InterPodAffinity),
    with a fresh memo and the snapshot's table as a cycle gives them."""
    cycle = cycle_of(pod, snapshot)
    chosen = states(snapshot) if nodes is None else tuple(nodes)
    if plugin is inter_pod_affinity.scoring:
        found = inter_pod_affinity.scoring.score(
            pod=pod, nodes=chosen, snapshot=snapshot, table=cycle.table, memo=cycle.memo
        )
    else:
        raise ValueError(f"{plugin.__name__} scores table rows: use table_scores")
    return None if found is None else tuple(found)


def every_row(snapshot: model.ClusterSnapshot) -> columns.Rows:
    """Every row of the snapshot's table (all nodes, by name)."""
    return np.arange(len(snapshot.nodes), dtype=np.intp)
