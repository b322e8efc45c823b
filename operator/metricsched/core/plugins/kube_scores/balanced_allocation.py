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

from metricsched.core import model

NAME: Final = "NodeResourcesBalancedAllocation"
SHORT_NAME: Final = "BalancedAllocation"


def _node_score(state: model.NodeState, request: model.Resources) -> float:
    allocatable = state.node.allocatable
    used = state.requested
    fractions = [
        min(1.0, (requested + asked) / capacity)
        for requested, asked, capacity in (
            (used.milli_cpu, request.milli_cpu, allocatable.milli_cpu),
            (used.memory, request.memory, allocatable.memory),
        )
        if capacity > 0
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:  # kept general, as kube's is, for more resources
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return float(math.trunc((1 - std) * 100))


def score(*, pod: model.PodInfo, nodes: tuple[model.NodeState, ...]) -> tuple[float, ...] | None:
    """BalancedAllocation for each of ``nodes``; None for a best-effort pod (skipped)."""
    request = pod.requests
    if request.milli_cpu == 0 and request.memory == 0:
        return None
    return tuple(_node_score(state, request) for state in nodes)
