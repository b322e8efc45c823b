"""The metric phases of one cycle, after the filters, in kube-scheduler's order: PreScore
(what each feasible node shows and what the pods not shown yet add), the metric Filter
(thresholds and onMissing: Exclude, failing open on what was learned, lifting soft
thresholds), Score (the policy's metrics blended with kube-scheduler's plugins) and the
ranking that selects. Each phase is a function of the one before's record; rendering the
verdicts, the message and the decision stays in ``core.cycle``.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import numpy as np

from metricsched.core import columns, estimate, framework, model, scoring
from metricsched.core.plugins import kube_scores, metric_threshold


@dataclasses.dataclass(frozen=True, slots=True)
class Stage:
    """What every metric phase of one cycle reads: the cycle's state (pod, table, memo),
    the policy that scores it, the rows the filters let through and the metric view."""

    cycle: framework.CycleState
    chosen: model.Policy
    feasible: columns.Rows
    metrics: model.MetricView

    def learned(self, metric: model.MetricSpec) -> model.LearnedEffect | None:
        """What was learned of ``metric``'s effect per bind (None: nothing)."""
        return learned(self.metrics, self.chosen, metric)

    def usage(self, metric: model.MetricSpec) -> model.PodUsage | None:
        """The per-pod usage ``metric``'s estimate reads (None: none measured)."""
        return usage(self.metrics, self.chosen, metric)


@dataclasses.dataclass(frozen=True, slots=True)
class PreScored:
    """Per metric of the policy, one column over the feasible rows: what the samples show
    (NaN: no fresh value), when each was refreshed, what the estimates add (pods bound
    since, and this one: ``core.estimate``) and their sum, the value thresholds and
    scores read."""

    sampled: list[columns.Floats]
    refreshed: list[columns.Floats]
    added: list[columns.Floats]
    values: list[columns.Floats]

    def with_added(self, added: list[columns.Floats]) -> PreScored:
        """The same samples with other estimates (the fail-open's)."""
        values = [found + extra for found, extra in zip(self.sampled, added, strict=True)]
        return dataclasses.replace(self, added=added, values=values)


def prescore(stage: Stage, *, now: float) -> PreScored:
    """PreScore: each metric's samples and estimates on the feasible rows."""
    cycle, chosen, feasible = stage.cycle, stage.chosen, stage.feasible
    samples = [
        scoring.metric_samples(
            policy=chosen,
            metric=metric,
            table=cycle.table,
            rows=feasible,
            metrics=stage.metrics,
            now=now,
            memo=cycle.memo,
        )
        for metric in chosen.metrics
    ]
    sampled = [found for found, _ in samples]
    refreshed = [when for _, when in samples]
    added = [
        estimate.estimates(
            metric=metric,
            pod=cycle.pod,
            table=cycle.table,
            rows=feasible,
            refreshed=when,
            learned=stage.learned(metric),
            usage=stage.usage(metric),
        )
        for metric, when in zip(chosen.metrics, refreshed, strict=True)
    ]
    values = [found + extra for found, extra in zip(sampled, added, strict=True)]
    return PreScored(sampled=sampled, refreshed=refreshed, added=added, values=values)


NO_FRESH_VALUES: Final = "no fresh metric values for any feasible node"


def no_data(stage: Stage, prescored: PreScored) -> tuple[str, model.FallbackKind] | None:
    """Why the policy's fallback decides instead of its metrics (None: they can): no
    metric to score by is the caller's case; here Prometheus unreachable, or no fresh
    value on any feasible node."""
    unreachable = scoring.unreachable_error(policy=stage.chosen, metrics=stage.metrics)
    if unreachable is not None:
        return f"Prometheus unreachable: {unreachable}", model.FallbackKind.PROMETHEUS_UNREACHABLE
    if all(np.isnan(column).all() for column in prescored.sampled):
        return NO_FRESH_VALUES, model.FallbackKind.NO_FRESH_VALUES
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class MetricFiltered:
    """The metric Filter's result: which feasible rows pass (``thresholds``), the
    pre-score record it judged (the fail-open's, when it left learned values out) and the
    metrics whose learned value it left out."""

    thresholds: metric_threshold.ThresholdResult
    prescored: PreScored
    ignored: tuple[str, ...] = ()


def metric_filter(stage: Stage, prescored: PreScored) -> MetricFiltered:
    """The metric Filter: thresholds and onMissing: Exclude; a DaemonSet's pod is exempt
    unless the policy says otherwise (its node affinity leaves it one node, which a
    threshold would only strand). When no node passes, learned values are left out if
    that lets one pass (``fail_open``), then soft thresholds are lifted."""
    cycle, chosen, feasible = stage.cycle, stage.chosen, stage.feasible
    # Each node's bounds where a threshold has overrides (None: the threshold's own for
    # every node), laid out once per node-table version and picked for the feasible rows.
    bounds = [
        _rows_bounds(
            metric_threshold.row_bounds(metric=metric, table=cycle.table, memo=cycle.memo),
            feasible,
        )
        if metric.threshold_overrides
        else None
        for metric in chosen.metrics
    ]
    if metric_threshold.exempts(policy=chosen, pod=cycle.pod):
        found = MetricFiltered(metric_threshold.none_failed(len(feasible)), prescored)
    else:
        found = MetricFiltered(
            metric_threshold.threshold_filter(
                policy=chosen, values=prescored.values, bounds=bounds
            ),
            prescored,
        )
    if not found.thresholds.passed.any():
        found = fail_open(stage, prescored, bounds) or found
    if not found.thresholds.passed.any() and any(
        metric.threshold_mode is model.ThresholdMode.SOFT for metric in chosen.metrics
    ):
        # Soft thresholds: rather than refuse, score the nodes the others let pass.
        lifted = metric_threshold.threshold_filter(
            policy=chosen, values=found.prescored.values, bounds=bounds, lift_soft=True
        )
        found = dataclasses.replace(found, thresholds=lifted)
    return found


def fail_open(
    stage: Stage, prescored: PreScored, bounds: list[metric_threshold.Bounds | None]
) -> MetricFiltered | None:
    """No node passed the thresholds: if one does without what was learned (each learning
    metric's estimate without its learned value; declared amounts and the other metrics'
    estimates stay), the decision goes on without it (DESIGN "Scoring semantics" 6: a
    learned value is a guess, and one that rules out every node would hold every pod,
    and with no binds nothing new is learned). Returns the filter's result on the values
    without it and the metrics left out; None when the samples rule out every node
    themselves, or nothing learned was counted."""
    chosen = stage.chosen
    plain = list(prescored.added)
    ignored = []
    for index, metric in enumerate(chosen.metrics):
        if stage.learned(metric) is None or not estimate.learns(metric):
            continue
        without = estimate.estimates(
            metric=metric,
            pod=stage.cycle.pod,
            table=stage.cycle.table,
            rows=stage.feasible,
            refreshed=prescored.refreshed[index],
            learned=None,
            usage=stage.usage(metric),
        )
        if not np.array_equal(without, prescored.added[index]):
            plain[index] = without
            ignored.append(metric.name)
    if not ignored:
        return None
    unlearned = prescored.with_added(plain)
    thresholds = metric_threshold.threshold_filter(
        policy=chosen, values=unlearned.values, bounds=bounds
    )
    if not thresholds.passed.any():
        return None
    return MetricFiltered(thresholds, unlearned, tuple(ignored))


@dataclasses.dataclass(frozen=True, slots=True)
class Scored:
    """Score's record, over the rows that passed every filter (slots: positions in
    ``rows``): what each showed and had added, its recent binds, the scores, and the
    ranking's best two slots, best first."""

    rows: columns.Rows
    sampled: list[columns.Floats]
    added: list[columns.Floats]
    bursts: columns.Ints
    scores: scoring.Scores
    top: list[int]


def score(stage: Stage, filtered: MetricFiltered, *, bursts: columns.Ints, seed: int) -> Scored:
    """Score the rows that passed (the policy's metrics, kube-scheduler's plugins by the
    policy's weights, the burst penalty unless an estimate counts the pods instead) and
    rank them (``scoring.ranking``: ties to the fewest recent binds, then a seeded draw)."""
    cycle, chosen = stage.cycle, stage.chosen
    passing = filtered.thresholds.passed
    prescored = filtered.prescored
    rows = stage.feasible[passing]
    scored_bursts = bursts[rows]
    kube_terms = (
        kube_scores.score_terms(cycle=cycle, rows=rows, weights=chosen.kube_weights)
        if chosen.kube_weights
        else ()
    )
    counted = estimate.replaces_burst_penalty(chosen, cycle.pod, stage.usage)
    scores = scoring.score_nodes(
        policy=chosen,
        columns=[column[passing] for column in prescored.values],
        burst_counts=scored_bursts,
        kube=kube_terms,
        penalty=0.0 if counted else chosen.burst_penalty,
    )
    return Scored(
        rows=rows,
        sampled=[column[passing] for column in prescored.sampled],
        added=[column[passing] for column in prescored.added],
        bursts=scored_bursts,
        scores=scores,
        top=scoring.ranking(totals=scores.totals, burst_counts=scored_bursts, seed=seed),
    )


def learned(
    metrics: model.MetricView, chosen: model.Policy, metric: model.MetricSpec
) -> model.LearnedEffect | None:
    """What was learned of ``metric``'s effect per bind (None: nothing)."""
    series = metrics.get(model.MetricKey(policy=chosen.key, metric=metric.name))
    return None if series is None else series.learned


def usage(
    metrics: model.MetricView, chosen: model.Policy, metric: model.MetricSpec
) -> model.PodUsage | None:
    """The per-pod usage ``metric``'s estimate reads (None: none measured)."""
    series = metrics.get(model.MetricKey(policy=chosen.key, metric=metric.name))
    return None if series is None else series.usage


def _rows_bounds(bounds: metric_threshold.Bounds, rows: columns.Rows) -> metric_threshold.Bounds:
    return bounds[0][rows], bounds[1][rows]
