"""NodeAffinity (Filter): ``spec.nodeSelector`` and the required node affinity.

Contract: PreFilter refuses a pod whose terms pin node names that cannot all hold
(``pod affinity terms conflict``) and, when every required term pins node names with
``matchFields`` on ``metadata.name``, evaluates only those nodes (the others are reported
as not in the PreFilter result). Filter: the node's labels satisfy the nodeSelector and
one required nodeSelectorTerm. The answer for every node depends on the pod's terms and
the nodes alone, so it is worked out once per pod class and table version (the memo).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework, selectors

NAME: Final = "NodeAffinity"
REASON_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_AFFINITY_CONFLICT: Final = "pod affinity terms conflict"


class NodeAffinity:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        pod = cycle.pod
        allowed = selectors.prefilter_node_names(pod)
        if allowed is not None and not allowed:
            return framework.refuse(REASON_AFFINITY_CONFLICT)
        required = cycle.memo.derived(
            "RequiredNodeAffinity", pod, lambda: selectors.RequiredNodeAffinity.of(pod)
        )
        cycle.data[NAME] = required
        rows = None
        if allowed is not None:
            index = cycle.table.rows
            rows = np.array(
                sorted(index[name] for name in allowed if name in index),  # type: ignore[index]
                dtype=np.intp,
            )
        return framework.PreFilterResult(skip=required.trivial, rows=rows)

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        required = cycle.data[NAME]
        assert isinstance(required, selectors.RequiredNodeAffinity)
        table = cycle.table
        matches = cycle.memo.per_table(
            "NodeAffinity/matches",
            required,
            table,
            lambda: np.fromiter(
                (required.matches(state.node) for state in table.states),
                dtype=np.bool_,
                count=len(table),
            ),
        )
        return framework.rejected_where(~matches[rows], REASON_NODE_AFFINITY)


PLUGIN: Final[framework.FilterPlugin] = NodeAffinity()
