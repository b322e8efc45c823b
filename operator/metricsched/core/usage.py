"""Measured per-pod usage: what a workload's running pods use, for the Measured estimate.

The runtime reads running pods' usage from Prometheus (the operator's per-pod queries,
cAdvisor's series by default) once per refresh; this module turns one answer into a
``model.PodUsage``: each pod's usage by "namespace/name", and per workload
(``PodInfo.usage_workload``: a Deployment across its revisions, a StatefulSet, a Job, a
DaemonSet, or a namespace's bare pods with the same labels) a high quantile
(``QUANTILE``) of its **settled** pods' usage. A pod is settled once it was bound
``settled_s`` before the answer (its ramp-up and the query's rate window behind it):
pods still starting would pull the quantile down exactly when a burst of their siblings
is being placed.

A workload whose pods are all still starting (a brand-new one, in its first burst) has
no settled pods yet, but what those pods show so far is evidence too: a **lower bound**
of what they will use (a ramp only rises; a rate window only fills). The same quantile of
the starting pods that show usage is kept apart (``PodUsage.starting_*``): it may raise
the estimate above what requests say, never lower it.

A workload's settled quantile outlives its pods for ``REMEMBER_S``: a workload that has
no settled pod in an answer (its one replica just evicted by rebalancing, moved by a
rollout, scaled to zero and back up, or missing from one scrape) keeps the quantile it
last had, so that its next pods are estimated by what the workload was seen to use, not
by its requests. A quantile measured in the answer always replaces a remembered one.

``pod_amount`` is the estimate of one pod for a resource: its workload's measured
quantile, else a declared amount, else ``max(requests, limits) x factor``, else a floor
(Koordinator's estimator defaults: 85 % cpu, 70 % memory of max(requests, limits); a pod
requesting nothing counts 250m and 200Mi), with the source named for explanations; where
nothing is declared and the workload's starting pods already show more than that
fallback, their quantile instead ("starting").

Purely computational: no I/O, no clocks (times are arguments).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from metricsched.core import model

QUANTILE = 0.9
"""Of a workload's settled pods' usage: a high quantile, so that most new pods use less."""
CPU_FACTOR = 0.85
MEMORY_FACTOR = 0.70
"""Of max(requests, limits), for a workload without measured pods (Koordinator's)."""
FLOOR_CPU_MILLI = 250.0
FLOOR_MEMORY_BYTES = 200.0 * 1024 * 1024
"""A pod that requests and limits nothing of the resource (Koordinator's)."""
SETTLED_S = 120.0
"""A pod counts in its workload's quantile once bound this long (ramp + rate window)."""
REMEMBER_S = 600.0
"""How long a workload's quantile is kept once none of its settled pods is measured."""
REMEMBER_MOST = 10_000
"""At most this many workloads are remembered (the most recently measured first): the
per-pod answer is bounded, and so is what outlives it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Amount:
    """One pod's estimated usage of a resource and where the number came from."""

    value: float  # millicores or bytes
    source: str  # "measured" | "declared" | "requests" | "floor" | "starting"
    pods: int = 0  # measured (starting): how many settled (starting) pods were measured


def pod_usage(
    *,
    at: float,
    cpu: Mapping[str, float],
    memory: Mapping[str, float],
    pods: Iterable[model.PodInfo],
    settled_s: float = SETTLED_S,
    quantile: float = QUANTILE,
    previous: model.PodUsage | None = None,
    remember_s: float = REMEMBER_S,
) -> model.PodUsage:
    """One answer of the per-pod queries as a ``PodUsage``: ``cpu`` and ``memory`` by
    "namespace/name"; ``pods`` are the bound pods the cache knows (which workload each
    belongs to, and since when it is bound); ``previous`` is the last answer's, whose
    workload quantiles measured within ``remember_s`` are kept where this answer has
    none."""
    settled: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})
    starting: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})
    for pod in pods:
        if not pod.bound_at:
            continue
        into = starting if at - pod.bound_at < settled_s else settled
        key = pod.key
        workload = pod.usage_workload
        if (used := cpu.get(key)) is not None and (into is settled or used > 0):
            into[0].setdefault(workload, []).append(used)
        if (used := memory.get(key)) is not None and (into is settled or used > 0):
            into[1].setdefault(workload, []).append(used)
    # A workload with settled pods is estimated from them alone: its starting pods are
    # kept only for workloads that have none.
    early = tuple(
        {w: v for w, v in by.items() if w not in settled[i]} for i, by in enumerate(starting)
    )
    workload_cpu = {w: _quantile(found, quantile) for w, found in settled[0].items()}
    workload_memory = {w: _quantile(found, quantile) for w, found in settled[1].items()}
    workload_pods = _counted(settled)
    workload_at = dict.fromkeys(workload_pods, at)
    if previous is not None:
        _remember(previous, at - remember_s, workload_cpu, workload_memory, workload_pods)
        for w, when in previous.workload_at.items():
            if w not in workload_at and when >= at - remember_s and w in workload_pods:
                workload_at[w] = when
    return model.PodUsage(
        at=at,
        cpu=cpu,
        memory=memory,
        workload_cpu=workload_cpu,
        workload_memory=workload_memory,
        workload_pods=workload_pods,
        starting_cpu={w: _quantile(found, quantile) for w, found in early[0].items()},
        starting_memory={w: _quantile(found, quantile) for w, found in early[1].items()},
        starting_pods=_counted(early),
        workload_at=workload_at,
    )


def _remember(
    previous: model.PodUsage,
    since: float,
    cpu: dict[str, float],
    memory: dict[str, float],
    pods: dict[str, int],
) -> None:
    """Into this answer's workload maps, ``previous``'s quantiles of the workloads it
    lacks (per resource) that were measured at or after ``since``, the
    ``REMEMBER_MOST`` most recent of those it no longer measures."""
    gone = sorted(
        ((when, w) for w, when in previous.workload_at.items() if when >= since and w not in pods),
        reverse=True,
    )
    kept = {w for _, w in gone[:REMEMBER_MOST]}
    for w, when in previous.workload_at.items():
        if when < since or (w not in pods and w not in kept):
            continue
        if w not in cpu and w in previous.workload_cpu:
            cpu[w] = previous.workload_cpu[w]
        if w not in memory and w in previous.workload_memory:
            memory[w] = previous.workload_memory[w]
        if w not in pods and w in previous.workload_pods:
            pods[w] = previous.workload_pods[w]


def _counted(by: tuple[Mapping[str, list[float]], ...]) -> dict[str, int]:
    """Per workload, how many pods were measured (of either resource)."""
    names = {w for found in by for w in found}
    return {w: max(len(found.get(w, ())) for found in by) for w in names}


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the two nearest, as numpy's
    default); one value is itself."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


Values = npt.NDArray[np.float64] | np.float64
"""Per pod (an array) or one pod (a scalar: 0-d results)."""

SOURCES = ("measured", "declared", "requests", "floor", "starting")
"""``Amount.source``'s values (``amounts``' codes): the first four in the order the rule
tries them; "starting" replaces "requests" or "floor" where the starting pods show more."""
STARTING = SOURCES.index("starting")


def amounts(
    *,
    resource: model.EstimateResource,
    measured: Values,
    requested: Values,
    limit: Values,
    declared: float,
    factor: float | None,
    starting: Values | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The estimated usage of pods, one per element, and each value's source (an index
    into ``SOURCES``): the workload's ``measured`` quantile (NaN: none), else the
    ``declared`` amount (0: none), else ``max(requested, limit) x factor`` (``factor``
    overrides the resource's default), else the floor; where nothing is declared, the
    workload's ``starting`` quantile (NaN or None: none) when it is above that fallback.
    The one statement of the rule: the cycle applies it to every recent pod at once,
    ``pod_amount`` to one."""
    cpu = resource is model.EstimateResource.CPU
    scale = factor if factor is not None else (CPU_FACTOR if cpu else MEMORY_FACTOR)
    floor = FLOOR_CPU_MILLI if cpu else FLOOR_MEMORY_BYTES
    base = np.maximum(requested, limit)
    has_base = base > 0
    fallback = np.where(has_base, base * scale, floor) if declared <= 0 else declared
    code = 1 if declared > 0 else np.where(has_base, 2, 3)
    if declared <= 0 and starting is not None:
        early = np.nan_to_num(np.asarray(starting, dtype=np.float64), nan=-np.inf)
        rises = early > fallback
        fallback = np.where(rises, early, fallback)
        code = np.where(rises, STARTING, code)
    unmeasured = np.isnan(measured)
    value = np.where(unmeasured, fallback, measured)
    source = np.where(unmeasured, code, 0)
    return value.astype(np.float64), source.astype(np.int64)


def pod_amount(
    *,
    resource: model.EstimateResource,
    usage: model.PodUsage | None,
    workload: str,
    requested: float,
    limit: float,
    declared: float,
    factor: float | None,
) -> Amount:
    """The estimated usage of one pod of ``workload`` (``amounts``' rule, see the module
    docstring). ``requested`` and ``limit`` are the pod's (millicores or bytes; ``limit``
    counts a container's request where it sets no limit); ``declared`` is the policy's
    stated amount (0: none); ``factor`` overrides the resource's default factor."""
    found = measured_of(usage, resource, workload)
    early = measured_of(usage, resource, workload, starting=True)
    value, source = amounts(
        resource=resource,
        measured=np.float64(math.nan if found is None else found),
        requested=np.float64(requested),
        limit=np.float64(limit),
        declared=declared,
        factor=factor,
        starting=np.float64(math.nan if early is None else early),
    )
    return amount_of(float(value), int(source), usage, workload)


def measured_of(
    usage: model.PodUsage | None,
    resource: model.EstimateResource,
    workload: str,
    *,
    starting: bool = False,
) -> float | None:
    """``workload``'s quantile of ``resource`` in ``usage``: of its settled pods, or with
    ``starting`` of its starting pods so far; None: not measured."""
    if usage is None:
        return None
    cpu = resource is model.EstimateResource.CPU
    if starting:
        return (usage.starting_cpu if cpu else usage.starting_memory).get(workload)
    return (usage.workload_cpu if cpu else usage.workload_memory).get(workload)


def amount_of(value: float, source: int, usage: model.PodUsage | None, workload: str) -> Amount:
    """One of ``amounts``' results as an ``Amount`` (with the measured pods' count)."""
    name = SOURCES[source]
    pods = 0
    if usage is not None and source == 0:
        pods = usage.workload_pods.get(workload, 0)
    elif usage is not None and source == STARTING:
        pods = usage.starting_pods.get(workload, 0)
    return Amount(value, name, pods)


def describe(amount: Amount, *, resource: model.EstimateResource, workload: str) -> str:
    """``amount`` for people: "web's measured 0.31 cores (p90 of 4 pods)"."""
    shown_amount = shown(amount.value, resource)
    name = short_name(workload)
    if amount.source == "measured":
        return (
            f"{name}'s measured {shown_amount} (p{QUANTILE * 100:.0f} of {amount.pods} pod"
            f"{'' if amount.pods == 1 else 's'})"
        )
    if amount.source == "starting":
        return (
            f"{name}'s {shown_amount} so far (p{QUANTILE * 100:.0f} of {amount.pods} starting "
            f"pod{'' if amount.pods == 1 else 's'}, more than requests say)"
        )
    if amount.source == "declared":
        return f"declared {shown_amount} (no measured pods of {name} yet)"
    if amount.source == "requests":
        return f"{shown_amount} from requests/limits (no measured pods of {name} yet)"
    return f"the floor of {shown_amount} (no requests, no measured pods of {name} yet)"


def shown(value: float, resource: model.EstimateResource) -> str:
    """Millicores as cores ("0.31 cores"), bytes as Mi ("512Mi")."""
    if resource is model.EstimateResource.CPU:
        return f"{value / 1000:.2g} cores"
    return f"{value / 2**20:.0f}Mi"


def short_name(workload: str) -> str:
    """A ``usage_workload`` as an event shows it: its controller's name ("web"), or the
    bare pods' labels ("pods {app=web}")."""
    _, kind, name = workload.split("/", 2) if workload.count("/") >= 2 else ("", "", workload)
    return f"pods {name}" if kind == "Pod" else name
