"""Rebalancing's arithmetic: what a pod contributes to a trigger, and the room to move into.

``core.rebalance`` decides which pods move; this module answers, for one trigger
(``model.Trigger``), in the trigger's **load direction** (``Trigger.load``: higher is
always further toward the trigger, so a ``below`` trigger on free memory reads as
negative free memory):

- ``contribution``: how much a pod weighs in the trigger metric on a node (and
  ``own_estimate``, what the cycle's estimate counts for it instead, so that a move is
  judged on the target by what the pod measurably uses, not by a declared amount). Where the
  metric is resource-backed (its estimate names cpu or memory), it is the pod's own
  measured usage (``PodUsage``, issue P's per-pod source) over the node's allocatable,
  else its estimate (``core.estimate``: the workload's measured quantile, a declared
  amount, or requests x factor). A metric with no resource model (a latency) cannot say
  what one pod adds: 0, "unknown", and the limits and dry runs are the only brakes
  (as the descheduler with a Prometheus metric);
- ``Room``: the pooled room of one pass, per trigger: how far each node that is not past
  the trigger is inside ``trigger - margin``, summed (Koordinator LowNodeLoad's
  ``targetAvailableUsage``); each move takes its contribution on the target from it;
- ``accepts``: the acceptance by improvement (see ``core.rebalance``).

Purely computational: no I/O, no clocks, no module state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from metricsched.core import estimate, model


def contribution(
    *,
    pod: model.PodInfo,
    node: model.NodeInfo,
    metric: model.MetricSpec | None,
    usage: model.PodUsage | None,
) -> float:
    """What ``pod`` adds to ``metric`` on ``node``, in the metric's load direction (>= 0;
    0 when the metric has no resource model): its own measured usage where there is one,
    else its estimate."""
    return _share(pod=pod, node=node, metric=metric, usage=usage, measured_first=True)


def own_estimate(
    *,
    pod: model.PodInfo,
    node: model.NodeInfo,
    metric: model.MetricSpec | None,
    usage: model.PodUsage | None,
) -> float:
    """What the cycle's estimate adds for ``pod`` itself being placed on ``node`` (its
    metric's estimate, never its own measured usage: a pending pod has none), in the
    load direction (>= 0; 0 when the metric has no resource model)."""
    return _share(pod=pod, node=node, metric=metric, usage=usage, measured_first=False)


def still_shown(
    *,
    pod: model.PodKey,
    node: model.NodeInfo,
    metric: model.MetricSpec | None,
    usage: model.PodUsage | None,
) -> float:
    """What a pod moved off ``node`` still weighs in ``metric``'s samples of it, in the
    load direction: its usage while the per-pod answer still shows it (the node's rate
    window still holds it, and the next samples will not), else 0."""
    if metric is None or not resource_backed(metric) or usage is None:
        return 0.0
    resource = metric.estimate.resource
    if resource is None:
        return 0.0
    cpu = resource is model.EstimateResource.CPU
    measured = (usage.cpu if cpu else usage.memory).get(pod)
    allocatable = node.allocatable.milli_cpu if cpu else node.allocatable.memory
    if measured is None or measured <= 0 or allocatable <= 0:
        return 0.0
    return float(measured) / float(allocatable)


def _share(
    *,
    pod: model.PodInfo,
    node: model.NodeInfo,
    metric: model.MetricSpec | None,
    usage: model.PodUsage | None,
    measured_first: bool,
) -> float:
    if metric is None or not resource_backed(metric):
        return 0.0
    spec = metric.estimate
    resource = spec.resource
    if resource is None:
        return 0.0
    cpu = resource is model.EstimateResource.CPU
    measured = (
        (usage.cpu if cpu else usage.memory).get(pod.key)
        if usage is not None and measured_first
        else None
    )
    if measured is not None:
        amount = measured
    elif spec.source is model.EstimateFrom.MEASURED:
        amount = estimate.own_amount(spec, pod, usage).value
    else:
        amount = estimate.pod_amount(spec, pod)
    allocatable = node.allocatable.milli_cpu if cpu else node.allocatable.memory
    if allocatable <= 0 or amount <= 0:
        return 0.0
    return float(amount) / float(allocatable)


@dataclasses.dataclass(slots=True)
class Room:
    """The pooled room of a pass for each trigger (by index in ``spec.triggers``), in
    load units: a pass stops moving pods for a trigger once its pool is used up. Only a
    resource-backed trigger has one: a pod's share of another metric is unknown, so
    nothing can be taken from its pool (infinite: the dry runs judge)."""

    left: list[float]

    @classmethod
    def of(
        cls,
        triggers: Sequence[model.Trigger],
        values: Sequence[Mapping[model.NodeName, float]],
        *,
        metrics: Sequence[model.MetricSpec | None],
    ) -> Room:
        pools = []
        for trigger, found, metric in zip(triggers, values, metrics, strict=True):
            if not resource_backed(metric):
                pools.append(math.inf)
                continue
            limit = _limit(trigger)
            pools.append(
                sum(
                    max(0.0, limit - trigger.load(value))
                    for value in found.values()
                    if not trigger.outside(value)
                )
            )
        return cls(left=pools)

    def used_up(self, index: int) -> bool:
        return self.left[index] <= 0.0

    def take(self, index: int, amount: float) -> None:
        self.left[index] -= amount


def resource_backed(metric: model.MetricSpec | None) -> bool:
    """Whether a pod's share of ``metric`` is known (its estimate names a resource)."""
    return metric is not None and metric.estimate.resource is not None


def _limit(trigger: model.Trigger) -> float:
    """``trigger - margin`` in load units: the most a target may carry after a move."""
    if trigger.above is not None:
        return trigger.above - trigger.margin
    return trigger.load(trigger.below if trigger.below is not None else 0.0) - trigger.margin


def accepts(*, trigger: model.Trigger, target: float, source_after: float | None) -> bool:
    """The acceptance by improvement for one trigger: the target, with the moved pod,
    ends at or below ``trigger - margin``; and, when the source is past this trigger
    (``source_after`` is its value once the pass's moves are off it, load units), at
    least ``margin`` below the source after the move."""
    if not trigger.inside_by_margin(target):
        return False
    return source_after is None or trigger.load(target) <= source_after - trigger.margin


def relieved(trigger: model.Trigger, source_after: float) -> bool:
    """Whether a source at ``source_after`` (load units) is at or below the trigger."""
    return source_after <= _limit(trigger) + trigger.margin
