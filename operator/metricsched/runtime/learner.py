"""The estimate learner: how the metric moved on a node after binds there, per metric.

After each refresh of a metric whose estimate learns (``core.estimate.learns``), the
refresher hands the learner the metric's samples before and after, and the cluster's
node table. Per node, the pods bound since the last refresh (any scheduler's: the
table's recent pods) open a batch, whose baseline is the node's sample before them;
pods bound while it is open join it. The first sample refreshed ``settleTime`` after
the batch's last bind closes it: the change from the baseline, over the batch's pods,
is one ``core.estimate.Observation``, folded into the metric's ``LearnedEffect`` (per
workload when the batch had one). Pods leaving and background load moving meanwhile
are noise the moving average absorbs.

Runs on the event loop (the refresher's answer handler); no I/O. State lives as long as
the process: a new leader starts learning afresh.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from metricsched.core import columns, estimate, model

MAX_OPEN_S = 3600.0
"""A batch whose node sends no sample for this long after its last bind is dropped."""


@dataclasses.dataclass(slots=True)
class _Batch:
    baseline: float
    last_bind: float
    pods: int = 0
    declared: float = 0.0
    workloads: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(slots=True)
class _Metric:
    since: float  # binds at or before this time were seen by an earlier refresh
    batches: dict[model.NodeName, _Batch] = dataclasses.field(default_factory=dict)
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
            state.effect = estimate.learn(
                state.effect,
                estimate.Observation(
                    pods=batch.pods,
                    workload=next(iter(batch.workloads)) if len(batch.workloads) == 1 else "",
                    delta=sample.value - batch.baseline,
                    declared=batch.declared,
                ),
            )
        return state.effect

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
        fresh = (recent.at > since) & (recent.at <= until)
        for slot, row in zip(*np.nonzero(fresh), strict=True):
            node = table.names[int(row)]
            batch = state.batches.get(node)
            if batch is None:
                sample = before.values.get(node) if before is not None else None
                if sample is None:
                    continue  # no value before the bind: nothing to compare with
                batch = state.batches[node] = _Batch(baseline=sample.value, last_bind=0.0)
            batch.pods += 1
            batch.last_bind = max(batch.last_bind, float(recent.at[slot, row]))
            batch.workloads.add(recent.workload_names[int(recent.workload[slot, row])])
            batch.declared += estimate.declared_share(metric, table, row=int(row), slot=int(slot))
