"""NodeUnschedulable: a cordoned node admits only pods that tolerate the cordon.

Contract: a node with ``spec.unschedulable`` passes only a pod tolerating the
``node.kubernetes.io/unschedulable:NoSchedule`` taint. Vector: one column read.
"""

from __future__ import annotations

from typing import Final

from metricsched.core import columns, framework, model, selectors

NAME: Final = "NodeUnschedulable"
REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT: Final = model.Taint(
    "node.kubernetes.io/unschedulable", "", model.TaintEffect.NO_SCHEDULE
)


class NodeUnschedulable:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        if selectors.tolerates(cycle.pod.tolerations, UNSCHEDULABLE_TAINT):
            return framework.SKIP
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        return framework.rejected_where(cycle.table.unschedulable[rows], REASON_UNSCHEDULABLE)


PLUGIN: Final[framework.FilterPlugin] = NodeUnschedulable()
