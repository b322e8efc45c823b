"""NodeResourcesFit's score: LeastAllocated (and MostAllocated, for the fallback).

Contract: cpu and memory, weight 1 each; a resource scores ``(allocatable - requested) *
100 // allocatable`` (LeastAllocated) or ``requested * 100 // allocatable`` (MostAllocated),
where ``requested`` is what the node's pods request plus the incoming pod's request, each
container without a cpu or memory request counting 100m / 200Mi (kube-scheduler's
NonZeroRequested); the node's score is the integer mean of the two. No normalisation:
the scores are already 0..100. The fallback strategies LeastAllocated and MostAllocated
(``core.cycle``) use the same function.
"""

from __future__ import annotations

from typing import Final

from metricsched.core import filters, model

NAME: Final = "NodeResourcesFit"
SHORT_NAME: Final = "LeastAllocated"  # the scoring strategy kube-scheduler's profile uses

# kube-scheduler's requests for containers that request nothing (pkg/scheduler/util:
# DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024


def _least_requested(requested: int, capacity: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity


def _most_requested(requested: int, capacity: int) -> int:
    if capacity <= 0:
        return 0
    return min(requested, capacity) * 100 // capacity


def score_request(pod: model.PodInfo) -> tuple[int, int]:
    """The pod's cpu (millicores) and memory (bytes) as the score counts them."""
    if pod.nonzero_requests is not None:
        return pod.nonzero_requests.milli_cpu, pod.nonzero_requests.memory
    # a PodInfo built without them: the pod-level approximation
    return (
        pod.requests.milli_cpu or DEFAULT_MILLI_CPU_REQUEST,
        pod.requests.memory or DEFAULT_MEMORY_REQUEST,
    )


def _node_score(state: model.NodeState, request: tuple[int, int], *, most: bool) -> int:
    allocatable = state.node.allocatable
    on_node = state.requested if state.nonzero_requested is None else state.nonzero_requested
    cpu = on_node.milli_cpu + request[0]
    memory = on_node.memory + request[1]
    score = _most_requested if most else _least_requested
    return (score(cpu, allocatable.milli_cpu) + score(memory, allocatable.memory)) // 2


def allocation_score(
    *, state: model.NodeState, pod: model.PodInfo, strategy: model.FallbackStrategy
) -> int:
    """kube-scheduler's NodeResourcesFit score (cpu and memory, weight 1 each) for ``pod``.

    LeastAllocated favours the emptiest node, MostAllocated the fullest. Requests count as
    kube-scheduler's scores count them: every container (of the pod and of the pods on
    the node) without a cpu or memory request counts 100m / 200Mi (NonZeroRequested).
    """
    most = strategy is model.FallbackStrategy.MOST_ALLOCATED
    return _node_score(state, score_request(pod), most=most)


# LeastAllocated of an unchanged node for a request: replicas of a workload ask the same,
# and node states are shared from one snapshot to the next until a pod lands there.
_least_memo: Final[filters.IdentityCache[model.NodeState, dict[tuple[int, int], float]]] = (
    filters.IdentityCache(lambda _state: {}, limit=50_000)
)


def score(*, pod: model.PodInfo, nodes: tuple[model.NodeState, ...]) -> tuple[float, ...]:
    """LeastAllocated for each of ``nodes``."""
    request = score_request(pod)
    found = []
    for state in nodes:
        memo = _least_memo(state)
        value = memo.get(request)
        if value is None:
            value = memo[request] = float(_node_score(state, request, most=False))
        found.append(value)
    return tuple(found)
