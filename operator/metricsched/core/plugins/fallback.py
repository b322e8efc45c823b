"""The fallback strategies: how a policy picks among the feasible nodes without metrics.

Contract: with no metric to score by (the default policy, or a policy whose metrics have
no fresh value or whose Prometheus is unreachable), the policy's ``fallback`` decides
among the nodes every filter passed (thresholds are not applied: there is no data to
trust): LeastAllocated and MostAllocated by kube-scheduler's NodeResourcesFit score
(ties as in the metric ranking: fewest recent binds, then a seeded draw), RoundRobin by
the scheduler's counter, Random by the pod's seed; Wait picks none (the cycle reports
the pod as waiting). The decision and its message are ``core.cycle``'s.
"""

from __future__ import annotations

import random
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, scoring
from metricsched.core.plugins import node_resources_fit

NAME: Final = "Fallback"


def pick(
    *,
    strategy: model.FallbackStrategy,
    pod: model.PodInfo,
    table: columns.NodeTable,
    rows: columns.Rows,
    burst_counts: columns.Ints,
    rr_counter: int,
    seed: int,
    memo: framework.Memo,
) -> tuple[int, columns.Floats]:
    """The position in ``rows`` of the node ``strategy`` picks, and the strategy's score
    of each (0 for RoundRobin and Random). LeastAllocated and MostAllocated are
    kube-scheduler's NodeResourcesFit scores."""
    if strategy in (
        model.FallbackStrategy.LEAST_ALLOCATED,
        model.FallbackStrategy.MOST_ALLOCATED,
    ):
        scores = node_resources_fit.scoring.class_scores(
            pod=pod, table=table, memo=memo, strategy=strategy
        )[rows]
        best = scoring.ranking(
            totals=scores,
            burst_counts=burst_counts,
            seed=seed,
            count=1,
        )
        return best[0], scores
    zeros = np.zeros(len(rows))
    if strategy is model.FallbackStrategy.ROUND_ROBIN:
        return rr_counter % len(rows), zeros
    if strategy is model.FallbackStrategy.RANDOM:
        return random.Random(seed).randrange(len(rows)), zeros
    raise ValueError(f"strategy {strategy} does not pick a node")
