"""The PostFilter message: what kube-scheduler's DefaultPreemption would say, without preempting.

metricsched does not preempt (README "Preemption"). When a pod fits nowhere,
kube-scheduler runs DefaultPreemption and appends its answer to the FitError text as
``preemption: <message>``; users and tools read that suffix, so metricsched works it out
the same way (pkg/scheduler/framework/preemption, plugins/defaultpreemption, v1.35):

- a pod with ``preemptionPolicy: Never`` is not eligible: ``not eligible due to
  preemptionPolicy=Never.``
- only nodes whose filter status is Unschedulable (not UnschedulableAndUnresolvable) are
  candidates: the others say ``Preemption is not helpful for scheduling``;
- on a candidate without pods of lower priority: ``No preemption victims found for
  incoming pod``; with them, the filters run again as if they were gone, and a node that
  still fails reports those reasons.

Where evicting lower-priority pods would make a node fit, kube-scheduler would preempt;
metricsched says that it does not, instead of pretending preemption would not help.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from metricsched.core import columns, framework, model, node_state, profile
from metricsched.core.plugins import (
    dynamic_resources,
    inter_pod_affinity,
    node_ports,
    node_resources_fit,
    node_volume_limits,
    pod_topology_spread,
)

NAME: Final = "DefaultPreemption"
PREFIX: Final = "preemption: "
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
PREEMPT_NEVER: Final = "Never"

# Filter reasons kube-scheduler reports with status Unschedulable (removing pods may help);
# every other reason is UnschedulableAndUnresolvable. NodeResourcesFit's "Insufficient x"
# is resolvable unless the pod asks for more than the node's whole allocatable.
_RESOLVABLE: Final = frozenset(
    {
        node_resources_fit.filtering.REASON_TOO_MANY_PODS,
        node_ports.REASON_NODE_PORTS,
        pod_topology_spread.filtering.REASON_SPREAD,
        inter_pod_affinity.filtering.REASON_POD_ANTI_AFFINITY,
        inter_pod_affinity.filtering.REASON_EXISTING_ANTI_AFFINITY,
        node_volume_limits.REASON_MAX_VOLUME_COUNT,
    }
)
_INSUFFICIENT: Final = "Insufficient "
# A dry run that passes NodePorts and NodeResourcesFit needs the later filters, which read
# the whole cluster (topology spread, inter-pod affinity): at most this many such runs per
# message (kube-scheduler's minCandidateNodesAbsolute); past it, a node that fits its
# resources once its victims are gone counts as one preemption would help.
MAX_CLUSTER_DRY_RUNS: Final = 100


def suffix(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None = None,
    reasons: Mapping[model.NodeName, Sequence[str]],
) -> str:
    """The PostFilter text to append to the FitError text of ``pod``:
    `` no new claims to deallocate, preemption: …`` (DynamicResources' answer for a pod
    without claims, then DefaultPreemption's, as kube-scheduler v1.35 joins them; from
    v1.37 `` preemption: …``, DynamicResources saying nothing).

    ``reasons`` holds each node's filter reasons as ``core.profile.find_feasible`` gives them
    (a node missing or with no reasons was ruled out by something removing pods cannot
    change, such as a metric threshold).
    """
    claims = "" if pod.resource_claims else dynamic_resources.post_filter_words(snapshot.rules)
    return (
        " " + claims + PREFIX + _message(pod=pod, snapshot=snapshot, table=table, reasons=reasons)
    )


def _message(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None,
    reasons: Mapping[model.NodeName, Sequence[str]],
) -> str:
    if pod.preemption_policy == PREEMPT_NEVER:
        return NOT_ELIGIBLE_NEVER
    statuses: dict[model.NodeName, tuple[str, ...]] = {}
    would_fit = 0
    budget = [MAX_CLUSTER_DRY_RUNS]
    table = columns.table_of(snapshot, table)
    memo = framework.Memo()
    for name, state in snapshot.nodes.items():
        node_reasons = reasons.get(name, ())
        if not _resolvable(pod, state.node, node_reasons):
            statuses[name] = (NOT_HELPFUL,)
            continue
        victims = [other for other in state.pods if other.priority < pod.priority]
        if not victims:
            statuses[name] = (NO_VICTIMS,)
            continue
        after = _dry_run(
            pod=pod,
            snapshot=snapshot,
            table=table,
            memo=memo,
            name=name,
            victims=victims,
            budget=budget,
        )
        if after:
            statuses[name] = after
        else:
            would_fit += 1
    if would_fit:
        return not_preempting(would_fit)
    return profile.fit_error_message(len(snapshot.nodes), statuses)


def not_preempting(nodes: int) -> str:
    """What metricsched says where kube-scheduler would preempt: on ``nodes`` nodes,
    evicting pods of lower priority would make the pod fit."""
    return (
        f"{nodes} node(s) would fit the pod if pods of lower priority were evicted, "
        "but metricsched does not preempt; use a scheduler that does "
        "(default-scheduler) for pods that need preemption."
    )


def _resolvable(pod: model.PodInfo, node: model.NodeInfo, reasons: Sequence[str]) -> bool:
    if not reasons:
        return False
    for reason in reasons:
        if reason in _RESOLVABLE:
            continue
        if reason.startswith(_INSUFFICIENT) and not _exceeds_allocatable(
            pod.requests, node.allocatable, reason.removeprefix(_INSUFFICIENT)
        ):
            continue
        return False
    return True


def _exceeds_allocatable(request: model.Resources, allocatable: model.Resources, name: str) -> bool:
    if name == "cpu":
        return request.milli_cpu > allocatable.milli_cpu
    if name == "memory":
        return request.memory > allocatable.memory
    if name == "ephemeral-storage":
        return request.ephemeral_storage > allocatable.ephemeral_storage
    return request.scalar.get(name, 0) > allocatable.scalar.get(name, 0)


def _dry_run(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable,
    memo: framework.Memo,
    name: model.NodeName,
    victims: Sequence[model.PodInfo],
    budget: list[int],
) -> tuple[str, ...]:
    """The node's filter reasons for ``pod`` with ``victims`` gone (empty: it would fit).

    ``budget[0]`` counts down the whole-cluster runs this message may still make.
    """
    gone = {victim.uid for victim in victims}
    state = snapshot.nodes[name]
    left = tuple(other for other in state.pods if other.uid not in gone)
    emptied = node_state.build(state.node, left, recent_binds=state.recent_binds)
    # The node passed every filter before NodePorts; these two need this node only. The
    # dry run filters with the nominated pods as the cycle does (kube-scheduler's
    # SelectVictimsOnNode runs RunFilterPluginsWithNominatedPods): the first pass, with
    # the node's nominated pods of equal or higher priority, fails wherever the second
    # (without them) would for these two.
    counted = framework.nominated_counted(pod, snapshot.nominated.get(name, ()))
    occupied = framework.with_nominated(emptied, counted)
    if node_ports.conflicts(pod.host_ports, occupied.used_ports):
        return (node_ports.REASON_NODE_PORTS,)
    dra = node_resources_fit.filtering.dra_backed(pod.requests, snapshot)
    if fit := node_resources_fit.filtering.shortfalls(pod.requests, occupied, dra=dra):
        return fit
    if budget[0] <= 0:
        return ()
    budget[0] -= 1
    trial, trial_table = columns.replace_state(snapshot, table, emptied)
    return profile.node_reasons(pod, trial, table=trial_table, memo=memo).get(name, ())
