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

from metricsched.core import model

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


def allocation_score(
    *, state: model.NodeState, pod: model.PodInfo, strategy: model.FallbackStrategy
) -> int:
    """kube-scheduler's NodeResourcesFit score (cpu and memory, weight 1 each) for ``pod``.

    LeastAllocated favours the emptiest node, MostAllocated the fullest. Requests count as
    kube-scheduler's scores count them: every container (of the pod and of the pods on
    the node) without a cpu or memory request counts 100m / 200Mi (NonZeroRequested).
    """
    allocatable = state.node.allocatable
    on_node = state.requested if state.nonzero_requested is None else state.nonzero_requested
    if pod.nonzero_requests is not None:
        request = pod.nonzero_requests
    else:  # a PodInfo built without them: the pod-level approximation
        request = model.Resources(
            milli_cpu=pod.requests.milli_cpu or DEFAULT_MILLI_CPU_REQUEST,
            memory=pod.requests.memory or DEFAULT_MEMORY_REQUEST,
        )
    cpu = on_node.milli_cpu + request.milli_cpu
    memory = on_node.memory + request.memory
    score = (
        _most_requested if strategy is model.FallbackStrategy.MOST_ALLOCATED else _least_requested
    )
    return (score(cpu, allocatable.milli_cpu) + score(memory, allocatable.memory)) // 2


def score(*, pod: model.PodInfo, nodes: tuple[model.NodeState, ...]) -> tuple[float, ...]:
    """LeastAllocated for each of ``nodes``."""
    least = model.FallbackStrategy.LEAST_ALLOCATED
    return tuple(float(allocation_score(state=s, pod=pod, strategy=least)) for s in nodes)
