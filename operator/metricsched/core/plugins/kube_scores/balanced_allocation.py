"""NodeResourcesBalancedAllocation: favour nodes whose cpu and memory stay in balance.

Contract (kube-scheduler v1.35, ``balancedResourceScorer``): for cpu and memory, the
fraction ``(requested on the node + the pod's request) / allocatable``, capped at 1, with
the requests as the filter counts them (no 100m / 200Mi defaults: the plugin scores with
``useRequested``); a resource with no allocatable is left out. With two fractions the
standard deviation is ``|f1 - f2| / 2``; the score is ``int((1 - std) * 100)``. A pod that
requests neither cpu nor memory (best effort) is not scored at all (kube's PreScore Skip,
so a burst of such pods does not pile onto one balanced node). No normalisation.
"""

from __future__ import annotations

import math
from typing import Final

from metricsched.core import filters, model

NAME: Final = "NodeResourcesBalancedAllocation"
SHORT_NAME: Final = "BalancedAllocation"


def _node_score(state: model.NodeState, request: tuple[int, int]) -> float:
    allocatable = state.node.allocatable
    used = state.requested
    fractions = [
        fraction if fraction < 1.0 else 1.0
        for requested, capacity in (
            (used.milli_cpu + request[0], allocatable.milli_cpu),
            (used.memory + request[1], allocatable.memory),
        )
        if capacity > 0
        for fraction in (requested / capacity,)
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:  # kept general, as kube's is, for more resources
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return float(math.trunc((1 - std) * 100))


# The score of an unchanged node for a request (see node_resources_fit._least_memo).
_memo: Final[filters.IdentityCache[model.NodeState, dict[tuple[int, int], float]]] = (
    filters.IdentityCache(lambda _state: {}, limit=50_000)
)


def score(*, pod: model.PodInfo, nodes: tuple[model.NodeState, ...]) -> tuple[float, ...] | None:
    """BalancedAllocation for each of ``nodes``; None for a best-effort pod (skipped)."""
    request = (pod.requests.milli_cpu, pod.requests.memory)
    if request == (0, 0):
        return None
    found = []
    for state in nodes:
        memo = _memo(state)
        value = memo.get(request)
        if value is None:
            value = memo[request] = _node_score(state, request)
        found.append(value)
    return tuple(found)
