"""Metric scoring: fresh values, thresholds, normalisation, weights and the burst penalty.

The semantics are DESIGN.md's "Scoring semantics":

- A node's value for a Prometheus metric is the refresher's latest sample for it, fresh
  while ``now - refreshed_at <= policy.max_metric_age_s``; a node annotation's value is
  always fresh. Unparsable or non-finite values are missing.
- A thresholded metric rules out nodes whose fresh value lies outside [min, max];
  ``onMissing: Exclude`` rules out nodes with no fresh value, thresholded or not.
- Each metric is min-max normalised over the feasible nodes with values, to 0..100 in
  the goal's direction (all equal: 100 each); a missing value scores 50 (Neutral) or 0
  (Worst).
- A node's score is the weighted mean of its metric scores, minus ``burst_penalty`` per
  pod this scheduler bound to it within the burst window, floored at 0.
- The highest score wins; ties go to the node with fewest recent binds, then the first name.

Values are handled as columns (one tuple per metric, aligned with a node sequence), so a
cycle costs O(nodes x metrics) with no per-node dictionaries. No I/O here.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Final

from metricsched.core import model

MIN_SCORE: Final = 0.0
MAX_SCORE: Final = 100.0
NEUTRAL_SCORE: Final = 50.0

Column = tuple[float | None, ...]
"""One metric's fresh values, aligned with a sequence of nodes; None = missing or stale."""


# --- values ----------------------------------------------------------------------------


def annotation_value(raw: str | None) -> float | None:
    """A node annotation read as a number; None when absent, unparsable or not finite."""
    if raw is None or "_" in raw:  # Python's float() accepts "1_000"; Kubernetes tools don't
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def metric_column(
    *,
    policy: model.Policy,
    metric: model.MetricSpec,
    nodes: Sequence[model.NodeInfo],
    metrics: model.MetricView,
    now: float,
) -> Column:
    """The fresh value of ``metric`` on each of ``nodes``."""
    source = metric.source
    if isinstance(source, model.AnnotationSource):
        key = source.annotation
        return tuple(annotation_value(node.annotations.get(key)) for node in nodes)
    series = metrics.get(model.MetricKey(policy=policy.key, metric=metric.name))
    if series is None:
        return (None,) * len(nodes)
    get = series.values.get
    max_age = policy.max_metric_age_s
    # One comprehension, no per-node calls: this runs for every pod on every node.
    return tuple(
        [
            value
            if (sample := get(node.name)) is not None
            and now - sample.refreshed_at <= max_age
            and -math.inf < (value := sample.value) < math.inf
            else None
            for node in nodes
        ]
    )


def policy_columns(
    *,
    policy: model.Policy,
    nodes: Sequence[model.NodeInfo],
    metrics: model.MetricView,
    now: float,
) -> tuple[Column, ...]:
    """One column per metric of ``policy``, in the policy's order."""
    return tuple(
        metric_column(policy=policy, metric=metric, nodes=nodes, metrics=metrics, now=now)
        for metric in policy.metrics
    )


def unreachable_error(*, policy: model.Policy, metrics: model.MetricView) -> str | None:
    """The error message if any Prometheus metric's last refresh could not reach Prometheus."""
    for metric in policy.metrics:
        if not isinstance(metric.source, model.PrometheusSource):
            continue
        series = metrics.get(model.MetricKey(policy=policy.key, metric=metric.name))
        if series is not None and series.error is model.QueryErrorKind.UNREACHABLE:
            return series.error_message or "no error message"
    return None


# --- thresholds ------------------------------------------------------------------------


def exceeded_reason(metric: model.MetricSpec) -> str:
    return f"node(s) exceeded threshold {metric.name} > {metric.threshold_max:g}"


def fell_below_reason(metric: model.MetricSpec) -> str:
    return f"node(s) fell below threshold {metric.name} < {metric.threshold_min:g}"


def no_fresh_value_reason(metric: model.MetricSpec) -> str:
    return f"node(s) had no fresh value for metric {metric.name}"


def metric_filter(
    *, policy: model.Policy, columns: Sequence[Column], node_count: int
) -> tuple[tuple[str, ...], ...]:
    """Why each node is ruled out by the policy's thresholds and onMissing: Exclude.

    Returns one tuple of reasons per node (empty = feasible), aligned with ``columns``.
    """
    reasons: list[list[str] | None] = [None] * node_count
    for metric, column in zip(policy.metrics, columns, strict=True):
        low, high = metric.threshold_min, metric.threshold_max
        exclude = metric.on_missing is model.OnMissing.EXCLUDE
        if low is None and high is None and not exclude:
            continue
        for index, value in enumerate(column):
            if value is None:
                reason = no_fresh_value_reason(metric) if exclude else None
            elif high is not None and value > high:
                reason = exceeded_reason(metric)
            elif low is not None and value < low:
                reason = fell_below_reason(metric)
            else:
                reason = None
            if reason is not None:
                found = reasons[index]
                if found is None:
                    reasons[index] = [reason]
                else:
                    found.append(reason)
    return tuple(() if found is None else tuple(found) for found in reasons)


# --- normalisation, weights, burst -----------------------------------------------------


def missing_score(on_missing: model.OnMissing) -> float:
    """What a node without a fresh value scores (Exclude: such nodes are never scored)."""
    return NEUTRAL_SCORE if on_missing is model.OnMissing.NEUTRAL else MIN_SCORE


def normalise(
    column: Column, *, goal: model.Goal, on_missing: model.OnMissing
) -> tuple[float, ...]:
    """Min-max normalise a column to 0..100 in the goal's direction; all equal: 100 each."""
    present = [value for value in column if value is not None]
    absent = missing_score(on_missing)
    if not present:
        return (absent,) * len(column)
    # Halved so that the span of huge values (±1e308) stays finite; exact otherwise.
    low, high = min(present) / 2, max(present) / 2
    span = high - low
    if span <= 0:
        return tuple([absent if value is None else MAX_SCORE for value in column])
    # Divide before scaling: the best value scores exactly 100 (x / x == 1.0) and no value
    # more, since low <= value / 2 <= high.
    minimize = goal is model.Goal.MINIMIZE
    if len(present) == len(column):  # the common case, kept free of per-value branches
        if minimize:
            return tuple([(high - value / 2) / span * MAX_SCORE for value in present])
        return tuple([(value / 2 - low) / span * MAX_SCORE for value in present])
    if minimize:
        return tuple(
            [absent if value is None else (high - value / 2) / span * MAX_SCORE for value in column]
        )
    return tuple(
        [absent if value is None else (value / 2 - low) / span * MAX_SCORE for value in column]
    )


def burst_count(*, recent_binds: Sequence[float], now: float, window_s: float) -> int:
    """Binds at or after ``now - window_s`` (later ones too: the clock may lag a bind)."""
    if window_s <= 0:
        return 0
    since = now - window_s
    return sum(1 for at in recent_binds if at >= since)


def reduced_weights(metrics: Sequence[model.MetricSpec]) -> tuple[int, ...]:
    """Weights divided by their greatest common divisor.

    Scaling every weight by a constant then yields bit-identical scores, so it can never
    change a decision through floating-point rounding.
    """
    divisor = math.gcd(*(metric.weight for metric in metrics)) or 1
    return tuple(metric.weight // divisor for metric in metrics)


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """Scores of a sequence of nodes, each tuple aligned with that sequence."""

    per_metric: tuple[tuple[float, ...], ...]  # [metric][node], 0..100
    burst_counts: tuple[int, ...]
    penalties: tuple[float, ...]  # points taken for recent binds (before the floor)
    totals: tuple[float, ...]  # final node scores, 0..100


def score_nodes(
    *, policy: model.Policy, columns: Sequence[Column], burst_counts: Sequence[int]
) -> Scores:
    """Score nodes from their metric columns (the feasible nodes only: they set the range).

    A policy without metrics scores every node 0 before the penalty: such policies are
    decided by their fallback strategy, not scored.
    """
    node_count = len(burst_counts)
    per_metric = tuple(
        normalise(column, goal=metric.goal, on_missing=metric.on_missing)
        for metric, column in zip(policy.metrics, columns, strict=True)
    )
    weights = reduced_weights(policy.metrics)
    total_weight = sum(weights)
    sums = [0.0] * node_count
    for weight, scores in zip(weights, per_metric, strict=True):
        sums = [total + weight * score for total, score in zip(sums, scores, strict=True)]
    penalties = tuple([policy.burst_penalty * count for count in burst_counts])
    if total_weight:
        totals = tuple(
            [
                max(MIN_SCORE, min(MAX_SCORE, total / total_weight) - penalty)
                for total, penalty in zip(sums, penalties, strict=True)
            ]
        )
    else:
        totals = (MIN_SCORE,) * node_count
    return Scores(
        per_metric=per_metric,
        burst_counts=tuple(burst_counts),
        penalties=penalties,
        totals=totals,
    )


def ranking(
    *,
    totals: Sequence[float],
    burst_counts: Sequence[int],
    names: Sequence[str],
    count: int = 2,
) -> list[int]:
    """Indices of the ``count`` best nodes, best first.

    Highest score first; ties go to fewest recent binds, then the first name.
    """
    return heapq.nsmallest(
        count,
        range(len(totals)),
        key=lambda index: (-totals[index], burst_counts[index], names[index]),
    )


# --- formatting (shared by cycle messages and explain) ---------------------------------


def format_score(score: float) -> str:
    """A score as a whole number, rounding halves up (92.5 → 93)."""
    return str(math.floor(score + 0.5))


def format_value(value: float) -> str:
    """A value to 3 significant digits, without an exponent for everyday magnitudes."""
    text = f"{value:.3g}"
    if "e" in text and 1e-4 <= abs(value) < 1e15:
        text = f"{float(text):f}".rstrip("0").rstrip(".")
    return text


def metric_weights(policy: model.Policy) -> Mapping[str, int]:
    """Each metric's weight by name (for explanations)."""
    return {metric.name: metric.weight for metric in policy.metrics}
