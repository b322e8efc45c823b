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
from collections.abc import Mapping
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, selectors
from metricsched.core.plugins import taint_toleration
from metricsched.core.plugins.pod_topology_spread import filtering

NAME: Final = filtering.NAME
SHORT_NAME: Final = NAME
DEFAULT_WEIGHT: Final = 2  # its weight in kube-scheduler's default profile (v1.35)
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


def _matching_counts(
    memo: framework.Memo, table: columns.NodeTable, pod: model.PodInfo, constraint: Constraint
) -> columns.Ints:
    """Pods each node holds that ``constraint`` counts (its selector's, or those of the
    pod's own controller), not terminating, in the pod's namespace; kept per workload and
    updated only for the nodes that changed."""
    namespace = pod.namespace
    selector = constraint.selector
    if selector is None:
        controller = pod.controller
        return memo.per_row(
            "PodTopologySpread/controller-pods",
            (namespace, controller),
            table,
            lambda state: sum(
                1
                for p in state.pods
                if p.controller == controller and p.namespace == namespace and not p.deleting
            ),
        )
    memo_key = selectors.MemoKey((selector, namespace))
    return memo.per_row(
        "PodTopologySpread/selected-pods",
        memo_key,
        table,
        lambda state: filtering.count_matching(
            memo, state, selector, namespace=namespace, key=memo_key
        ),
    )


def _included(
    cycle: framework.CycleState, constraint: Constraint, affinity: selectors.RequiredNodeAffinity
) -> columns.Bools:
    """The nodes whose pods ``constraint`` counts: its node inclusion policies."""
    by_affinity = constraint.honor_node_affinity and not affinity.trivial
    by_taints = constraint.honor_node_taints
    table = cycle.table
    if not (by_affinity or by_taints):
        return np.ones(len(table), dtype=np.bool_)
    tolerations = cycle.pod.tolerations if by_taints else ()
    return cycle.memo.per_table(
        "PodTopologySpread/included",
        (affinity if by_affinity else None, by_taints, tolerations),
        table,
        lambda: np.fromiter(
            (
                not (by_affinity and not affinity.matches(state.node))
                and not (
                    by_taints and taint_toleration.filtering.untolerated(tolerations, state.node)
                )
                for state in table.states
            ),
            dtype=np.bool_,
            count=len(table),
        ),
    )


def score(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats | None:
    """PodTopologySpread for each node of ``rows``, normalised; None without soft
    constraints. Vector operations over the node table: per node, the pods each
    constraint counts (kept per workload); per domain, their sum (``bincount``)."""
    pod, table, memo = cycle.pod, cycle.table, cycle.memo
    constraints, system = memo.derived(
        "PodTopologySpread/soft-constraints", pod, lambda: constraints_of(pod)
    )
    if not constraints:
        return None
    keys = tuple(c.topology_key for c in constraints)
    domains = [table.label_ids(key)[0] for key in keys]
    everywhere = np.ones(len(table), dtype=np.bool_)
    has_all = everywhere
    if not system:  # with the pod's own constraints, nodes lacking a key are ignored
        for ids in domains:
            has_all = has_all & (ids != 0)
    kept = rows[has_all[rows]]
    affinity = memo.derived(
        "RequiredNodeAffinity", pod, lambda: selectors.RequiredNodeAffinity.of(pod)
    )
    total = np.zeros(len(kept))
    for constraint, ids in zip(constraints, domains, strict=True):
        counts = _matching_counts(memo, table, pod, constraint)
        kept_ids = ids[kept]
        if constraint.topology_key == HOSTNAME:
            weight = math.log(len(kept) + 2)
            count = counts[kept]
        else:
            # Domains: the values among the scored nodes ("no label" is one of them),
            # counted by bincount (label numbers are small): no sort or hash per pod.
            weight = math.log(np.count_nonzero(np.bincount(kept_ids)) + 2)
            eligible = has_all & _included(cycle, constraint, affinity)
            sums = np.bincount(
                ids[eligible], weights=counts[eligible], minlength=int(ids.max()) + 1
            )
            count = sums[kept_ids]
        total = total + np.where(kept_ids != 0, count * weight + constraint.max_skew - 1, 0.0)
    raw = np.floor(total + 0.5).astype(np.int64)  # Go's math.Round for non-negative numbers
    low = int(raw.min()) if len(raw) else 0
    high = int(raw.max()) if len(raw) else 0
    scores = np.zeros(len(rows))
    if high == 0:
        scores[has_all[rows]] = 100.0
    else:
        scores[has_all[rows]] = (100 * (high + low - raw) // high).astype(np.float64)
    return scores
