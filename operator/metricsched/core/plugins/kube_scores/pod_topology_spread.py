"""PodTopologySpread's score: ScheduleAnyway constraints and the system default spreading.

Contract (kube-scheduler v1.35 ``scoring.go``):

- Constraints: the pod's ``whenUnsatisfiable: ScheduleAnyway`` ones; a pod with no
  constraints at all gets the system defaults (``kubernetes.io/hostname`` maxSkew 3,
  ``topology.kubernetes.io/zone`` maxSkew 5) when it belongs to a workload. A pod with
  only DoNotSchedule constraints is not scored here (the filter handles them).
- Nodes: with the pod's own constraints, a scored node lacking any constraint's key is
  ignored (scores 0); with the system defaults every node counts (no zone label: only
  hostname spreading applies to it).
- Counts: for each constraint, pods matching its selector (same namespace, not
  terminating) in each topology value that some scored node has, over every node of the
  cluster that passes the constraint's node inclusion policies (nodeAffinityPolicy,
  default Honor; nodeTaintsPolicy, default Ignore); for hostname, the node's own pods.
- A node scores ``round(sum(count * log(domains + 2) + maxSkew - 1))`` (domains: the
  number of topology values among the scored nodes, or of scored nodes for hostname),
  normalised as ``100 * (max + min - score) // max`` (all 0: 100 each).

The one approximation: kube-scheduler's default selector is the union of the selectors
of the Services, ReplicationControllers, ReplicaSets and StatefulSets that select the pod
(``helper.DefaultSelector``); metricsched watches none of those, so it counts the pods
whose controller ownerReference (a ReplicaSet, StatefulSet or ReplicationController) is
the pod's own. That is the same set for the pods those controllers create; it differs for
pods a controller's selector matches but did not create, and pods that belong only to a
Service (no controller) get no default spreading here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from metricsched.core import framework, model, selectors
from metricsched.core.plugins import pod_topology_spread as filter_spread
from metricsched.core.plugins import taint_toleration as taint_filter

NAME: Final = "PodTopologySpread"
SHORT_NAME: Final = NAME
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"
# kube-scheduler's systemDefaultConstraints: (topology key, maxSkew), ScheduleAnyway.
SYSTEM_DEFAULTS: Final = ((HOSTNAME, 3), (ZONE, 5))
_SCHEDULE_ANYWAY: Final = "ScheduleAnyway"


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: selectors.Selector | None  # None: the pods of the pod's own controller
    honor_node_affinity: bool = True  # nodeAffinityPolicy, default Honor
    honor_node_taints: bool = False  # nodeTaintsPolicy, default Ignore


def constraints_of(pod: model.PodInfo) -> tuple[tuple[Constraint, ...], bool]:
    """The pod's soft constraints and whether they are the system defaults."""
    if not pod.topology_spread:
        if not pod.controller:
            return (), False
        return tuple(Constraint(skew, key, None) for key, skew in SYSTEM_DEFAULTS), True
    found = []
    for index, raw in enumerate(pod.topology_spread):
        if not isinstance(raw, Mapping) or raw.get("whenUnsatisfiable") != _SCHEDULE_ANYWAY:
            continue
        where = f"topologySpreadConstraints[{index}]"
        max_skew, key = raw.get("maxSkew"), raw.get("topologyKey")
        if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
            continue  # the API server rejects these; never a crash here
        if not isinstance(key, str) or not key:
            continue
        try:
            selector = selectors.label_selector(raw.get("labelSelector"), where=where)
            selector = selectors.merge_match_label_keys(
                selector, raw.get("matchLabelKeys"), pod, where=where
            )
        except selectors.InvalidSpecError:
            continue
        found.append(
            Constraint(
                max_skew=max_skew,
                topology_key=key,
                selector=selector,
                honor_node_affinity=raw.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_node_taints=raw.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(found), False


def _controller_counts(state: model.NodeState) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for p in state.pods:
        if p.controller and not p.deleting:
            key = (p.namespace, p.controller)
            counts[key] = counts.get(key, 0) + 1
    return counts


def _counter(
    pod: model.PodInfo, constraint: Constraint, memo: framework.Memo
) -> Callable[[model.NodeState], int]:
    selector = constraint.selector
    if selector is None:
        key = (pod.namespace, pod.controller)
        # Pods per (namespace, controller) on a node, worked out once per unchanged node.
        return lambda state: memo.derived(
            "controller-counts", state, lambda: _controller_counts(state)
        ).get(key, 0)
    memo_key = selectors.MemoKey((selector, pod.namespace))
    return lambda state: filter_spread.count_matching(
        memo, state, selector, namespace=pod.namespace, key=memo_key
    )


def _included(
    pod: model.PodInfo,
    constraint: Constraint,
    node: model.NodeInfo,
    required: Callable[[model.NodeInfo], bool] | None,
) -> bool:
    if constraint.honor_node_affinity and required is not None and not required(node):
        return False
    return not (constraint.honor_node_taints and taint_filter.untolerated(pod.tolerations, node))


def score(
    *,
    pod: model.PodInfo,
    nodes: Sequence[model.NodeState],
    snapshot: model.ClusterSnapshot,
    memo: framework.Memo,
) -> tuple[float, ...] | None:
    """PodTopologySpread for each of ``nodes``, normalised; None without soft constraints."""
    constraints, system = constraints_of(pod)
    if not constraints:
        return None
    require_all = not system
    keys = [c.topology_key for c in constraints]
    counters = [_counter(pod, c, memo) for c in constraints]

    def has_all(labels: Mapping[str, str]) -> bool:
        return all(key in labels for key in keys)

    ignored = {s.node.name for s in nodes if require_all and not has_all(s.node.labels)}
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for state in nodes:
        if state.node.name in ignored:
            continue
        for index, key in enumerate(keys):
            if key != HOSTNAME:
                counts[index].setdefault(state.node.labels.get(key, ""), 0)
    weights = [
        math.log((len(nodes) - len(ignored) if key == HOSTNAME else len(counts[i])) + 2)
        for i, key in enumerate(keys)
    ]
    affinity = selectors.RequiredNodeAffinity.of(pod)
    required = None if affinity.trivial else affinity.matches
    # Hostname domains are counted per scored node below; the others over every node.
    domains = [index for index, key in enumerate(keys) if key != HOSTNAME]
    # Whether a constraint's node inclusion policies can rule a node out at all.
    filtered = [
        (c.honor_node_affinity and required is not None) or c.honor_node_taints for c in constraints
    ]
    for state in snapshot.nodes.values() if domains else ():
        labels = state.node.labels
        if require_all and not has_all(labels):
            continue
        for index in domains:
            bucket = counts[index]
            value = labels.get(keys[index], "")
            if value not in bucket or (
                filtered[index] and not _included(pod, constraints[index], state.node, required)
            ):
                continue
            bucket[value] += counters[index](state)

    raw: list[int | None] = []
    for state in nodes:
        labels = state.node.labels
        if state.node.name in ignored:
            raw.append(None)
            continue
        total = 0.0
        for index, constraint in enumerate(constraints):
            domain = labels.get(constraint.topology_key)
            if domain is None:
                continue
            if constraint.topology_key == HOSTNAME:
                count = counters[index](state)
            else:
                count = counts[index][domain]
            total += count * weights[index] + constraint.max_skew - 1
        raw.append(math.floor(total + 0.5))  # Go's math.Round for non-negative numbers
    present = [value for value in raw if value is not None]
    low, high = min(present, default=0), max(present, default=0)
    return tuple(
        0.0 if value is None else 100.0 if high == 0 else float(100 * (high + low - value) // high)
        for value in raw
    )
