"""The metric threshold filter: a policy's thresholds and ``onMissing: Exclude``.

Contract: after kube-scheduler's filters, a node is ruled out for a policy's pod when a
thresholded metric's fresh value lies outside [min, max] (``node(s) exceeded threshold
<metric> > <max>``, ``node(s) fell below threshold <metric> < <min>``), or when a metric
with ``onMissing: Exclude`` has no fresh value on it (``node(s) had no fresh value for
metric <metric>``); one reason per metric, in the policy's order. A DaemonSet's pod
is exempt unless the policy's ``daemonSetPods`` is ``Filter``. The reasons join
kube-scheduler's in the FailedScheduling text. Vector: one comparison per metric over
the feasible nodes' values (NaN: missing); reasons are rendered for the failing nodes
only. The values are ``core.scoring.metric_samples`` plus ``core.estimate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, model, scoring

NAME: Final = "MetricThreshold"


# --- thresholds ------------------------------------------------------------------------


def exceeded_reason(metric: model.MetricSpec) -> str:
    return f"node(s) exceeded threshold {metric.name} > {metric.threshold_max:g}"


def fell_below_reason(metric: model.MetricSpec) -> str:
    return f"node(s) fell below threshold {metric.name} < {metric.threshold_min:g}"


def no_fresh_value_reason(metric: model.MetricSpec) -> str:
    return f"node(s) had no fresh value for metric {metric.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class ThresholdResult:
    """Which nodes the thresholds and onMissing: Exclude pass, and why the others fail."""

    passed: columns.Bools
    reasons: Mapping[int, tuple[str, ...]]  # position -> reasons, for the failed ones


def exempts(*, policy: model.Policy, pod: model.PodInfo) -> bool:
    """Whether ``pod`` skips the policy's thresholds: a DaemonSet's, unless ``Filter``."""
    return pod.owner_kind == "DaemonSet" and policy.daemon_set_pods is model.DaemonSetPods.EXEMPT


def none_failed(size: int) -> ThresholdResult:
    """The result for an exempt pod: every node passes."""
    return ThresholdResult(np.ones(size, dtype=np.bool_), {})


def threshold_filter(*, policy: model.Policy, values: Sequence[columns.Floats]) -> ThresholdResult:
    """The thresholds of ``policy`` over one value array per metric (NaN: missing)."""
    size = len(values[0]) if values else 0
    failed_by: list[tuple[columns.Bools, columns.Bools, columns.Bools, model.MetricSpec]] = []
    failed = np.zeros(size, dtype=np.bool_)
    for metric, column in zip(policy.metrics, values, strict=True):
        low, high = metric.threshold_min, metric.threshold_max
        exclude = metric.on_missing is model.OnMissing.EXCLUDE
        if low is None and high is None and not exclude:
            continue
        missing = np.isnan(column)
        if not exclude:
            missing = np.zeros(size, dtype=np.bool_)
        above = column > high if high is not None else np.zeros(size, dtype=np.bool_)
        below = (column < low) & ~above if low is not None else np.zeros(size, dtype=np.bool_)
        failed_by.append((missing, above, below, metric))
        failed |= missing | above | below
    reasons: dict[int, tuple[str, ...]] = {}
    for position in np.flatnonzero(failed).tolist():
        found: list[str] = []
        for missing, above, below, metric in failed_by:
            if missing[position]:
                found.append(no_fresh_value_reason(metric))
            elif above[position]:
                found.append(exceeded_reason(metric))
            elif below[position]:
                found.append(fell_below_reason(metric))
        reasons[position] = tuple(found)
    return ThresholdResult(~failed, reasons)


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
