"""NodeAffinity's score: the pod's preferred node affinity terms.

Contract (kube-scheduler v1.35): a node's raw score is the sum of the weights of the
pod's ``preferredDuringSchedulingIgnoredDuringExecution`` terms whose ``preference`` (a
node selector term, matched exactly as the filter matches required terms) it satisfies;
terms of weight 0 and terms that cannot be parsed count for nothing. ``DefaultNormalizeScore``
scales the sums so that the best node scores 100. A pod without preferred terms is not
scored (kube's PreScore Skip).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, selectors
from metricsched.core.plugins import normalize
from metricsched.core.plugins.node_affinity import filtering

NAME: Final = filtering.NAME
SHORT_NAME: Final = NAME
DEFAULT_WEIGHT: Final = 2  # its weight in kube-scheduler's default profile (v1.35)


def _terms(pod: model.PodInfo) -> list[tuple[int, selectors.NodeSelectorTerm]]:
    terms = []
    for index, raw in enumerate(pod.preferred_node_affinity):
        weight = raw.get("weight") if isinstance(raw, Mapping) else None
        if isinstance(weight, bool) or not isinstance(weight, int) or weight == 0:
            continue
        try:
            term = selectors.NodeSelectorTerm.parse(
                raw.get("preference") or {}, where=f"preferred[{index}].preference"
            )
        except selectors.InvalidSpecError:
            continue  # the API server rejects these; never a crash here
        terms.append((weight, term))
    return terms


def score(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats | None:
    """NodeAffinity for each node of ``rows``, normalised; None when the pod prefers nothing."""
    pod = cycle.pod
    if not pod.preferred_node_affinity:
        return None
    terms = cycle.memo.derived("NodeAffinity/preferred-terms", pod, lambda: tuple(_terms(pod)))
    table = cycle.table
    # The sums depend on the terms and the nodes alone: once per pod class and node version.
    sums = cycle.memo.per_table(
        "NodeAffinity/preferred-sums",
        terms,
        table,
        lambda: np.fromiter(
            (sum(w for w, term in terms if term.matches(s.node)) for s in table.states),
            dtype=np.int64,
            count=len(table),
        ),
    )
    return normalize.default_normalize(sums[rows], reverse=False)
