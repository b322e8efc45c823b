"""NodeName: a pod with ``spec.nodeName`` fits only that node.

Contract: moot for pending pods (their nodeName is empty: the plugin is skipped), kept
so a pod that names a node is judged as kube-scheduler would judge it.
"""

from __future__ import annotations

from typing import Final

from metricsched.core import columns, framework

NAME: Final = "NodeName"
REASON_NODE_NAME: Final = "node(s) didn't match the requested node name"


class NodeName:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        return framework.PASS if cycle.pod.node_name else framework.SKIP

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        wanted = cycle.table.rows.get(cycle.pod.node_name, -1)  # type: ignore[call-overload]
        return framework.rejected_where(rows != wanted, REASON_NODE_NAME)


PLUGIN: Final[framework.FilterPlugin] = NodeName()
