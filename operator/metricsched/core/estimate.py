"""Metric estimates: how the pods bound since a node's last sample move its metric.

A sample is as old as the refresh that returned it; pods bound since then (by any
scheduler) are not in it yet, nor is the pod being placed. A metric's ``estimate``
(``model.EstimateSpec``) says how much each such pod adds:

- ``Requests`` / ``Limits``: the pod's requests (limits) of ``resource`` x ``factor``,
  over the node's allocatable, so one pod weighs more on a small node;
- ``Amount``: a stated amount per pod, over the node's allocatable;
- ``Learned`` (opt-in): a per-pod increment learned from how the metric moved after
  the policy's own past binds (``core.learning``: ``LearnedEffect.per_pod``, per workload
  where there is history), in the metric's load direction and clamped to
  ``[0, learning.cap]`` on each node; with ``resource`` it is learned in resource units
  and applied over each node's allocatable. Nothing until ``learning.MIN_OBSERVATIONS``
  batches have settled. It never counts in place of the burst penalty.

With ``learn: true`` a declared amount is scaled by the learned ratio of what binds did
to what was declared (per workload where there is history), so pods that use more than
they request are counted as they are. A resource amount adds for ``Minimize`` metrics and
subtracts for ``Maximize`` ones (free memory falls as pods start).

A pod counts while its node's sample was refreshed less than ``settleTime`` after the
bind ("the sample reflects the pod" once it was taken that long after), less what it
measurably uses already where the per-pod answer shows it and the node's sample is no
older (a pod is never counted twice, whatever the estimate's source); the pod being
placed always counts. The sum is added to the sample in the threshold filter and in the
score (``core.cycle``). Policies whose every Prometheus metric declares an estimate need
no burst penalty (``replaces_burst_penalty``).

Also here, what the learner needs to know of a metric (``learns``, ``declared_share``);
its arithmetic is ``core.learning``.

Purely computational: no I/O, no clocks (times are arguments).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from metricsched.core import columns, learning, model
from metricsched.core import usage as usage_mod


def replaces_burst_penalty(
    policy: model.Policy,
    pod: model.PodInfo | None = None,
    usage_of: Callable[[model.MetricSpec], model.PodUsage | None] | None = None,
) -> bool:
    """True when every metric of ``policy`` that binds move (Prometheus, metrics-server)
    counts the binds it estimates, so
    the burst penalty is not applied: a declared estimate (``Requests``, ``Limits``,
    ``Amount``), or ``Measured`` (the default of a cpu or memory threshold) **for a pod
    whose own estimate rests on its workload's measured usage or a declared amount**. A
    pod of a workload nothing has measured yet is counted from ``max(requests, limits) x
    factor``, which understates exactly the pods that use more than they request: a
    brand-new workload's first burst then piled onto the coolest nodes (issue 27's
    scenario a: hottest node 2.5 against kube-scheduler's 1.9), so its pods keep the
    penalty that spreads a burst. ``usage_of``: the per-pod usage a metric's series
    carries. A ``Learned`` metric does not count: it adds nothing until it has learned,
    and nothing while it fails open."""
    found = [m for m in policy.metrics if m.source.moves_with_binds]
    return bool(found) and all(
        _counts_binds(m, pod, usage_of(m) if usage_of is not None else None) for m in found
    )


def _counts_binds(
    metric: model.MetricSpec, pod: model.PodInfo | None, usage: model.PodUsage | None
) -> bool:
    spec = metric.estimate
    if not spec.active or spec.source is model.EstimateFrom.LEARNED:
        return False
    if spec.source is model.EstimateFrom.MEASURED:
        if pod is None:
            return True  # the policy as a whole (no pod): it counts what it can
        return own_amount(spec, pod, usage).source in ("measured", "declared")
    return spec.declared


def _sign(metric: model.MetricSpec) -> float:
    return learning.direction(metric)


def _declared_amounts(
    spec: model.EstimateSpec, recent: columns.RecentPods, slots: columns.Rows, rows: columns.Rows
) -> columns.Floats:
    """The declared amounts (millicores or bytes) of the recent pods at (slots, rows)."""
    cpu = spec.resource is model.EstimateResource.CPU
    if spec.source is model.EstimateFrom.AMOUNT:
        return np.full(len(slots), float(spec.amount))
    if spec.source is model.EstimateFrom.LIMITS:
        found = recent.cpu_limit if cpu else recent.memory_limit
    else:
        found = recent.cpu if cpu else recent.memory
    amounts: columns.Floats = found[slots, rows] * spec.factor
    return amounts


def pod_amount(spec: model.EstimateSpec, pod: model.PodInfo) -> float:
    """The declared amount of one pod (millicores or bytes); 0 for Learned and None."""
    cpu = spec.resource is model.EstimateResource.CPU
    if spec.source is model.EstimateFrom.AMOUNT:
        return float(spec.amount)
    if spec.source is model.EstimateFrom.LIMITS:
        return (pod.limits.milli_cpu if cpu else pod.limits.memory) * spec.factor
    if spec.source is model.EstimateFrom.REQUESTS:
        return (pod.requests.milli_cpu if cpu else pod.requests.memory) * spec.factor
    return 0.0


def allocatable(spec: model.EstimateSpec, table: columns.NodeTable) -> columns.Ints:
    """Each row's allocatable amount of the estimate's resource."""
    if spec.resource is model.EstimateResource.CPU:
        return table.allocatable.milli_cpu
    return table.allocatable.memory


def _per_workload(
    ids: columns.Ints,
    names: list[str],
    by_workload: Mapping[str, float],
    overall: float | None,
    *,
    default: float,
) -> columns.Floats:
    """The learned value of each workload number in ``ids`` (its own, else the overall,
    else ``default``); looked up once per distinct workload present."""
    out = np.full(len(ids), default if overall is None else overall)
    if by_workload:
        for number in np.unique(ids).tolist():
            value = by_workload.get(names[number]) if number else None
            if value is not None:
                out[ids == number] = value
    return out


def _workload_value(
    pod: model.PodInfo, by: Mapping[str, float], overall: float | None
) -> float | None:
    workload = pod.workload
    found = by.get(workload) if workload else None
    return found if found is not None else overall


def _ratio(
    learned: model.LearnedEffect | None, spec: model.EstimateSpec
) -> model.LearnedEffect | None:
    return learned if spec.learn else None


def estimates(
    *,
    metric: model.MetricSpec,
    pod: model.PodInfo,
    table: columns.NodeTable,
    rows: columns.Rows,
    refreshed: columns.Floats,
    learned: model.LearnedEffect | None,
    usage: model.PodUsage | None = None,
) -> columns.Floats:
    """What to add to each row's sample of ``metric``: the pods bound to it that its sample
    does not reflect yet, and ``pod`` itself. ``refreshed`` is each row's sample time
    (-inf: none; such rows are missing anyway). Zeros when the metric has no estimate.
    Only the recent pods still counted are visited (few, outside a burst). ``usage`` is
    the measured per-pod usage (``estimate.from: Measured``)."""
    spec = metric.estimate
    size = len(rows)
    if not spec.active or not size:
        return np.zeros(size)
    if spec.source is model.EstimateFrom.MEASURED:
        return _measured(
            metric=metric, pod=pod, table=table, rows=rows, refreshed=refreshed, usage=usage
        )
    if spec.source is model.EstimateFrom.LEARNED and (learned is None or learned.per_pod is None):
        return np.zeros(size)  # nothing learned yet
    recent = table.recent
    live_slots, live_at = np.nonzero(recent.at[:, rows] > (refreshed - spec.settle_s))
    live_rows = rows[live_at]
    ids = recent.workload[live_slots, live_rows]
    if spec.source is model.EstimateFrom.LEARNED:
        assert learned is not None
        return _learned(
            metric=metric, pod=pod, table=table, rows=rows, learned=learned, live=(ids, live_at)
        )
    ratio = learned if spec.learn else None
    by_ratio = ratio.ratio_by_workload if ratio else {}
    overall_ratio = ratio.ratio if ratio else None
    amounts = _declared_amounts(spec, recent, live_slots, live_rows)
    factors = _per_workload(ids, recent.workload_names, by_ratio, overall_ratio, default=1.0)
    pending_amount = np.bincount(
        live_at,
        weights=np.maximum(
            0.0,
            amounts * factors
            - _seen(
                spec,
                recent,
                usage=usage,
                slots=live_slots,
                at=live_at,
                rows=rows,
                refreshed=refreshed,
            ),
        ),
        minlength=size,
    )
    own_amount = pod_amount(spec, pod) * (_workload_value(pod, by_ratio, overall_ratio) or 1.0)
    available = allocatable(spec, table)[rows].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(available > 0, (pending_amount + own_amount) / available, np.inf)
    signed: columns.Floats = _sign(metric) * share
    return signed


def _seen(
    spec: model.EstimateSpec,
    recent: columns.RecentPods,
    *,
    usage: model.PodUsage | None,
    slots: columns.Rows,
    at: columns.Rows,
    rows: columns.Rows,
    refreshed: columns.Floats,
) -> columns.Floats | float:
    """What each recent pod at (``slots``, ``rows[at]``) measurably uses already, where its
    node's sample (``refreshed[at]``) is no older than that measurement: the part of it the
    sample shows, which its estimate must not count again (0 without a per-pod answer)."""
    if usage is None or spec.resource is None or not len(slots):
        return 0.0
    _, _, shows = _measured_slots(recent, spec.resource, usage, rows[at])
    shown = usage.at <= refreshed[at] + SAME_ROUND_S
    seen: columns.Floats = np.where(shown, shows[slots, rows[at]], 0.0)
    return seen


def _learned(
    *,
    metric: model.MetricSpec,
    pod: model.PodInfo,
    table: columns.NodeTable,
    rows: columns.Rows,
    learned: model.LearnedEffect,
    live: tuple[columns.Ints, columns.Ints],
) -> columns.Floats:
    """``Learned``: the learned increment of each recent pod still counted (``live``: its
    workload number and its position in ``rows``) and of ``pod``, in the metric's units
    on each row (over the row's allocatable when learned in resource units), each within
    ``[0, learning.cap]``, signed by the goal."""
    spec = metric.estimate
    ids, live_at = live
    by, overall = learned.per_pod_by_workload, learned.per_pod
    pending = _per_workload(ids, table.recent.workload_names, by, overall, default=0.0)
    own = np.full(len(rows), _workload_value(pod, by, overall) or 0.0)
    limit = learning.cap(metric)
    if spec.resource is not None:
        # Learned in resource units: each node counts them over its own allocatable (a
        # node without any can take no pod anyway: it counts the cap).
        available = allocatable(spec, table)[rows].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            pending = np.where(available[live_at] > 0, pending / available[live_at], limit)
            own = np.where(available > 0, own / available, limit)
    pending = np.clip(pending, 0.0, limit)
    own = np.clip(own, 0.0, limit)
    total: columns.Floats = _sign(metric) * (
        np.bincount(live_at, weights=pending, minlength=len(rows)) + own
    )
    return total


SAME_ROUND_S = 2.0
"""A per-pod usage answer sent this much later than a node's sample still counts as
showing no more than the sample (both queries of one refresh round)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Live:
    """The recent pods a Measured estimate still counts on some rows: each one's slot, its
    position in the rows, its estimate and source (``core.usage.amounts``), and what it
    adds (its estimate less what the node's sample already shows of it)."""

    slots: columns.Ints
    at: columns.Ints
    estimated: columns.Floats
    source: columns.Ints
    seen: columns.Floats
    adds: columns.Floats


def _live_measured(
    spec: model.EstimateSpec,
    table: columns.NodeTable,
    rows: columns.Rows,
    refreshed: columns.Floats,
    usage: model.PodUsage | None,
) -> _Live:
    """The Measured rule for the recent pods of ``rows`` (``refreshed``: each row's sample
    time): a pod bound within ``settleTime`` of its node's sample counts its estimated
    usage less what it measurably uses already, when that measurement is no newer than the
    node's sample (the sample shows at least that much of it). Vectorised: a backlog puts
    thousands of recent pods in one cycle; the cycle and ``explain`` both read it here."""
    assert spec.resource is not None
    cpu = spec.resource is model.EstimateResource.CPU
    recent = table.recent
    live_slots, live_at = np.nonzero(recent.at[:, rows] > (refreshed - spec.settle_s))
    live_rows = rows[live_at]
    count = len(live_slots)
    measured = np.full(count, np.nan)
    starting = np.full(count, np.nan)
    seen = np.zeros(count)
    if usage is not None and count:
        by_workload, early, shows = _measured_slots(recent, spec.resource, usage, live_rows)
        measured = by_workload[live_slots, live_rows]
        starting = early[live_slots, live_rows]
        shown = usage.at <= refreshed[live_at] + SAME_ROUND_S
        seen = np.where(shown, shows[live_slots, live_rows], 0.0)
    estimated, source = usage_mod.amounts(
        resource=spec.resource,
        measured=measured,
        requested=(recent.cpu if cpu else recent.memory)[live_slots, live_rows].astype(np.float64),
        limit=(recent.cpu_limit if cpu else recent.memory_limit)[live_slots, live_rows].astype(
            np.float64
        ),
        declared=float(spec.amount),
        factor=spec.measured_factor,
        starting=starting,
    )
    return _Live(
        slots=live_slots,
        at=live_at,
        estimated=estimated,
        source=source,
        seen=seen,
        adds=np.maximum(0.0, estimated - seen),
    )


def _measured(
    *,
    metric: model.MetricSpec,
    pod: model.PodInfo,
    table: columns.NodeTable,
    rows: columns.Rows,
    refreshed: columns.Floats,
    usage: model.PodUsage | None,
) -> columns.Floats:
    """``estimate.from: Measured``: what the recent pods still add on each row
    (``_live_measured``: a pod whose usage is in the sample is not counted twice, one that
    shows only part of it, ramping up or with a rate window filling, counts the rest),
    and the pod being placed its whole estimate."""
    spec = metric.estimate
    live = _live_measured(spec, table, rows, refreshed, usage)
    pending = np.bincount(live.at, weights=live.adds, minlength=len(rows))
    own = own_amount(spec, pod, usage).value
    available = allocatable(spec, table)[rows].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(available > 0, (pending + own) / available, np.inf)
    signed: columns.Floats = _sign(metric) * share
    return signed


@dataclasses.dataclass(slots=True)
class _MeasuredSlots:
    """Per recent-pod slot of a table: its workload's measured amount (NaN: none) and what
    it shows itself, from one ``PodUsage``; rows recomputed as the table rewrites them."""

    usage: model.PodUsage
    workload: columns.Floats
    starting: columns.Floats  # the workload's starting pods' quantile (NaN: none)
    seen: columns.Floats
    versions: columns.Ints  # the row versions these rows were computed at (-1: never)


def _measured_slots(
    recent: columns.RecentPods,
    resource: model.EstimateResource,
    usage: model.PodUsage,
    rows: columns.Rows,
) -> tuple[columns.Floats, columns.Floats, columns.Floats]:
    """The measured amounts of ``recent``'s slots (their workloads' settled and starting
    quantiles, and what each shows), kept beside the table (``derived``) across cycles
    for one usage answer: three lookups per recent pod once per answer and per rewritten
    row, not in every cycle (a backlog's cycles would spend more on them than
    on everything else)."""
    cpu = resource is model.EstimateResource.CPU
    entry = recent.derived.get(("measured", resource))
    shape = recent.at.shape
    if (
        not isinstance(entry, _MeasuredSlots)
        or entry.usage is not usage
        or entry.workload.shape != shape
        or len(entry.versions) != len(recent.row_version)
    ):
        entry = _MeasuredSlots(
            usage=usage,
            workload=np.full(shape, np.nan),
            starting=np.full(shape, np.nan),
            seen=np.zeros(shape),
            versions=np.full(len(recent.row_version), -1, dtype=np.int64),
        )
        recent.derived[("measured", resource)] = entry
    stale = np.unique(rows[entry.versions[rows] != recent.row_version[rows]])
    if len(stale):
        by_workload = usage.workload_cpu if cpu else usage.workload_memory
        early = usage.starting_cpu if cpu else usage.starting_memory
        measured = usage.cpu if cpu else usage.memory
        for row in stale.tolist():
            slots = np.nonzero(recent.at[:, row] > _NEVER)[0]
            entry.workload[:, row] = np.nan
            entry.starting[:, row] = np.nan
            entry.seen[:, row] = 0.0
            for slot in slots.tolist():
                workload = str(recent.usage_workload[slot, row])
                entry.workload[slot, row] = by_workload.get(workload, np.nan)
                entry.starting[slot, row] = early.get(workload, np.nan)
                entry.seen[slot, row] = measured.get(str(recent.key[slot, row]), 0.0)
            entry.versions[row] = recent.row_version[row]
    return entry.workload, entry.starting, entry.seen


_NEVER = -np.inf


def own_amount(
    spec: model.EstimateSpec, pod: model.PodInfo, usage: model.PodUsage | None
) -> usage_mod.Amount:
    """The Measured estimate of ``pod`` (the pod being placed), with its source."""
    assert spec.resource is not None
    cpu = spec.resource is model.EstimateResource.CPU
    return usage_mod.pod_amount(
        resource=spec.resource,
        usage=usage,
        workload=pod.usage_workload,
        requested=float(pod.requests.milli_cpu if cpu else pod.requests.memory),
        limit=float(pod.limits.milli_cpu if cpu else pod.limits.memory),
        declared=float(spec.amount),
        factor=spec.measured_factor,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Counted:
    """A pod its node's sample does not show yet, still counted by a Measured estimate."""

    node: model.NodeName
    pod: str  # "namespace/name"
    share: float  # what it adds to the node's value (its sign included)
    basis: str  # what the amount rests on, for people
    until: float  # unix time it stops counting at the latest (settleTime after its bind)


def still_counted(
    *,
    metric: model.MetricSpec,
    table: columns.NodeTable,
    refreshed: Mapping[model.NodeName, float],
    usage: model.PodUsage | None,
) -> list[Counted]:
    """Per node (those with a sample, ``refreshed``: its time), the pods a Measured
    estimate still adds to the sample, with what each adds and until when at the latest:
    what ``metricsched explain`` lists (the cycle's rule, ``_live_measured``)."""
    spec = metric.estimate
    if spec.source is not model.EstimateFrom.MEASURED or spec.resource is None:
        return []
    sizes = allocatable(spec, table)
    nodes = [
        (node, sampled, row)
        for node, sampled in sorted(refreshed.items())
        if (row := table.rows.get(node)) is not None and sizes[row] > 0
    ]
    if not nodes:
        return []
    rows = np.array([row for _, _, row in nodes], dtype=np.int64)
    live = _live_measured(spec, table, rows, np.array([sampled for _, sampled, _ in nodes]), usage)
    recent = table.recent
    found: list[Counted] = []
    for i in np.lexsort((live.slots, live.at)).tolist():
        if live.adds[i] <= 0:
            continue
        position, slot = int(live.at[i]), int(live.slots[i])
        node, _, row = nodes[position]
        workload = str(recent.usage_workload[slot, row])
        amount = usage_mod.amount_of(float(live.estimated[i]), int(live.source[i]), usage, workload)
        text = usage_mod.describe(amount, resource=spec.resource, workload=workload)
        if live.seen[i]:
            text += f", less the {usage_mod.shown(float(live.seen[i]), spec.resource)} it shows"
        found.append(
            Counted(
                node=node,
                pod=str(recent.key[slot, row]),
                share=_sign(metric) * float(live.adds[i]) / float(sizes[row]),
                basis=text,
                until=float(recent.at[slot, row]) + spec.settle_s,
            )
        )
    return found


def basis(metric: model.MetricSpec, pod: model.PodInfo, usage: model.PodUsage | None) -> str:
    """What the Measured estimate of ``pod`` (the pod being placed) rests on, for people:
    "web's measured 0.31 cores (p90 of 4 pods)"."""
    spec = metric.estimate
    assert spec.resource is not None
    return usage_mod.describe(
        own_amount(spec, pod, usage), resource=spec.resource, workload=pod.usage_workload
    )


# --- learning ----------------------------------------------------------------------------


def learns(metric: model.MetricSpec) -> bool:
    """Whether the runtime must learn from binds for ``metric``."""
    spec = metric.estimate
    return spec.source is model.EstimateFrom.LEARNED or (spec.active and spec.learn)


def declared_share(
    metric: model.MetricSpec, table: columns.NodeTable, *, row: int, pod: model.PodInfo
) -> float:
    """What the declared estimate said ``pod``, bound to ``row``, would add to ``metric``
    (its sign included); 0 for Learned and None."""
    spec = metric.estimate
    if spec.source not in (
        model.EstimateFrom.REQUESTS,
        model.EstimateFrom.LIMITS,
        model.EstimateFrom.AMOUNT,
    ):
        return 0.0
    size = float(allocatable(spec, table)[row])
    if size <= 0:
        return 0.0
    return _sign(metric) * pod_amount(spec, pod) / size
