"""The metric threshold filter: a policy's thresholds and ``onMissing: Exclude``.

Contract: after kube-scheduler's filters, a node is ruled out for a policy's pod when a
thresholded metric's fresh value lies outside [min, max] (``node(s) exceeded threshold
<metric> > <max>``, ``node(s) fell below threshold <metric> < <min>``), or when a metric
with ``onMissing: Exclude`` has no fresh value on it (``node(s) had no fresh value for
metric <metric>``); one reason per metric, in the policy's order. A node's [min, max] is
that of the first of the metric's ``overrides`` whose node selector matches its labels,
else the threshold's own; the reason names the bound that applied. A ``Soft`` threshold
is lifted when, with it, no node would pass (the others, Hard ones and onMissing:
Exclude, still apply); the result names what was lifted. A DaemonSet's pod is exempt
unless the policy's ``daemonSetPods`` is ``Filter``. The reasons join kube-scheduler's
in the FailedScheduling text. Vector: one comparison per metric over the feasible
nodes' values (NaN: missing) and bounds (NaN: none; laid out per row once per node-table
version, ``row_bounds``); reasons are rendered for the failing nodes only. The values
are ``core.scoring.metric_samples`` plus ``core.estimate``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, policy_selection, scoring

NAME: Final = "MetricThreshold"


# --- thresholds ------------------------------------------------------------------------


def exceeded_reason(metric: model.MetricSpec, bound: float | None = None) -> str:
    """``bound``: the max that applied on the node (default: the threshold's own)."""
    high = metric.threshold_max if bound is None else bound
    return f"node(s) exceeded threshold {metric.name} > {high:g}"


def fell_below_reason(metric: model.MetricSpec, bound: float | None = None) -> str:
    """``bound``: the min that applied on the node (default: the threshold's own)."""
    low = metric.threshold_min if bound is None else bound
    return f"node(s) fell below threshold {metric.name} < {low:g}"


# --- bounds per node group ----------------------------------------------------------------


def _bound(value: float | None) -> float:
    return math.nan if value is None else value


def node_bounds(metric: model.MetricSpec, labels: Mapping[str, str]) -> tuple[float, float]:
    """(min, max) of ``metric``'s threshold on a node with ``labels`` (NaN: no bound):
    the first override whose node selector matches, else the threshold's own."""
    for override in metric.threshold_overrides:
        if policy_selection.selector_matches(override.node_selector, labels):
            return _bound(override.threshold_min), _bound(override.threshold_max)
    return _bound(metric.threshold_min), _bound(metric.threshold_max)


Bounds = tuple[columns.Floats, columns.Floats]  # each row's min and max (NaN: none)


def row_bounds(
    *, metric: model.MetricSpec, table: columns.NodeTable, memo: framework.Memo
) -> Bounds:
    """Each row's (min, max) of ``metric`` over ``table``: the override matching the
    node's labels, worked out once per node-table version (labels change only with it),
    not once per pod. The arrays are the memo's: index them, do not write them."""
    if not metric.threshold_overrides:
        size = len(table.states)
        return (
            np.full(size, _bound(metric.threshold_min)),
            np.full(size, _bound(metric.threshold_max)),
        )

    def compute() -> Bounds:
        pairs = [node_bounds(metric, state.node.labels) for state in table.states]
        every = np.array(pairs, dtype=np.float64).reshape(len(pairs), 2)
        return every[:, 0].copy(), every[:, 1].copy()

    # keyed by the spec object: a policy's new generation is a new spec, laid out again
    return memo.per_table(
        "MetricThreshold/bounds", (metric.name, id(metric)), table, compute, source=metric
    )


def no_fresh_value_reason(metric: model.MetricSpec) -> str:
    return f"node(s) had no fresh value for metric {metric.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class ThresholdResult:
    """Which nodes the thresholds and onMissing: Exclude pass, and why the others fail."""

    passed: columns.Bools
    reasons: Mapping[int, tuple[str, ...]]  # position -> reasons, for the failed ones
    # Soft thresholds lifted because with them no node passed: each reason, and on how
    # many of the nodes that pass now it held (empty: nothing was lifted)
    lifted: Mapping[str, int] = dataclasses.field(default_factory=dict)


def exempts(*, policy: model.Policy, pod: model.PodInfo) -> bool:
    """Whether ``pod`` skips the policy's thresholds: a DaemonSet's, unless ``Filter``."""
    return pod.owner_kind == "DaemonSet" and policy.daemon_set_pods is model.DaemonSetPods.EXEMPT


def none_failed(size: int) -> ThresholdResult:
    """The result for an exempt pod: every node passes."""
    return ThresholdResult(np.ones(size, dtype=np.bool_), {})


def threshold_filter(
    *,
    policy: model.Policy,
    values: Sequence[columns.Floats],
    bounds: Sequence[Bounds | None] | None = None,
    lift_soft: bool = False,
) -> ThresholdResult:
    """The thresholds of ``policy`` over one value array per metric (NaN: missing), with
    each node's bounds per metric (``row_bounds`` at the same positions; None, for all
    metrics or one: every node has the threshold's own). With ``lift_soft``, when no node
    passes but some pass all but the Soft thresholds, those pass and the Soft reasons
    are ``lifted``."""
    size = len(values[0]) if values else 0
    nothing = np.zeros(size, dtype=np.bool_)
    failed_by: list[
        tuple[columns.Bools, columns.Bools, columns.Bools, model.MetricSpec, Bounds | None]
    ] = []
    hard = np.zeros(size, dtype=np.bool_)
    soft = np.zeros(size, dtype=np.bool_)
    for index, (metric, column) in enumerate(zip(policy.metrics, values, strict=True)):
        low, high = metric.threshold_min, metric.threshold_max
        exclude = metric.on_missing is model.OnMissing.EXCLUDE
        if low is None and high is None and not exclude:
            continue
        missing = np.isnan(column) if exclude else nothing
        own = bounds[index] if bounds is not None and metric.threshold_overrides else None
        if own is not None:
            # NaN bounds compare False: no bound there
            above = column > own[1]
            below = (column < own[0]) & ~above
        else:
            above = column > high if high is not None else nothing
            below = (column < low) & ~above if low is not None else nothing
        failed_by.append((missing, above, below, metric, own))
        hard |= missing
        if metric.threshold_mode is model.ThresholdMode.SOFT:
            soft |= above | below
        else:
            hard |= above | below
    failed = hard | soft
    lifting = lift_soft and not (~failed).any() and (~hard).any()
    if lifting:
        failed = hard
    reasons: dict[int, tuple[str, ...]] = {}
    for position in np.flatnonzero(failed).tolist():
        reasons[position] = _reasons(failed_by, position)
    lifted: dict[str, int] = {}
    if lifting:
        for position in np.flatnonzero(soft & ~hard).tolist():
            for reason in _reasons(failed_by, position):
                lifted[reason] = lifted.get(reason, 0) + 1
    return ThresholdResult(~failed, reasons, lifted)


def _reasons(
    failed_by: Sequence[
        tuple[columns.Bools, columns.Bools, columns.Bools, model.MetricSpec, Bounds | None]
    ],
    position: int,
) -> tuple[str, ...]:
    found: list[str] = []
    for missing, above, below, metric, own in failed_by:
        if missing[position]:
            found.append(no_fresh_value_reason(metric))
        elif above[position]:
            found.append(exceeded_reason(metric, None if own is None else float(own[1][position])))
        elif below[position]:
            found.append(
                fell_below_reason(metric, None if own is None else float(own[0][position]))
            )
    return tuple(found)


def metric_filter(
    *, policy: model.Policy, columns: Sequence[scoring.Column], node_count: int
) -> tuple[tuple[str, ...], ...]:
    """Why each node is ruled out by the policy's thresholds and onMissing: Exclude.

    Returns one tuple of reasons per node (empty = feasible), aligned with ``columns``.
    """
    result = threshold_filter(
        policy=policy, values=[scoring.as_values(column) for column in columns]
    )
    return tuple(result.reasons.get(position, ()) for position in range(node_count))
