"""PodTopologySpread (Filter): every DoNotSchedule constraint stays within its maxSkew.

Contract: placing the pod on a node keeps, for each ``whenUnsatisfiable: DoNotSchedule``
constraint, ``matching pods in the node's domain + (1 if the pod matches itself) -
global minimum <= maxSkew``, and the node carries every constraint's topology key.
Domains are those of nodes carrying every key that pass the pod's node affinity
(``nodeAffinityPolicy: Honor``, the default) and, with ``nodeTaintsPolicy: Honor``, its
taints; fewer eligible domains than ``minDomains`` make the global minimum 0.

PreFilter parses the constraints (an invalid one refuses the pod with kube-scheduler's
``get constraints from pod`` text) and counts matching pods per domain once per cycle;
Filter compares per node. Counts of one selector on an unchanged node are kept in the
memo. Its score half (ScheduleAnyway) is ``pod_topology_spread.scoring``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from metricsched.core import columns, framework, model, selectors
from metricsched.core.plugins import taint_toleration

NAME: Final = "PodTopologySpread"
REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_MISSING_LABEL: Final = REASON_SPREAD + " (missing required label)"


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: selectors.Selector
    min_domains: int
    honor_node_affinity: bool  # nodeAffinityPolicy, default Honor
    honor_node_taints: bool  # nodeTaintsPolicy, default Ignore

    @classmethod
    def parse(cls, raw: object, pod: model.PodInfo, *, where: str) -> Constraint | None:
        if not isinstance(raw, Mapping):
            raise selectors.InvalidSpecError(f"{where}: must be an object")
        if raw.get("whenUnsatisfiable") != "DoNotSchedule":
            return None  # ScheduleAnyway only affects kube-scheduler's score
        max_skew = raw.get("maxSkew")
        key = raw.get("topologyKey")
        min_domains = raw.get("minDomains", 1)
        if min_domains is None:
            min_domains = 1
        if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
            raise selectors.InvalidSpecError(f"{where}.maxSkew: must be a positive integer")
        if not isinstance(key, str) or not key:
            raise selectors.InvalidSpecError(f"{where}.topologyKey: must be a non-empty string")
        if isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains < 1:
            raise selectors.InvalidSpecError(f"{where}.minDomains: must be a positive integer")
        selector = selectors.label_selector(
            raw.get("labelSelector"), where=f"{where}.labelSelector"
        )
        selector = selectors.merge_match_label_keys(
            selector, raw.get("matchLabelKeys"), pod, where=where
        )
        return cls(
            max_skew=max_skew,
            topology_key=key,
            selector=selector,
            min_domains=min_domains,
            honor_node_affinity=raw.get("nodeAffinityPolicy", "Honor") != "Ignore",
            honor_node_taints=raw.get("nodeTaintsPolicy", "Ignore") == "Honor",
        )


def constraints_of(pod: model.PodInfo) -> tuple[Constraint, ...] | str:
    """The pod's DoNotSchedule constraints, or kube-scheduler's refusal for invalid ones."""
    found: list[Constraint] = []
    try:
        for index, raw in enumerate(pod.topology_spread):
            where = f"topologySpreadConstraints[{index}]"
            if (constraint := Constraint.parse(raw, pod, where=where)) is not None:
                found.append(constraint)
    except selectors.InvalidSpecError as error:
        return f"get constraints from pod: {error}"
    return tuple(found)


def count_matching(
    memo: framework.Memo,
    state: model.NodeState,
    selector: selectors.Selector,
    *,
    namespace: str,
    key: selectors.MemoKey,
) -> int:
    """countPodsMatchSelector: pods on the node in ``namespace``, not terminating, that
    ``selector`` selects (an empty selector counts none). ``key`` stands for (selector,
    namespace): replicas of one workload share it, so an unchanged node is counted once."""
    if selector.empty or selector.nothing:
        return 0
    counts = memo.per_state("matching-pods", state)
    count = counts.get(key)
    if count is None:
        count = counts[key] = sum(
            1
            for p in state.pods
            if p.namespace == namespace and not p.deleting and selector.matches(p.labels)
        )
    assert isinstance(count, int)
    return count


@dataclasses.dataclass(slots=True)
class SpreadState:
    """Matching pods per topology value for each constraint, and the global minimums."""

    constraints: tuple[Constraint, ...]
    counts: list[dict[str, int]]
    minimums: list[int]
    self_match: list[int]

    @classmethod
    def build(
        cls,
        pod: model.PodInfo,
        constraints: tuple[Constraint, ...],
        *,
        required: selectors.RequiredNodeAffinity,
        table: columns.NodeTable,
        memo: framework.Memo,
    ) -> SpreadState:
        keys = tuple(c.topology_key for c in constraints)
        counts: list[dict[str, int]] = [{} for _ in constraints]
        honors_affinity = any(c.honor_node_affinity for c in constraints)
        memo_keys = [selectors.MemoKey((c.selector, pod.namespace)) for c in constraints]
        for state in table.states:
            node = state.node
            labels = node.labels
            # Only nodes carrying every constraint's key form domains.
            if not all(key in labels for key in keys):
                continue
            affinity_ok = not honors_affinity or required.matches(node)
            for index, constraint in enumerate(constraints):
                if constraint.honor_node_affinity and not affinity_ok:
                    continue
                if constraint.honor_node_taints and taint_toleration.filtering.untolerated(
                    pod.tolerations, node
                ):
                    continue
                value = labels[constraint.topology_key]
                bucket = counts[index]
                bucket[value] = bucket.get(value, 0) + count_matching(
                    memo, state, constraint.selector, namespace=pod.namespace, key=memo_keys[index]
                )
        minimums = [
            # Fewer eligible domains than minDomains: the global minimum counts as 0.
            0 if len(bucket) < c.min_domains else min(bucket.values())
            for c, bucket in zip(constraints, counts, strict=True)
        ]
        self_match = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        return cls(constraints, counts, minimums, self_match)

    def check(self, state: model.NodeState) -> str:
        labels = state.node.labels
        for index, constraint in enumerate(self.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return REASON_SPREAD_MISSING_LABEL
            matching = self.counts[index].get(value, 0)
            skew = matching + self.self_match[index] - self.minimums[index]
            if skew > constraint.max_skew:
                return REASON_SPREAD
        return ""


class PodTopologySpread:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        pod = cycle.pod
        constraints = cycle.memo.derived(
            "PodTopologySpread/constraints", pod, lambda: constraints_of(pod)
        )
        if isinstance(constraints, str):
            return framework.refuse(constraints)
        if not constraints:
            return framework.SKIP
        required = cycle.memo.derived(
            "RequiredNodeAffinity", pod, lambda: selectors.RequiredNodeAffinity.of(pod)
        )
        cycle.data[NAME] = SpreadState.build(
            pod, constraints, required=required, table=cycle.table, memo=cycle.memo
        )
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        spread = cycle.data[NAME]
        assert isinstance(spread, SpreadState)
        return framework.scalar_filter(rows, cycle.table, spread.check)


PLUGIN: Final[framework.FilterPlugin] = PodTopologySpread()
