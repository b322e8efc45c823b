"""What settled binds teach a learned estimate: the arithmetic of ``runtime.learner``.

A learned estimate (``estimate.from: Learned``, and the correction of a declared amount
with ``learn: true``) is opt-in and must be robust to background changes and to other
tenants (DESIGN "Scoring semantics" 6). The learner measures experiments; this module
says what one measure is worth and what the recent ones say together:

- **Difference in differences.** A batch of binds on one node is measured against
  control nodes that had no bind or departure over the same window: the batch's change
  is ``y = Δnode - median(Δcontrols)``, with at least ``MIN_CONTROLS`` controls (else
  there is no ``Observation``). A background step or a shift every node shows cancels.
- **Direction.** Values are kept in the metric's load direction: what a pod adds to a
  ``Minimize`` metric, takes from a ``Maximize`` one (as declared estimates count).
- **Units.** With ``estimate.resource`` the metric is that resource's utilisation ratio
  (0..1 of a node's allocatable): a batch's change is learned in resource units
  (``y x allocatable``: millicores or bytes per pod) and applied over each node's own
  allocatable, so one value serves 4- and 16-cpu nodes alike. Without it, the metric's
  own units (latency, errors).
- **Robust fit.** The per-pod values of the observations are screened by their median
  absolute deviation (a modified z-score above ``OUTLIER_Z`` is rejected: a node whose
  neighbour heated up while a batch settled) and the median of the rest is the estimate.
  Nothing applies before ``MIN_OBSERVATIONS``, overall or for a workload's own value.
- **Bounds.** The estimate is clamped to ``[0, cap]`` (``cap``): a pod never makes a
  node look better, and never adds more than the metric's threshold range.
- **Expiry.** Observations older than ``EXPIRY_S`` are not used, so a value nobody
  confirms any more goes away by itself.

Purely computational: no I/O, no clocks (times are arguments).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from metricsched.core import model

MIN_CONTROLS = 2
"""Control nodes a batch needs (fewer: the batch is dropped, nothing to difference)."""
MIN_OBSERVATIONS = 5
"""Accepted batches (overall, and of a workload for its own value) before any applies."""
OUTLIER_Z = 3.5
"""Modified z-score (0.6745 · |x - median| / MAD) past which an observation is rejected
(Iglewicz and Hoaglin's rule)."""
EXPIRY_S = 1800.0
"""How long an observation counts after the sample that closed its batch."""
MIN_RATIO, MAX_RATIO = 0.1, 20.0
"""Bounds of one observed correction of a declared amount (``learn: true``)."""
_MAD_TO_SD = 1.4826  # MAD x this estimates the standard deviation of normal noise


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """What one settled batch of the policy's own binds on one node did to a metric."""

    at: float  # unix time of the sample that closed the batch (observations expire)
    pods: int
    workload: str  # the batch's one workload, "" when mixed or none
    per_pod: float  # learned units per pod, load direction; negative is noise, kept
    ratio: float | None  # what happened / what was declared (bounded); None: none declared


def direction(metric: model.MetricSpec) -> float:
    """+1 when pods raise ``metric`` against its goal (``Minimize``), -1 otherwise."""
    return 1.0 if metric.goal is model.Goal.MINIMIZE else -1.0


def cap(metric: model.MetricSpec) -> float:
    """The most one pod may add to ``metric`` on a node, in the metric's units.

    A utilisation ratio (``estimate.resource`` set): 1, the whole node. Otherwise the
    threshold's range: ``max - min`` with both bounds, else the one bound's magnitude (a
    pod alone never pushes a node from 0 past it). No threshold, or a bound of 0: no cap
    (such a value can only move scores; it holds no pod back). With overrides per node
    group, the widest of them and the threshold's own (one cap for every node)."""
    if metric.estimate.resource is not None:
        return 1.0
    groups = [(metric.threshold_min, metric.threshold_max)] + [
        (override.threshold_min, override.threshold_max) for override in metric.threshold_overrides
    ]
    return max(_range_cap(low, high) for low, high in groups)


def _range_cap(low: float | None, high: float | None) -> float:
    if low is not None and high is not None and high > low:
        return high - low
    bound = high if high is not None else low
    return abs(bound) if bound else math.inf


def fit_limit(metric: model.MetricSpec) -> float:
    """The most a learned value of ``metric`` may be, in its learned units: ``cap``, but
    none for resource units (the cap applies per node, over its allocatable)."""
    return math.inf if metric.estimate.resource is not None else cap(metric)


def observation(
    *,
    metric: model.MetricSpec,
    at: float,
    pods: int,
    workload: str,
    node_change: float,
    control_changes: Sequence[float],
    declared: float,
    allocatable: float,
) -> Observation | None:
    """One batch's measure: ``node_change`` of its node less the median change of the
    ``control_changes``, per pod, in the learned units (``allocatable`` is the node's
    allocatable of ``estimate.resource``; unused without one). ``declared`` is the sum of
    the batch's declared shares, sign included (0 for Learned). None when there are too
    few controls, or the node's size is unknown."""
    if pods <= 0 or len(control_changes) < MIN_CONTROLS:
        return None
    change = node_change - float(np.median(control_changes))
    limit = cap(metric)
    # One batch cannot move a node more than the cap per pod: bounds a wild sample.
    per_pod = min(limit, max(-limit, direction(metric) * change / pods))
    if metric.estimate.resource is not None:
        if allocatable <= 0:
            return None
        per_pod *= allocatable
    ratio = min(MAX_RATIO, max(MIN_RATIO, change / declared)) if declared else None
    return Observation(at=at, pods=pods, workload=workload, per_pod=per_pod, ratio=ratio)


def fresh(found: Sequence[Observation], *, now: float) -> list[Observation]:
    """The observations of ``found`` not expired at ``now``."""
    return [seen for seen in found if now - seen.at <= EXPIRY_S]


def summarise(
    overall: Sequence[Observation],
    by_workload: Mapping[str, Sequence[Observation]],
    *,
    now: float,
    limit: float = math.inf,
) -> model.LearnedEffect | None:
    """What the unexpired observations say: the robust per-pod increment (``robust``,
    clamped to ``[0, limit]``: ``limit`` in the learned units, the caller's cap; a
    utilisation ratio is capped where it applies, per node) and the robust ratio of what
    happened to what was declared, overall and per workload. Nothing until
    ``MIN_OBSERVATIONS`` (overall; a workload's own value needs as many of its own)."""
    current = fresh(overall, now=now)
    if len(current) < MIN_OBSERVATIONS:
        return None
    per_pod: dict[str, float] = {}
    ratio: dict[str, float] = {}
    for workload, found in by_workload.items():
        mine = fresh(found, now=now)
        if len(mine) < MIN_OBSERVATIONS:
            continue
        per_pod[workload] = _bounded(robust([seen.per_pod for seen in mine]), limit)
        if (r := _ratio(mine)) is not None:
            ratio[workload] = r
    return model.LearnedEffect(
        per_pod=_bounded(robust([seen.per_pod for seen in current]), limit),
        per_pod_by_workload=per_pod,
        ratio=_ratio(current),
        ratio_by_workload=ratio,
        observations=len(current),
    )


def robust(values: Sequence[float]) -> float:
    """The median of ``values`` once those whose modified z-score passes ``OUTLIER_Z``
    are left out. At least half of the values always stay (those within one MAD); with a
    MAD of 0, the values equal to the median."""
    found = np.asarray(values, dtype=np.float64)
    middle = float(np.median(found))
    spread = float(np.median(np.abs(found - middle)))
    kept = found[np.abs(found - middle) <= OUTLIER_Z * _MAD_TO_SD * spread]
    return float(np.median(kept))


def _bounded(value: float, limit: float) -> float:
    return min(limit, max(0.0, value))


def _ratio(found: Sequence[Observation]) -> float | None:
    ratios = [seen.ratio for seen in found if seen.ratio is not None]
    return robust(ratios) if len(ratios) >= MIN_OBSERVATIONS else None
