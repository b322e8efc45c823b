"""The estimate learner: how a metric moved on a node after the policy's own binds there.

After each refresh of a metric whose estimate learns (``core.estimate.learns``), the
refresher hands the learner the metric's samples before and after, and the cluster's
node table. Each batch of binds on a node is an experiment, kept only when it is clean;
what a kept one is worth is ``core.learning``'s arithmetic:

- Pods bound to a node since the last refresh (whichever scheduler bound them) open a
  batch whose baseline is the node's sample before them, but only if no other pod was
  bound there within ``settleTime`` before (its ramp would be credited to the batch).
  Pods bound within ``settleTime`` of the batch's first bind join it; a later bind
  before the batch settled spoils it (the node is never quiet long enough to measure).
- The batches opened at one refresh share their control nodes: those with a sample
  then and no bind within ``settleTime`` before (the first ``MAX_CONTROLS`` in name
  order), with a fingerprint of the pods on each.
- The first sample refreshed ``settleTime`` after the batch's last bind closes it. It is
  dropped when a pod that was on the node when it opened has left; when any of its
  pods is not one this policy placed (``PodInfo.placed_by``: the decision record names
  the policy; another tenant's, another policy's or another scheduler's binds never
  teach it, and a batch mixing them neither); or when fewer than
  ``core.learning.MIN_CONTROLS`` controls stayed quiet (no bind since, the same pods)
  and have a sample as fresh. Otherwise the node's change less the controls' median
  change is one ``core.learning.Observation``: a step every node shows cancels.

The recent observations (``WINDOW`` overall, ``WORKLOAD_WINDOW`` per workload) are
summarised robustly (``core.learning.summarise``); they expire after
``core.learning.EXPIRY_S`` whether or not new ones come, so a value nothing confirms
goes away even while no pod binds. Runs on the event loop (the refresher's answer
handler); no I/O. State lives as long as the process: a new leader learns afresh.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np

from metricsched.core import columns, estimate, learning, model

WINDOW = 27
"""Recent observations kept per metric (all workloads)."""
WORKLOAD_WINDOW = 9
"""Recent observations kept per workload."""
MAX_WORKLOADS = 1000
"""Workloads with observations kept per metric (the oldest are forgotten)."""
MAX_OPEN_S = 3600.0
"""A batch whose node sends no sample for this long after its last bind is dropped."""
MAX_CONTROLS = 256
"""Control nodes kept for the batches opened at one refresh (bounded memory)."""


@dataclasses.dataclass(slots=True)
class _Controls:
    """The control nodes of the batches opened at one refresh."""

    quiet_since: float  # a control must have had no bind after this
    baseline: dict[model.NodeName, tuple[float, int]]  # node -> (sample, pods' fingerprint)


@dataclasses.dataclass(slots=True)
class _Batch:
    baseline: float
    first_bind: float
    last_bind: float
    present: frozenset[str]  # uids on the node when it opened (departures spoil it)
    controls: _Controls
    uids: set[str] = dataclasses.field(default_factory=set)  # the batch's pods
    declared: float = 0.0
    workloads: set[str] = dataclasses.field(default_factory=set)
    spoiled: bool = False


@dataclasses.dataclass(slots=True)
class _Metric:
    since: float  # binds at or before this time were seen by an earlier refresh
    prints: dict[model.NodeName, int]  # each node's pods' fingerprint at that refresh
    batches: dict[model.NodeName, _Batch] = dataclasses.field(default_factory=dict)
    overall: collections.deque[learning.Observation] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )
    by_workload: dict[str, collections.deque[learning.Observation]] = dataclasses.field(
        default_factory=dict
    )
    effect: model.LearnedEffect | None = None
    stale_at: float = math.inf  # when the oldest observation expires


class Learner:
    def __init__(self) -> None:
        self._metrics: dict[model.MetricKey, _Metric] = {}
        # Each node's state and its pods' fingerprint, computed once per state object
        # (the cache rebuilds a node's state only when it changed), and the fingerprints
        # of the latest table (every metric of a refresh round sees the same one).
        self._states: dict[model.NodeName, tuple[model.NodeState, int]] = {}
        self._table: tuple[columns.NodeTable, int | None] | None = None  # and its version
        self._prints: dict[model.NodeName, int] = {}

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
            self._metrics[key] = _Metric(since=now, prints=self._fingerprints(table))
            return None
        changed = self._expire(state, now)
        if after.error is not None:
            if changed:
                state.effect = self._summary(state, metric, now)
            return state.effect
        prints = self._fingerprints(table)
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
            seen = self._measure(
                key=key,
                metric=metric,
                node=node,
                batch=batch,
                sample=sample,
                after=after,
                table=table,
                prints=prints,
            )
            if seen is not None:
                self._record(state, seen)
                changed = True
        state.prints = prints
        if changed:
            state.effect = self._summary(state, metric, now)
        return state.effect

    def _measure(
        self,
        *,
        key: model.MetricKey,
        metric: model.MetricSpec,
        node: model.NodeName,
        batch: _Batch,
        sample: model.MetricSample,
        after: model.MetricSeries,
        table: columns.NodeTable,
        prints: dict[model.NodeName, int],
    ) -> learning.Observation | None:
        """What a settled batch says, if it was a clean experiment of this policy's own."""
        row = table.rows.get(node)
        if batch.spoiled or row is None:
            return None
        pods = {pod.uid: pod for pod in table.states[row].pods}
        if not batch.present <= pods.keys():
            return None  # a pod left meanwhile: the change is not the batch's alone
        if any((pod := pods.get(uid)) is None or pod.placed_by != key.policy for uid in batch.uids):
            return None  # another tenant's, policy's or scheduler's pod: not ours to learn
        recent = table.recent.at
        changes = []
        for name, (base, fingerprint) in batch.controls.baseline.items():
            control = table.rows.get(name)
            found = after.values.get(name)
            if (
                control is None
                or found is None
                or found.refreshed_at < sample.refreshed_at
                or prints.get(name) != fingerprint
                or bool((recent[:, control] > batch.controls.quiet_since).any())
            ):
                continue  # gone, not sampled as freshly, or not quiet any more
            changes.append(found.value - base)
        spec = metric.estimate
        return learning.observation(
            metric=metric,
            at=sample.refreshed_at,
            pods=len(batch.uids),
            workload=next(iter(batch.workloads)) if len(batch.workloads) == 1 else "",
            node_change=sample.value - batch.baseline,
            control_changes=changes,
            declared=batch.declared,
            allocatable=(
                float(estimate.allocatable(spec, table)[row]) if spec.resource is not None else 0.0
            ),
        )

    def _fingerprints(self, table: columns.NodeTable) -> dict[model.NodeName, int]:
        """Each node's pods as one number: a control whose pods changed is no control."""
        # The runtime's table is updated in place as nodes change: its version tells (a
        # table without one is not reused).
        seen = self._table
        if (
            seen is not None
            and seen[0] is table
            and table.version is not None
            and seen[1] == table.version
        ):
            return self._prints
        states: dict[model.NodeName, tuple[model.NodeState, int]] = {}
        for name, state in zip(table.names, table.states, strict=True):
            known = self._states.get(name)
            if known is None or known[0] is not state:
                known = (state, hash(frozenset(pod.uid for pod in state.pods)))
            states[name] = known
        self._states, self._table = states, (table, table.version)
        self._prints = {name: found for name, (_, found) in states.items()}
        return self._prints

    def _record(self, state: _Metric, seen: learning.Observation) -> None:
        state.overall.append(seen)
        if seen.workload:
            found = state.by_workload.pop(seen.workload, None)
            if found is None:
                found = collections.deque(maxlen=WORKLOAD_WINDOW)
                if len(state.by_workload) >= MAX_WORKLOADS:
                    del state.by_workload[next(iter(state.by_workload))]
            found.append(seen)
            state.by_workload[seen.workload] = found  # most recent last
        state.stale_at = min(state.stale_at, seen.at + learning.EXPIRY_S)

    def _expire(self, state: _Metric, now: float) -> bool:
        """Drop the observations expired at ``now``; whether any went."""
        if now < state.stale_at:
            return False
        cutoff = now - learning.EXPIRY_S
        for found in (state.overall, *state.by_workload.values()):
            while found and found[0].at < cutoff:
                found.popleft()
        state.by_workload = {w: found for w, found in state.by_workload.items() if found}
        oldest = min(
            (found[0].at for found in (state.overall, *state.by_workload.values()) if found),
            default=math.inf,
        )
        state.stale_at = oldest + learning.EXPIRY_S
        return True

    def _summary(
        self, state: _Metric, metric: model.MetricSpec, now: float
    ) -> model.LearnedEffect | None:
        return learning.summarise(
            state.overall, state.by_workload, now=now, limit=learning.fit_limit(metric)
        )

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
        if not recent.at.size or before is None:
            return
        settle = metric.estimate.settle_s
        fresh = (recent.at > since) & (recent.at <= until)
        controls: _Controls | None = None
        for row in np.flatnonzero(fresh.any(axis=0)).tolist():
            node = table.names[row]
            pods = [pod for pod in table.states[row].pods if since < pod.bound_at <= until]
            if not pods:
                continue
            batch = state.batches.get(node)
            if batch is None:
                first = min(pod.bound_at for pod in pods)
                sample = before.values.get(node)
                unsettled = (recent.at[:, row] > first - settle) & (recent.at[:, row] < first)
                if sample is None or unsettled.any():
                    continue  # no quiet baseline before these binds: nothing to learn here
                if controls is None:
                    controls = _controls(state, before, table, quiet_since=since - settle)
                batch = state.batches[node] = _Batch(
                    baseline=sample.value,
                    first_bind=first,
                    last_bind=first,
                    present=_uids(table, row),
                    controls=controls,
                )
            for pod in pods:
                if pod.bound_at > batch.first_bind + settle:
                    batch.spoiled = True  # binds kept coming: no quiet moment to measure
                batch.last_bind = max(batch.last_bind, pod.bound_at)
                if pod.uid in batch.uids:
                    continue  # seen before, its bind time moved (to its start): once
                batch.uids.add(pod.uid)
                batch.workloads.add(pod.workload)
                batch.declared += estimate.declared_share(metric, table, row=row, pod=pod)


def _controls(
    state: _Metric, before: model.MetricSeries, table: columns.NodeTable, *, quiet_since: float
) -> _Controls:
    """The nodes quiet since ``quiet_since`` with a sample in ``before`` and the
    fingerprint of their pods at that refresh: the controls of the batches opening now."""
    quiet = ~(table.recent.at > quiet_since).any(axis=0)
    baseline: dict[model.NodeName, tuple[float, int]] = {}
    for row in np.flatnonzero(quiet).tolist():
        node = table.names[row]
        sample = before.values.get(node)
        fingerprint = state.prints.get(node)
        if sample is None or fingerprint is None:
            continue
        baseline[node] = (sample.value, fingerprint)
        if len(baseline) >= MAX_CONTROLS:
            break
    return _Controls(quiet_since=quiet_since, baseline=baseline)


def _uids(table: columns.NodeTable, row: int) -> frozenset[str]:
    return frozenset(pod.uid for pod in table.states[row].pods)
