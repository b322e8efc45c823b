"""The default profile: kube-scheduler's filter plugins (v1.35-v1.37), in its order, and FitError.

``FILTERS`` lists the filter plugins as kube-scheduler's default profile enables them
(pkg/scheduler/apis/config/v1/default_plugins.go): NodeUnschedulable, NodeName,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, NodeVolumeLimits,
VolumeBinding (with VolumeRestrictions' and VolumeZone's checks), PodTopologySpread,
InterPodAffinity, NodeDeclaredFeatures (v1.36+: kube-scheduler appends it when its gate
is on), then DynamicResources (PreFilter only: pods with resource claims are refused).
``find_feasible`` runs them for one pod; ``fit_error_message`` renders what they found
as kube-scheduler's FitError text ("0/6 nodes are available: ..."), which users and
cluster autoscalers already know how to read. No I/O.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model
from metricsched.core.plugins import (
    dynamic_resources,
    inter_pod_affinity,
    node_affinity,
    node_declared_features,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    taint_toleration,
    volume_binding,
)

FILTERS: Final[tuple[framework.FilterPlugin, ...]] = (
    node_unschedulable.PLUGIN,
    node_name.PLUGIN,
    taint_toleration.filtering.PLUGIN,
    node_affinity.filtering.PLUGIN,
    node_ports.PLUGIN,
    node_resources_fit.filtering.PLUGIN,
    node_volume_limits.PLUGIN,
    volume_binding.PLUGIN,
    pod_topology_spread.filtering.PLUGIN,
    inter_pod_affinity.filtering.PLUGIN,
    node_declared_features.PLUGIN,
    dynamic_resources.PLUGIN,
)

NO_NODES_AVAILABLE: Final = "no nodes available to schedule pods"


def unsupported_reason(pod: model.PodInfo) -> str:
    """The refusal for a pod needing features we do not support ("" when none)."""
    if not pod.unsupported:
        return ""
    return (
        f"metricsched does not support {', '.join(pod.unsupported)} yet; "
        "remove it from the pod or let another scheduler place the pod "
        "(spec.schedulerName)"
    )


def find_feasible(cycle: framework.CycleState) -> framework.FilterOutcome:
    """kube-scheduler's PreFilter and Filter for the cycle's pod over every node; a pod
    needing an unsupported feature is refused first, as ``cycle.schedule_one`` does."""
    if refusal := unsupported_reason(cycle.pod):
        return framework.FilterOutcome(refusal, np.empty(0, dtype=np.intp), {})
    return framework.run_filters_with_nominated(cycle, FILTERS)


def node_reasons(
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    *,
    table: columns.NodeTable | None = None,
    memo: framework.Memo | None = None,
) -> dict[model.NodeName, tuple[str, ...]]:
    """Every node's reasons for rejecting ``pod`` (empty: it passes every filter); a
    PreFilter refusal is every node's reason. For tests, ``explain`` and dry runs."""
    cycle = framework.CycleState.start(pod, snapshot, table=table, memo=memo)
    found = find_feasible(cycle)
    if found.refusal:
        return dict.fromkeys(cycle.table.names, (found.refusal,))
    return {name: found.rejected.get(name, ()) for name in cycle.table.names}


def fit_error_message(
    num_nodes: int,
    reasons: Mapping[model.NodeName, Sequence[str]],
    extra: Mapping[str, int] | None = None,
    *,
    pre_filter_msg: str = "",
) -> str:
    """kube-scheduler's FitError text, e.g.
    ``0/6 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu.``

    Each reason is counted once per node that reports it (a node short of cpu and memory
    counts in both), ``extra`` adds counted reasons of our own (metric thresholds), and
    the "<count> <reason>" entries are sorted as plain strings like Go's sort.Strings.
    With ``pre_filter_msg`` the message carries that pod-level reason instead of counts.
    """
    if num_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{num_nodes} nodes are available:"
    if pre_filter_msg:
        return f"{message} {pre_filter_msg}."
    counts: collections.Counter[str] = collections.Counter()
    for reasons_of_node in reasons.values():
        counts.update(reasons_of_node)
    for reason, count in (extra or {}).items():
        counts[reason] += count
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items() if count > 0)
    if histogram:
        message += f" {', '.join(histogram)}."
    return message
