"""TaintToleration's score: keep away from nodes with PreferNoSchedule taints.

Contract (kube-scheduler v1.35): a node's raw score is the number of its PreferNoSchedule
taints that none of the pod's tolerations (those with effect PreferNoSchedule or empty)
tolerates; ``DefaultNormalizeScore`` reversed makes the node with the most such taints 0
and a node with none 100. NoSchedule and NoExecute taints are the filter's business.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, selectors
from metricsched.core.plugins import normalize
from metricsched.core.plugins.taint_toleration import filtering

NAME: Final = filtering.NAME
SHORT_NAME: Final = NAME
DEFAULT_WEIGHT: Final = 3  # its weight in kube-scheduler's default profile (v1.35)


def intolerable_count(pod: model.PodInfo, node: model.NodeInfo) -> int:
    """PreferNoSchedule taints of ``node`` that ``pod`` does not tolerate."""
    return sum(
        1
        for taint in node.taints
        if taint.effect == model.TaintEffect.PREFER_NO_SCHEDULE
        and not selectors.tolerates(pod.tolerations, taint)
    )


def score(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats:
    """TaintToleration for each node of ``rows``, normalised."""
    table = cycle.table
    counts = np.zeros(len(rows), dtype=np.int64)
    for position in np.flatnonzero(table.soft_tainted[rows]).tolist():
        counts[position] = intolerable_count(cycle.pod, table.states[rows[position]].node)
    return normalize.default_normalize(counts, reverse=True)
