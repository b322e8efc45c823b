"""NodeResourcesFit's score: LeastAllocated (and MostAllocated, for the fallback).

Contract: cpu and memory, weight 1 each; a resource scores ``(allocatable - requested) *
100 // allocatable`` (LeastAllocated) or ``requested * 100 // allocatable`` (MostAllocated),
where ``requested`` is what the node's pods request plus the incoming pod's request, each
container without a cpu or memory request counting 100m / 200Mi (kube-scheduler's
NonZeroRequested). The incoming pod counts without its pod-level ``spec.resources``
(``PodInfo.fit_score_requests``: kube-scheduler v1.35's scorer is built without that
gate). The node's score is the integer mean over the resources the node has: one with
no allocatable is left out, and a node with neither scores 0. No normalisation: the
scores are already 0..100. The fallback strategies LeastAllocated and MostAllocated
(``core.cycle``) use the same function.

In the cycle the scores of every node are a pod class's column (``class_scores``): they
read only the node's row and the pod's score request, so the column is kept in the memo
per node table and only the rows updated since are scored again.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework, model
from metricsched.core.plugins.node_resources_fit import filtering

NAME: Final = filtering.NAME
SHORT_NAME: Final = "LeastAllocated"  # the scoring strategy kube-scheduler's profile uses
DEFAULT_WEIGHT: Final = 1  # its weight in kube-scheduler's default profile (v1.35)


def _resource_scores(
    requested: columns.Ints, capacity: columns.Ints, *, most: bool
) -> columns.Ints:
    # leastRequestedScore / mostRequestedScore: integer arithmetic, as kube-scheduler's
    # (a resource without allocatable scores 0 here; _scores leaves it out).
    safe = np.maximum(capacity, 1)
    if most:
        scores = np.minimum(requested, capacity) * 100 // safe
        return np.where(capacity <= 0, 0, scores)
    scores = (capacity - requested) * 100 // safe
    return np.where((capacity <= 0) | (requested > capacity), 0, scores)


def score_request(pod: model.PodInfo) -> tuple[int, int]:
    """The cpu (millicores) and memory (bytes) of the pod being placed, as the score
    counts them."""
    if pod.fit_score_requests is not None:
        return pod.fit_score_requests.milli_cpu, pod.fit_score_requests.memory
    if pod.nonzero_requests is not None:
        return pod.nonzero_requests.milli_cpu, pod.nonzero_requests.memory
    # None: no container misses a request (parse), so an explicit 0 stays 0, as in
    # kube-scheduler (only a missing request counts 100m / 200Mi).
    return pod.requests.milli_cpu, pod.requests.memory


def allocation_scores(
    *,
    pod: model.PodInfo,
    table: columns.NodeTable,
    rows: columns.Rows,
    strategy: model.FallbackStrategy,
) -> columns.Ints:
    """kube-scheduler's NodeResourcesFit score (cpu and memory, weight 1 each) for ``pod``
    on each node of ``rows``.

    LeastAllocated favours the emptiest node, MostAllocated the fullest. Requests count as
    kube-scheduler's scores count them: every container (of the pod and of the pods on
    the node) without a cpu or memory request counts 100m / 200Mi (NonZeroRequested).
    """
    cpu, memory = score_request(pod)
    return _scores(
        table, rows, cpu=cpu, memory=memory, most=strategy is model.FallbackStrategy.MOST_ALLOCATED
    )


def _scores(
    table: columns.NodeTable, rows: columns.Rows, *, cpu: int, memory: int, most: bool
) -> columns.Ints:
    cpu_capacity = table.allocatable.milli_cpu[rows]
    memory_capacity = table.allocatable.memory[rows]
    cpu_scores = _resource_scores(table.nonzero_cpu[rows] + cpu, cpu_capacity, most=most)
    memory_scores = _resource_scores(
        table.nonzero_memory[rows] + memory, memory_capacity, most=most
    )
    # leastResourceScorer / mostResourceScorer: the mean over resources with allocatable.
    counted = (cpu_capacity > 0).astype(np.int64) + (memory_capacity > 0)
    return (cpu_scores + memory_scores) // np.maximum(counted, 1)


def class_scores(
    *,
    pod: model.PodInfo,
    table: columns.NodeTable,
    memo: framework.Memo,
    strategy: model.FallbackStrategy,
) -> columns.Floats:
    """``allocation_scores`` of every row of ``table`` for ``pod``'s class (its score
    request), kept in ``memo`` and brought up to date for the rows updated since (the
    node the previous pod of the class was placed on). Read it; do not keep it."""
    cpu, memory = score_request(pod)
    most = strategy is model.FallbackStrategy.MOST_ALLOCATED
    return memo.per_rows(
        f"{NAME}/allocation-scores",
        (most, cpu, memory),
        table,
        lambda rows: _scores(table, rows, cpu=cpu, memory=memory, most=most).astype(np.float64),
    )


def score(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats:
    """LeastAllocated for each node of ``rows``."""
    return class_scores(
        pod=cycle.pod,
        table=cycle.table,
        memo=cycle.memo,
        strategy=model.FallbackStrategy.LEAST_ALLOCATED,
    )[rows]
