"""Helpers that run the filter plugins the way a cycle runs them.

``plugin_reason`` runs one plugin's PreFilter and Filter through
``framework.run_filters``; ``node_reasons`` runs the default profile (``profile``'s
``FILTERS``) over a whole snapshot, as ``cycle.schedule_one`` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import ModuleType

from metricsched.core import framework, model, profile
from tests.unit.conftest import build_cluster

NamespaceLabels = Mapping[str, Mapping[str, str]]


def _scene(
    nodes: tuple[model.NodeInfo | model.NodeState, ...], snapshot: model.ClusterSnapshot | None
) -> model.ClusterSnapshot:
    if snapshot is not None:
        return snapshot
    infos = [n for n in nodes if isinstance(n, model.NodeInfo)]
    states = {n.node.name: n for n in nodes if isinstance(n, model.NodeState)}
    scene = build_cluster(nodes=infos)
    return dataclasses.replace(scene, nodes={**scene.nodes, **states})


def plugin_reasons(
    plugin: ModuleType,
    pod: model.PodInfo,
    node: model.NodeInfo | model.NodeState,
    *,
    snapshot: model.ClusterSnapshot | None = None,
) -> tuple[str, ...]:
    """``plugin``'s reasons for rejecting ``pod`` on ``node`` (empty: it passes); a
    PreFilter refusal is the node's reason. ``snapshot`` (default: ``node`` alone) is the
    cluster the plugin sees."""
    scene = _scene((node,), snapshot)
    name = node.name if isinstance(node, model.NodeInfo) else node.node.name
    cycle = framework.CycleState.start(pod, scene)
    outcome = framework.run_filters(cycle, [plugin.PLUGIN])
    if outcome.refusal:
        return (outcome.refusal,)
    return tuple(outcome.rejected.get(name, ()))


def plugin_reason(
    plugin: ModuleType,
    pod: model.PodInfo,
    node: model.NodeInfo | model.NodeState,
    *,
    snapshot: model.ClusterSnapshot | None = None,
) -> str:
    """``plugin``'s one reason for rejecting ``pod`` on ``node``, or "" when it passes."""
    reasons = plugin_reasons(plugin, pod, node, snapshot=snapshot)
    assert len(reasons) <= 1, reasons
    return reasons[0] if reasons else ""


def node_reasons(
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    *,
    namespace_labels: NamespaceLabels | None = None,
) -> dict[model.NodeName, tuple[str, ...]]:
    """Every node's reasons under the default profile (``profile.node_reasons``), with
    the namespaces' labels as the Namespace watch would have given them."""
    if namespace_labels is not None:
        snapshot = dataclasses.replace(snapshot, namespace_labels=namespace_labels)
    return profile.node_reasons(pod, snapshot)


def pre_filter_refusal(pod: model.PodInfo, snapshot: model.ClusterSnapshot) -> str:
    """The default profile's PreFilter refusal for ``pod`` ("" when there is none)."""
    cycle = framework.CycleState.start(pod, snapshot)
    return profile.find_feasible(cycle).refusal
