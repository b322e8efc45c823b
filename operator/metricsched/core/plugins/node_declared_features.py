"""NodeDeclaredFeatures (Filter, KEP-5328): a pod needing a node feature fits only nodes
declaring it.

Contract: on v1.36+ (``Rules.node_declared_features``), a pod whose spec needs features
(``PodInfo.required_features``, inferred by ``core.parse`` as kube-scheduler v1.37's
nodedeclaredfeatures framework does) passes only nodes whose ``status.declaredFeatures``
hold every one of them; the others are UnschedulableAndUnresolvable (preemption cannot
help). A pod needing none, and every pod on v1.35, skips the filter. Vector: one set
test per node, worked out once per feature set and table version.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework

NAME: Final = "NodeDeclaredFeatures"
REASON_UNSATISFIED: Final = "node(s) didn't match Pod's required features"


class NodeDeclaredFeatures:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        if not cycle.rules.node_declared_features or not cycle.pod.required_features:
            return framework.SKIP
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        required = frozenset(cycle.pod.required_features)
        table = cycle.table
        declares = cycle.memo.per_table(
            "NodeDeclaredFeatures/declares",
            required,
            table,
            lambda: np.fromiter(
                (required <= state.node.declared_features for state in table.states),
                dtype=np.bool_,
                count=len(table),
            ),
        )
        return framework.rejected_where(~declares[rows], REASON_UNSATISFIED)


PLUGIN: Final[framework.FilterPlugin] = NodeDeclaredFeatures()
