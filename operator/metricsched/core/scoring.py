"""Metric scoring: fresh values, thresholds, normalisation, weights and the burst penalty.

The semantics are DESIGN.md's "Scoring semantics" with the README's "No herding" rules:

- A node's value for a Prometheus metric is the refresher's latest sample for it, fresh
  while ``now - refreshed_at <= policy.max_metric_age_s``; a node annotation's value is
  always fresh. Unparsable or NaN values are missing; ±Inf are values (for Minimize, +Inf
  is the worst there is and fails a ``threshold.max``).
- A thresholded metric rules out nodes whose fresh value lies outside [min, max];
  ``onMissing: Exclude`` rules out nodes with no fresh value, thresholded or not.
- Each metric is scored 0..100 over the feasible nodes with values, in the goal's
  direction: a node's distance from the best value, less the metric's tolerance (the
  larger of ``tolerance`` and ``tolerancePercent`` % of the best value's magnitude), over
  the metric's scale (``range`` when set, else the distance of the worst node). Values
  within the tolerance of the best all score 100, so noise is not blown up to a
  full-range gap. A missing value scores 50 (Neutral) or 0 (Worst).
- A node's metric score is the weighted mean of its metric scores, minus
  ``burst_penalty`` per pod this scheduler bound to it within the burst window, floored
  at 0. Its score blends that with kube-scheduler's scores (``KubeTerm``, from
  ``core.plugins.kube_scores``), each weighted by ``spec.kubeScores``:
  ``(W x metric score + sum(w_k x kube_k)) / (W + sum(w_k))``, W the sum of the metric
  weights. A kube term equal on every scored node is left out (it cannot change the
  order, and would only dilute the metric scores); with none left the score is the
  metric score, as without kubeScores. The burst penalty stays on the metric part: it
  stands for metrics that have not seen recent binds yet, while kube's scores already
  count every assumed pod.
- The highest score wins; ties go to the node with fewest recent binds, then to a node
  drawn at random among those still tied (seeded per decision), as kube-scheduler's
  selectHost does.

Values are handled as columns (one tuple per metric, aligned with a node sequence), so a
cycle costs O(nodes x metrics) with no per-node dictionaries. No I/O here.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from collections.abc import Mapping, Sequence
from typing import Final

from metricsched.core import model

MIN_SCORE: Final = 0.0
MAX_SCORE: Final = 100.0
NEUTRAL_SCORE: Final = 50.0

Column = tuple[float | None, ...]
"""One metric's fresh values, aligned with a sequence of nodes; None = missing or stale.

Values are never NaN; they may be ±Inf."""


# --- values ----------------------------------------------------------------------------


def annotation_value(raw: str | None) -> float | None:
    """A node annotation read as a number (±Inf included); None when absent, unparsable or NaN."""
    if raw is None or "_" in raw:  # Python's float() accepts "1_000"; Kubernetes tools don't
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return None if math.isnan(value) else value


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
            and (value := sample.value) == value  # NaN is missing; ±Inf are values
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
    column: Column,
    *,
    goal: model.Goal,
    on_missing: model.OnMissing,
    tolerance: float = 0.0,
    tolerance_percent: float = 0.0,
    value_range: float | None = None,
) -> tuple[float, ...]:
    """Score a column 0..100 in the goal's direction; the best value scores 100.

    A value's distance from the best, less the tolerance (the larger of ``tolerance`` and
    ``tolerance_percent`` % of the best value's magnitude), over the scale (``value_range``,
    else the worst value's distance) is what it loses, so values within the tolerance of
    the best all score 100. With no tolerance and no range this is min-max normalisation.
    An infinite best value (-Inf when minimising) scores 100 and every other value 0;
    an infinite worst value scores 0 and does not set the scale of the finite ones.
    """
    present = [value for value in column if value is not None]
    absent = missing_score(on_missing)
    if not present:
        return (absent,) * len(column)
    sign = 1.0 if goal is model.Goal.MINIMIZE else -1.0
    # Values in the "lower is better" direction, halved so that distances between huge
    # values (±1e308) stay finite; exact otherwise.
    lows = [sign * value / 2 for value in present]
    best = min(lows)
    if math.isinf(best):  # -Inf when minimising, +Inf when maximising
        by_value = {
            value: (MAX_SCORE if sign * value / 2 == best else MIN_SCORE) for value in present
        }
        return tuple([absent if value is None else by_value[value] for value in column])
    finite_worst = max((low for low in lows if not math.isinf(low)), default=best)
    slack = max(tolerance, abs(best) * 2 * tolerance_percent / 100) / 2
    scale = (finite_worst - best) if value_range is None else value_range / 2
    if scale <= 0 or finite_worst - best <= slack:
        if not any(math.isinf(low) for low in lows):  # all within the tolerance: all equal
            return tuple([absent if value is None else MAX_SCORE for value in column])
        scale = max(scale, slack, math.ulp(best) or 1.0)

    def score(value: float) -> float:
        low = sign * value / 2
        lost = max(0.0, low - best - slack)
        # Divide before scaling: the best value scores exactly 100, and no value more.
        return MAX_SCORE * max(0.0, 1.0 - lost / scale)

    return tuple([absent if value is None else score(value) for value in column])


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
class KubeTerm:
    """One kube-scheduler score plugin's scores of a sequence of nodes, and its weight."""

    plugin: str
    weight: int
    scores: tuple[float, ...]  # 0..100, aligned with the nodes


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """Scores of a sequence of nodes, each tuple aligned with that sequence."""

    per_metric: tuple[tuple[float, ...], ...]  # [metric][node], 0..100
    burst_counts: tuple[int, ...]
    penalties: tuple[float, ...]  # points taken for recent binds (before the floor)
    totals: tuple[float, ...]  # final node scores, 0..100
    kube: tuple[KubeTerm, ...] = ()  # the kube-scheduler terms blended into the totals


def blended_terms(kube: Sequence[KubeTerm]) -> tuple[KubeTerm, ...]:
    """The terms that take part in the blend: positive weight, not equal on every node."""
    return tuple(
        term
        for term in kube
        if term.weight > 0 and term.scores and min(term.scores) != max(term.scores)
    )


def score_nodes(
    *,
    policy: model.Policy,
    columns: Sequence[Column],
    burst_counts: Sequence[int],
    kube: Sequence[KubeTerm] = (),
) -> Scores:
    """Score nodes from their metric columns (the feasible nodes only: they set the range)
    and kube-scheduler's terms for the same nodes.

    A policy without metrics scores every node 0 before the penalty: such policies are
    decided by their fallback strategy, not scored.
    """
    node_count = len(burst_counts)
    per_metric = tuple(
        normalise(
            column,
            goal=metric.goal,
            on_missing=metric.on_missing,
            tolerance=metric.tolerance,
            tolerance_percent=metric.tolerance_percent,
            value_range=metric.value_range,
        )
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
    blended = blended_terms(kube) if total_weight else ()
    if blended:
        # One common divisor for every weight: scaling all of them by a constant then
        # yields the same scores (see reduced_weights).
        metric_weight = sum(metric.weight for metric in policy.metrics)
        divisor = math.gcd(metric_weight, *(term.weight for term in blended))
        own = metric_weight // divisor
        kube_weights = [term.weight // divisor for term in blended]
        whole = own + sum(kube_weights)
        kube_sums = [0.0] * node_count
        for weight, term in zip(kube_weights, blended, strict=True):
            kube_sums = [
                total + weight * score for total, score in zip(kube_sums, term.scores, strict=True)
            ]
        totals = tuple(
            [
                (own * metric_total + kube_total) / whole
                for metric_total, kube_total in zip(totals, kube_sums, strict=True)
            ]
        )
        penalties = tuple([penalty * own / whole for penalty in penalties])
    return Scores(
        per_metric=per_metric,
        burst_counts=tuple(burst_counts),
        penalties=penalties,
        totals=totals,
        kube=blended,
    )


def ranking(
    *,
    totals: Sequence[float],
    burst_counts: Sequence[int],
    names: Sequence[str],
    seed: int,
    count: int = 2,
) -> list[int]:
    """Indices of the ``count`` best nodes, best first.

    Highest score first; ties go to the fewest recent binds, and the winner is drawn at
    random among the nodes still tied (kube-scheduler's selectHost draws uniformly among
    the top scores), seeded by ``seed`` so a decision can be reproduced. The others
    follow in score, binds, name order.
    """
    if not totals:
        return []
    ordered = heapq.nsmallest(
        count,
        range(len(totals)),
        key=lambda index: (-totals[index], burst_counts[index], names[index]),
    )
    top = (totals[ordered[0]], burst_counts[ordered[0]])
    tied = [
        index
        for index in range(len(totals))
        if totals[index] == top[0] and burst_counts[index] == top[1]
    ]
    if len(tied) == 1:
        return ordered
    winner = tied[random.Random(seed).randrange(len(tied))]
    rest = heapq.nsmallest(
        count - 1,
        (index for index in range(len(totals)) if index != winner),
        key=lambda index: (-totals[index], burst_counts[index], names[index]),
    )
    return [winner, *rest]


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
