"""NodeResourcesBalancedAllocation: favour nodes whose cpu and memory stay in balance.

Contract (kube-scheduler v1.35, ``balancedResourceScorer``): for cpu and memory, the
fraction ``(requested on the node + the pod's request) / allocatable``, capped at 1, with
the requests as the filter counts them (no 100m / 200Mi defaults: the plugin scores with
``useRequested``); a resource with no allocatable is left out. With two fractions the
standard deviation is ``|f1 - f2| / 2``; the score is ``int((1 - std) * 100)``. A pod that
requests neither cpu nor memory (best effort) is not scored at all (kube's PreScore Skip,
so a burst of such pods does not pile onto one balanced node). No normalisation.

From v1.36 (``Rules.balance_change_score``) the score is the change in balance the pod
makes: with ``with`` and ``without`` the scores above with and without the pod's request,
``50 + (50 + with - without) // 2`` (``with`` and ``without`` lie in [50, 100]).

A node's score reads only its row and the pod's cpu and memory requests: the scores of
every node are a pod class's column, kept in the memo per node table and scored again
only for the rows updated since.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework

NAME: Final = "NodeResourcesBalancedAllocation"
SHORT_NAME: Final = "BalancedAllocation"
DEFAULT_WEIGHT: Final = 1  # its weight in kube-scheduler's default profile (v1.35)


def score(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats | None:
    """BalancedAllocation for each node of ``rows``; None for a best-effort pod (skipped)."""
    request = cycle.pod.requests
    if request.milli_cpu == 0 and request.memory == 0:
        return None
    table = cycle.table
    change = cycle.rules.balance_change_score
    column = cycle.memo.per_rows(
        f"{NAME}/scores",
        (request.milli_cpu, request.memory, change),
        table,
        lambda changed: _scores(
            table, changed, cpu=request.milli_cpu, memory=request.memory, change=change
        ),
    )
    return column[rows]


def _scores(
    table: columns.NodeTable, rows: columns.Rows, *, cpu: int, memory: int, change: bool
) -> columns.Floats:
    with_pod = _balance(table, rows, cpu=cpu, memory=memory)
    if not change:
        return with_pod
    without_pod = _balance(table, rows, cpu=0, memory=0)
    return 50 + (50 + with_pod - without_pod) // 2


def _balance(
    table: columns.NodeTable, rows: columns.Rows, *, cpu: int, memory: int
) -> columns.Floats:
    """``int((1 - std) * 100)`` of the nodes' cpu and memory shares with ``cpu`` and
    ``memory`` added (balancedResourceScore)."""
    allocatable, used = table.allocatable, table.requested
    cpu_capacity = allocatable.milli_cpu[rows]
    memory_capacity = allocatable.memory[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu_share = np.minimum((used.milli_cpu[rows] + cpu) / cpu_capacity, 1.0)
        memory_share = np.minimum((used.memory[rows] + memory) / memory_capacity, 1.0)
    # Two fractions: std = |f1 - f2| / 2; one (the other resource has no allocatable): 0.
    both = (cpu_capacity > 0) & (memory_capacity > 0)
    std = np.where(both, np.abs(cpu_share - memory_share) / 2, 0.0)
    return np.trunc((1 - std) * 100)  # type: ignore[no-any-return]
