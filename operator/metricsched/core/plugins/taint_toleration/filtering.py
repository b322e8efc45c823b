"""TaintToleration (Filter): every NoSchedule and NoExecute taint of the node is tolerated.

Contract: a node passes when the pod tolerates each of its NoSchedule/NoExecute taints;
PreferNoSchedule taints only weigh in the score (``taint_toleration.scoring``). Only
rows of tainted nodes are looked at; the answer for one set of tolerations on one
unchanged node is kept in the memo (pods of one template share it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, selectors

NAME: Final = "TaintToleration"
# Since v1.35 (backported to v1.34) without the taint: its value may be sensitive.
REASON_UNTOLERATED_TAINT: Final = "node(s) had untolerated taint(s)"
FILTERED_EFFECTS: Final = frozenset({model.TaintEffect.NO_SCHEDULE, model.TaintEffect.NO_EXECUTE})


def untolerated(tolerations: Sequence[model.Toleration], node: model.NodeInfo) -> bool:
    """Whether ``node`` has a NoSchedule/NoExecute taint none of ``tolerations`` tolerates."""
    return any(
        taint.effect in FILTERED_EFFECTS and not selectors.tolerates(tolerations, taint)
        for taint in node.taints
    )


class TaintToleration:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        table = cycle.table
        tainted = table.tainted[rows]
        if not tainted.any():
            return framework.all_pass(rows)
        tolerations = cycle.pod.tolerations
        memo = cycle.memo
        failed = np.zeros(len(rows), dtype=np.bool_)
        for position in np.flatnonzero(tainted).tolist():
            node = table.states[rows[position]].node
            answers = memo.per_state("TaintToleration/untolerated", node)
            answer = answers.get(tolerations)
            if answer is None:
                answer = answers[tolerations] = untolerated(tolerations, node)
            failed[position] = answer
        return framework.rejected_where(failed, REASON_UNTOLERATED_TAINT)


PLUGIN: Final[framework.FilterPlugin] = TaintToleration()
