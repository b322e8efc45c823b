"""Metric scoring: fresh values, thresholds, normalisation, weights and the burst penalty.

The semantics are DESIGN.md's "Scoring semantics" with the README's "No herding" rules:

- A node's value for a Prometheus metric is the refresher's latest sample for it, fresh
  while ``now - refreshed_at <= policy.max_metric_age_s``; a node annotation's value is
  always fresh. Unparsable or NaN values are missing; ±Inf are values (for Minimize, +Inf
  is the worst there is and fails a ``threshold.max``).
- A thresholded metric rules out nodes whose fresh value lies outside [min, max];
  ``onMissing: Exclude`` rules out nodes with no fresh value, thresholded or not (that
  filter is ``core.plugins.metric_threshold``; this module is the metric score).
- Each metric is scored 0..100 over the feasible nodes with values, in the goal's
  direction: a node's distance from the best value, less the metric's tolerance (the
  larger of ``tolerance`` and ``tolerancePercent`` % of the best value's magnitude), over
  the metric's scale (``range`` when set, else the distance of the worst node). Values
  within the tolerance of the best all score 100, so noise is not blown up to a
  full-range gap. A missing value scores 50 (Neutral) or 0 (Worst).
- A node's metric score is the weighted mean of its metric scores, minus
  ``burst_penalty`` per pod this scheduler bound to it within the burst window, floored
  at 0; no penalty when every Prometheus metric declares an estimate
  (``core.estimate``: the values scored already count those pods). Its score blends
  that with kube-scheduler's scores (``KubeTerm``, from ``core.plugins.kube_scores``),
  each weighted by ``spec.kubeScores``:
  ``(W x metric score + sum(w_k x kube_k)) / (W + sum(w_k))``, W the sum of the metric
  weights. A kube term equal on every scored node is left out (it cannot change the
  order, and would only dilute the metric scores); with none left the score is the
  metric score, as without kubeScores. The burst penalty stays on the metric part: it
  stands for metrics that have not seen recent binds yet, while kube's scores already
  count every assumed pod.
- The highest score wins; ties go to the node with fewest recent binds, then to a node
  drawn at random among those still tied (seeded per decision), as kube-scheduler's
  selectHost does.

Values are handled as arrays (one per metric, aligned with the rows of the cycle's node
table, NaN for a missing value), so a cycle costs a few vector operations per metric,
with no per-node Python. ``Column`` (a tuple, None for missing) is the form ``explain``
and the shadow reports read. No I/O here.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, estimate, framework, model

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


def _series_values(
    series: model.MetricSeries, names: Sequence[model.NodeName]
) -> tuple[columns.Floats, columns.Floats]:
    """Each named node's latest sample of ``series`` and when it was refreshed (NaN and
    -inf for a node without one)."""
    get = series.values.get
    values = np.full(len(names), np.nan)
    refreshed = np.full(len(names), -np.inf)
    for index, name in enumerate(names):
        sample = get(name)
        if sample is not None:
            values[index] = sample.value
            refreshed[index] = sample.refreshed_at
    return values, refreshed


def _fresh(
    values: columns.Floats, refreshed: columns.Floats, *, now: float, max_age: float
) -> columns.Floats:
    # A sample is fresh while now - refreshed_at <= max age; NaN stays NaN (missing).
    return np.where(now - refreshed <= max_age, values, np.nan)


def _annotation_values(key: str, nodes: Sequence[model.NodeInfo]) -> columns.Floats:
    return np.fromiter(
        (
            np.nan if (value := annotation_value(node.annotations.get(key))) is None else value
            for node in nodes
        ),
        dtype=np.float64,
        count=len(nodes),
    )


def metric_samples(
    *,
    policy: model.Policy,
    metric: model.MetricSpec,
    table: columns.NodeTable,
    rows: columns.Rows,
    metrics: model.MetricView,
    now: float,
    memo: framework.Memo,
) -> tuple[columns.Floats, columns.Floats]:
    """The fresh value of ``metric`` on each node of ``rows`` (NaN: missing or stale) and
    when it was refreshed (-inf: no sample; +inf for annotations, always current), the
    cycle's path: the values of every node are laid out once per refresh (or per change
    of the nodes, for annotations) and kept in ``memo``."""
    key = metric.source.node_annotation
    if key is not None:
        every = memo.per_table(
            "annotation-values",
            key,
            table,
            lambda: _annotation_values(key, [state.node for state in table.states]),
        )
        return every[rows], np.full(len(rows), np.inf)
    series = metrics.get(model.MetricKey(policy=policy.key, metric=metric.name))
    if series is None:
        return np.full(len(rows), np.nan), np.full(len(rows), -np.inf)
    # A refresh replaces the series object: its values are laid out again.
    values, refreshed = memo.per_table(
        "series-values",
        (policy.key, metric.name),
        table,
        lambda: _series_values(series, table.names),
        source=series,
    )
    picked = refreshed[rows]
    return _fresh(values[rows], picked, now=now, max_age=policy.max_metric_age_s), picked


def metric_column(
    *,
    policy: model.Policy,
    metric: model.MetricSpec,
    nodes: Sequence[model.NodeInfo],
    metrics: model.MetricView,
    now: float,
) -> Column:
    """The fresh value of ``metric`` on each of ``nodes`` (for ``explain`` and shadow
    reports; the cycle uses ``metric_values``)."""
    key = metric.source.node_annotation
    if key is not None:
        values = _annotation_values(key, nodes)
    else:
        series = metrics.get(model.MetricKey(policy=policy.key, metric=metric.name))
        if series is None:
            return (None,) * len(nodes)
        found, refreshed = _series_values(series, [node.name for node in nodes])
        values = _fresh(found, refreshed, now=now, max_age=policy.max_metric_age_s)
    return as_column(values)


def as_column(values: columns.Floats) -> Column:
    """Values as a ``Column`` (None for NaN)."""
    return tuple(None if math.isnan(value) else value for value in values.tolist())


def as_values(column: Sequence[float | None] | columns.Floats) -> columns.Floats:
    """A ``Column`` (or values) as an array, NaN for None."""
    if isinstance(column, np.ndarray):
        return column.astype(np.float64, copy=False)
    return np.array([np.nan if value is None else value for value in column], dtype=np.float64)


_UNREACHABLE: Final = frozenset(
    {model.QueryErrorKind.UNREACHABLE, model.QueryErrorKind.METRICS_API_UNAVAILABLE}
)


def unreachable_error(*, policy: model.Policy, metrics: model.MetricView) -> str | None:
    """The error message if any refreshed metric's last refresh could not reach its
    source (Prometheus; the metrics API, absent or unavailable): the policy falls back."""
    for metric in policy.metrics:
        if not metric.source.refreshed:
            continue
        series = metrics.get(model.MetricKey(policy=policy.key, metric=metric.name))
        if series is not None and series.error in _UNREACHABLE:
            return series.error_message or "no error message"
    return None


# --- normalisation, weights, burst -----------------------------------------------------


def missing_score(on_missing: model.OnMissing) -> float:
    """What a node without a fresh value scores (Exclude: such nodes are never scored)."""
    return NEUTRAL_SCORE if on_missing is model.OnMissing.NEUTRAL else MIN_SCORE


def normalise(
    column: Sequence[float | None] | columns.Floats,
    *,
    goal: model.Goal,
    on_missing: model.OnMissing,
    tolerance: float = 0.0,
    tolerance_percent: float = 0.0,
    value_range: float | None = None,
) -> columns.Floats:
    """Score a column 0..100 in the goal's direction; the best value scores 100.

    A value's distance from the best, less the tolerance (the larger of ``tolerance`` and
    ``tolerance_percent`` % of the best value's magnitude), over the scale (``value_range``,
    else the worst value's distance) is what it loses, so values within the tolerance of
    the best all score 100. With no tolerance and no range this is min-max normalisation.
    An infinite best value (-Inf when minimising) scores 100 and every other value 0;
    an infinite worst value scores 0 and does not set the scale of the finite ones.
    Missing values (None or NaN) score ``missing_score(on_missing)``.
    """
    values = as_values(column)
    missing = np.isnan(values)
    absent = missing_score(on_missing)
    if missing.all():
        return np.full(len(values), absent)
    sign = 1.0 if goal is model.Goal.MINIMIZE else -1.0
    # Values in the "lower is better" direction, halved so that distances between huge
    # values (±1e308) stay finite; exact otherwise.
    lows = sign * values / 2
    present = lows[~missing]
    best = float(present.min())
    if math.isinf(best):  # -Inf when minimising, +Inf when maximising
        return np.where(missing, absent, np.where(lows == best, MAX_SCORE, MIN_SCORE))
    infinite = np.isinf(present)
    finite_worst = float(present[~infinite].max()) if not infinite.all() else best
    slack = max(tolerance, abs(best) * 2 * tolerance_percent / 100) / 2
    scale = (finite_worst - best) if value_range is None else value_range / 2
    if scale <= 0 or finite_worst - best <= slack:
        if not infinite.any():  # all within the tolerance: all equal
            return np.where(missing, absent, MAX_SCORE)
        scale = max(scale, slack, math.ulp(best) or 1.0)
    lost = np.maximum(0.0, lows - best - slack)
    # Divide before scaling: the best value scores exactly 100, and no value more.
    scores = MAX_SCORE * np.maximum(0.0, 1.0 - lost / scale)
    return np.where(missing, absent, scores)


def burst_counts(table: columns.NodeTable, *, now: float, window_s: float) -> columns.Ints:
    """Each node's binds by this scheduler at or after ``now - window_s`` (later ones
    too: the clock may lag a bind); none when the window is 0."""
    if window_s <= 0:
        return np.zeros(len(table), dtype=np.int64)
    return table.binds_since(now - window_s)


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
    scores: columns.Floats  # 0..100, aligned with the nodes


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """Scores of a sequence of nodes, each array aligned with that sequence."""

    per_metric: tuple[columns.Floats, ...]  # [metric][node], 0..100
    burst_counts: columns.Ints
    penalties: columns.Floats  # points taken for recent binds (before the floor)
    totals: columns.Floats  # final node scores, 0..100
    kube: tuple[KubeTerm, ...] = ()  # the kube-scheduler terms blended into the totals


def blended_terms(kube: Sequence[KubeTerm]) -> tuple[KubeTerm, ...]:
    """The terms that take part in the blend: positive weight, not equal on every node."""
    found = []
    for term in kube:
        scores = np.asarray(term.scores, dtype=np.float64)
        if term.weight > 0 and len(scores) and scores.min() != scores.max():
            found.append(dataclasses.replace(term, scores=scores))
    return tuple(found)


def score_nodes(
    *,
    policy: model.Policy,
    columns: Sequence[Sequence[float | None] | columns.Floats],
    burst_counts: Sequence[int] | columns.Ints,
    kube: Sequence[KubeTerm] = (),
    penalty: float | None = None,
) -> Scores:
    """Score nodes from their metric values (the feasible nodes only: they set the range)
    and kube-scheduler's terms for the same nodes. ``penalty``: the burst penalty per
    recent bind for the pod being placed (None: the policy's, unless its estimates count
    the binds, ``core.estimate.replaces_burst_penalty``).

    A policy without metrics scores every node 0 before the penalty: such policies are
    decided by their fallback strategy, not scored.
    """
    bursts = np.asarray(burst_counts, dtype=np.int64)
    node_count = len(bursts)
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
    sums = np.zeros(node_count)
    for weight, scores in zip(weights, per_metric, strict=True):
        sums = sums + weight * scores
    # Estimates count each bind exactly where every metric declares one (core.estimate);
    # the cycle says so per pod (``penalty``).
    if penalty is None:
        penalty = 0.0 if estimate.replaces_burst_penalty(policy) else policy.burst_penalty
    penalties = penalty * bursts
    if total_weight:
        totals = np.maximum(MIN_SCORE, np.minimum(MAX_SCORE, sums / total_weight) - penalties)
    else:
        totals = np.full(node_count, MIN_SCORE)
    blended = blended_terms(kube) if total_weight else ()
    if blended:
        # One common divisor for every weight: scaling all of them by a constant then
        # yields the same scores (see reduced_weights).
        metric_weight = sum(metric.weight for metric in policy.metrics)
        divisor = math.gcd(metric_weight, *(term.weight for term in blended))
        own = metric_weight // divisor
        kube_weights = [term.weight // divisor for term in blended]
        whole = own + sum(kube_weights)
        kube_sums = np.zeros(node_count)
        for weight, term in zip(kube_weights, blended, strict=True):
            kube_sums = kube_sums + weight * term.scores
        totals = (own * totals + kube_sums) / whole
        penalties = penalties * own / whole
    return Scores(
        per_metric=per_metric,
        burst_counts=bursts,
        penalties=penalties.astype(np.float64),
        totals=totals,
        kube=blended,
    )


def ranking(
    *,
    totals: Sequence[float] | columns.Floats,
    burst_counts: Sequence[int] | columns.Ints,
    seed: int,
    count: int = 2,
) -> list[int]:
    """Indices of the ``count`` best nodes, best first; the nodes are in name order (rows
    of the node table, as the cycle scores them).

    Highest score first; ties go to the fewest recent binds, and the winner is drawn at
    random among the nodes still tied (kube-scheduler's selectHost draws uniformly among
    the top scores), seeded by ``seed`` so a decision can be reproduced. The others
    follow in score, binds, name order: the first index of those tied, since index order
    is name order (no walk over the tied nodes' names).
    """
    scores = np.asarray(totals, dtype=np.float64)
    bursts = np.asarray(burst_counts, dtype=np.int64)
    if not len(scores):
        return []
    tied = _best(scores, bursts, None)
    pick = 0 if len(tied) == 1 else random.Random(seed).randrange(len(tied))
    chosen = [int(tied[pick])]
    while len(chosen) < count:
        following = next_best(totals=scores, burst_counts=bursts, taken=chosen)
        if following is None:
            break
        chosen.append(following)
    return chosen


def next_best(
    *,
    totals: columns.Floats,
    burst_counts: columns.Ints,
    taken: Sequence[int],
) -> int | None:
    """The index of the best node not ``taken`` in (score, binds, name) order: the first
    index of the best, the nodes being in name order (None when every node is taken)."""
    left = np.ones(len(totals), dtype=np.bool_)
    left[list(taken)] = False
    if not left.any():
        return None
    return int(_best(totals, burst_counts, left)[0])


def _best(scores: columns.Floats, bursts: columns.Ints, left: columns.Bools | None) -> columns.Rows:
    """Of the nodes ``left`` (None: all), those with the highest score and, of those, the
    fewest recent binds, in index order."""
    if left is None:
        highest = np.flatnonzero(scores == scores.max())
    else:
        highest = np.flatnonzero(left & (scores == scores[left].max()))
    fewest = bursts[highest].min()
    found: columns.Rows = highest[bursts[highest] == fewest]
    return found


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


def format_sample(metric: model.MetricScore, *, basis: str = "") -> str:
    """A verdict's sampled value with its estimate: ``0.62 (+0.09 est.)``, or ``missing``;
    with ``basis`` (what the placed pod was estimated by): ``0.62 (+0.09 est.; this pod:
    web's measured 0.31 cores)``."""
    if metric.value is None:
        return "missing"
    text = format_value(metric.value)
    if metric.estimate:
        sign = "+" if metric.estimate > 0 else "-"
        why = f"; this pod: {basis}" if basis else ""
        text += f" ({sign}{format_value(abs(metric.estimate))} est.{why})"
    return text
