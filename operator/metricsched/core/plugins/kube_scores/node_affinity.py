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

from metricsched.core import filters, model
from metricsched.core.plugins.kube_scores import normalize

NAME: Final = "NodeAffinity"
SHORT_NAME: Final = NAME


def _terms(pod: model.PodInfo) -> list[tuple[int, filters.NodeSelectorTerm]]:
    terms = []
    for index, raw in enumerate(pod.preferred_node_affinity):
        weight = raw.get("weight") if isinstance(raw, Mapping) else None
        if isinstance(weight, bool) or not isinstance(weight, int) or weight == 0:
            continue
        try:
            term = filters.NodeSelectorTerm.parse(
                raw.get("preference") or {}, where=f"preferred[{index}].preference"
            )
        except filters.InvalidSpecError:
            continue  # the API server rejects these; never a crash here
        terms.append((weight, term))
    return terms


def score(*, pod: model.PodInfo, nodes: tuple[model.NodeState, ...]) -> tuple[float, ...] | None:
    """NodeAffinity for each of ``nodes``, normalised; None when the pod prefers nothing."""
    if not pod.preferred_node_affinity:
        return None
    terms = _terms(pod)
    sums = [sum(weight for weight, term in terms if term.matches(state.node)) for state in nodes]
    return normalize.default_normalize(sums, reverse=False)
