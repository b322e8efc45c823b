"""The estimate learner: how the metric moved on a node after binds there, per metric.

After each refresh of a metric whose estimate learns (``core.estimate.learns``), the
refresher hands the learner the metric's samples before and after, and the cluster's
node table. Learning is an experiment per node, kept only when it is clean:

- Pods bound to a node since the last refresh (any scheduler's: the table's recent
  pods) open a batch whose baseline is the node's sample before them, but only if no
  other pod was bound there within ``settleTime`` before (its ramp would be credited to
  the batch).
- Pods bound within ``settleTime`` of the batch's first bind join it; a later bind
  before the batch settled spoils it (the node is never quiet long enough to measure).
- The first sample refreshed ``settleTime`` after the batch's last bind closes it. If a
  pod that was on the node when the batch opened has left, the change is not the
  batch's alone and is dropped; otherwise the change from the baseline, over the
  batch's pods, is one ``core.estimate.Observation``.

The recent observations (``WINDOW`` overall, ``WORKLOAD_WINDOW`` per workload) are
summarised by medians (``core.estimate.summarise``): a node whose background jumped while
a batch settled is an outlier, not the new estimate. Nothing is applied before a few
observations. Runs on the event loop (the refresher's answer handler); no I/O. State
lives as long as the process: a new leader learns afresh.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from metricsched.core import columns, estimate, model

WINDOW = 27
"""Recent observations kept per metric (all workloads)."""
WORKLOAD_WINDOW = 9
"""Recent observations kept per workload."""
MAX_WORKLOADS = 1000
"""Workloads with observations kept per metric (the oldest are forgotten)."""
MAX_OPEN_S = 3600.0
"""A batch whose node sends no sample for this long after its last bind is dropped."""


@dataclasses.dataclass(slots=True)
class _Batch:
    baseline: float
    first_bind: float
    last_bind: float
    present: frozenset[str]  # uids on the node when it opened (departures spoil it)
    pods: int = 0
    declared: float = 0.0
    workloads: set[str] = dataclasses.field(default_factory=set)
    spoiled: bool = False


@dataclasses.dataclass(slots=True)
class _Metric:
    since: float  # binds at or before this time were seen by an earlier refresh
    batches: dict[model.NodeName, _Batch] = dataclasses.field(default_factory=dict)
    overall: collections.deque[estimate.Observation] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )
    by_workload: dict[str, collections.deque[estimate.Observation]] = dataclasses.field(
        default_factory=dict
    )
    effect: model.LearnedEffect | None = None


class Learner:
    def __init__(self) -> None:
        self._metrics: dict[model.MetricKey, _Metric] = {}

    def retain(self, keys: set[model.MetricKey]) -> None:
        """Forget the metrics no policy has any more."""
        for key in [k for k in self._metrics if k not in keys]:
            del self._metrics[key]

    def effect(self, key: model.MetricKey) -> model.LearnedEffect | None:
        found = self._metrics.get(key)
        return None if found is None else found.effect

    def observe(
        self,
        *,
        key: model.MetricKey,
        metric: model.MetricSpec,
        before: model.MetricSeries | None,
        after: model.MetricSeries,
        table: columns.NodeTable,
    ) -> model.LearnedEffect | None:
        """Fold one refresh of ``key`` in; returns what is learned so far."""
        now = after.last_refresh
        state = self._metrics.get(key)
        if state is None:
            # Binds before the first refresh have no baseline: start from here.
            state = self._metrics[key] = _Metric(since=now)
            return None
        if after.error is not None:
            return state.effect
        self._open(state, metric, before, table, until=now)
        settle = metric.estimate.settle_s
        for node, batch in list(state.batches.items()):
            sample = after.values.get(node)
            if sample is None:
                if now - batch.last_bind > MAX_OPEN_S:
                    del state.batches[node]
                continue
            if sample.refreshed_at < batch.last_bind + settle:
                continue
            del state.batches[node]
            row = table.rows.get(node)
            if batch.spoiled or row is None or not batch.present <= _uids(table, row):
                continue
            self._record(
                state,
                estimate.Observation(
                    pods=batch.pods,
                    workload=next(iter(batch.workloads)) if len(batch.workloads) == 1 else "",
                    delta=sample.value - batch.baseline,
                    declared=batch.declared,
                ),
            )
        return state.effect

    def _record(self, state: _Metric, seen: estimate.Observation) -> None:
        state.overall.append(seen)
        if seen.workload:
            found = state.by_workload.pop(seen.workload, None)
            if found is None:
                found = collections.deque(maxlen=WORKLOAD_WINDOW)
                if len(state.by_workload) >= MAX_WORKLOADS:
                    del state.by_workload[next(iter(state.by_workload))]
            found.append(seen)
            state.by_workload[seen.workload] = found  # most recent last
        state.effect = estimate.summarise(state.overall, state.by_workload)

    def _open(
        self,
        state: _Metric,
        metric: model.MetricSpec,
        before: model.MetricSeries | None,
        table: columns.NodeTable,
        *,
        until: float,
    ) -> None:
        """Add the pods bound in (since, until] to their node's batch."""
        recent = table.recent
        since, state.since = state.since, until
        if not recent.at.size:
            return
        settle = metric.estimate.settle_s
        fresh = (recent.at > since) & (recent.at <= until)
        for row in np.flatnonzero(fresh.any(axis=0)).tolist():
            node = table.names[row]
            slots = np.flatnonzero(fresh[:, row]).tolist()
            times = [float(recent.at[slot, row]) for slot in slots]
            batch = state.batches.get(node)
            if batch is None:
                first = min(times)
                sample = before.values.get(node) if before is not None else None
                unsettled = (recent.at[:, row] > first - settle) & (recent.at[:, row] < first)
                if sample is None or unsettled.any():
                    continue  # no quiet baseline before these binds: nothing to learn here
                batch = state.batches[node] = _Batch(
                    baseline=sample.value,
                    first_bind=first,
                    last_bind=first,
                    present=_uids(table, row),
                )
            for slot, at in zip(slots, times, strict=True):
                if at > batch.first_bind + settle:
                    batch.spoiled = True  # binds kept coming: no quiet moment to measure
                batch.pods += 1
                batch.last_bind = max(batch.last_bind, at)
                batch.workloads.add(recent.workload_names[int(recent.workload[slot, row])])
                batch.declared += estimate.declared_share(metric, table, row=row, slot=slot)


def _uids(table: columns.NodeTable, row: int) -> frozenset[str]:
    return frozenset(pod.uid for pod in table.states[row].pods)
