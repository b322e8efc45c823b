"""Scenes for kube-scheduler's score plugins: nodes, pods and snapshots as the runtime
builds them (NonZeroRequested summed per node, as the cluster cache does).

``pod`` extends the root conftest's with preferred terms and a controller; ``snapshot``
takes nodes and placed pods positionally.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from metricsched.core import model, parse
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
    snapshot = parse.snapshot_from(nodes, pods)
    states = {
        name: model.NodeState(
            node=state.node,
            requested=state.requested,
            used_ports=state.used_ports,
            pods=state.pods,
            nonzero_requested=parse.sum_resources(
                p.requests if p.nonzero_requests is None else p.nonzero_requests for p in state.pods
            ),
        )
        for name, state in snapshot.nodes.items()
    }
    return model.ClusterSnapshot(nodes=states, namespace_labels={})


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
