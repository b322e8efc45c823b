"""Placement-quality figures from the load model's record (ground truth).

Pure: no I/O, no clocks. The record is the load model's ``--record`` JSONL, one object
per line (see hack/loadmodel.py):

- a tick: ``{"t": unix, "nodes": {name: {"cpu": u, "memory": u, "latency": s, "pods": n}}}``
- a bind: ``{"t": unix, "bind": "ns/name", "node": n, "scheduler": s, "cpu_before": u,
  "cpu_after": u}`` (eventual utilisation, every pod at full usage, without noise)
- a departure: ``{"t": unix, "gone": "ns/name", "node": n}``

A tick stands for the time until the next one (the last for the median tick interval),
so node-seconds do not depend on the load model's tick.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Record = Mapping[str, Any]
HOT = 0.8  # the policy's threshold.max, and the "above 80 %"
OVERLOAD = 1.0
END_WINDOW_S = 20.0  # "the hottest node at the end of the burst": mean over this window
HEAT_COLUMNS = 240  # the heat map keeps at most this many time columns
HELD_LIMIT_S = 60.0  # issue 27: no pod pending longer than this while a node has room


@dataclasses.dataclass(frozen=True)
class Tick:
    t: float
    cpu: Mapping[str, float]
    latency: Mapping[str, float]
    pods: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Bind:
    t: float
    pod: str
    node: str
    scheduler: str
    cpu_before: float
    cpu_after: float


@dataclasses.dataclass(frozen=True)
class Pending:
    """One of the system's pods: when it was created, first bound (None: never, in the
    window) and the cores it uses at full usage."""

    created: float
    bound: float | None
    cpu: float


def parse(
    records: Iterable[Record], *, t0: float, t1: float, nodes: Sequence[str]
) -> tuple[list[Tick], list[Bind]]:
    """The ticks and binds of ``[t0, t1]`` restricted to ``nodes``, in time order."""
    wanted = set(nodes)
    ticks: list[Tick] = []
    binds: list[Bind] = []
    for r in records:
        t = float(r.get("t", 0.0))
        if not t0 <= t <= t1:
            continue
        if "nodes" in r:
            values = {n: v for n, v in r["nodes"].items() if n in wanted}
            ticks.append(
                Tick(
                    t,
                    {n: float(v.get("cpu", 0.0)) for n, v in values.items()},
                    {n: float(v.get("latency", 0.0)) for n, v in values.items()},
                    {n: int(v.get("pods", 0)) for n, v in values.items()},
                )
            )
        elif "bind" in r and r.get("node") in wanted:
            binds.append(
                Bind(
                    t,
                    str(r["bind"]),
                    str(r["node"]),
                    str(r.get("scheduler") or ""),
                    float(r.get("cpu_before", 0.0)),
                    float(r.get("cpu_after", 0.0)),
                )
            )
    ticks.sort(key=lambda k: k.t)
    binds.sort(key=lambda b: b.t)
    return ticks, binds


def durations(ticks: Sequence[Tick]) -> list[float]:
    """How long each tick stands for: until the next tick (a gap counts at most five
    median intervals, so a stalled load model does not inflate node-seconds); the last
    stands for the median interval."""
    if not ticks:
        return []
    gaps = [b.t - a.t for a, b in itertools.pairwise(ticks)]
    typical = statistics.median(gaps) if gaps else 1.0
    return [min(g, 5 * typical) for g in gaps] + [typical]


def weighted_percentile(pairs: Iterable[tuple[float, float]], p: float) -> float | None:
    """Nearest-rank percentile (0..100) of values with weights: the smallest value whose
    cumulative weight reaches p % of the total. None when the weights sum to 0."""
    ordered = sorted((v, w) for v, w in pairs if w > 0)
    total = sum(w for _, w in ordered)
    if total <= 0:
        return None
    goal = p / 100 * total
    running = 0.0
    for value, weight in ordered:
        running += weight
        if running >= goal - 1e-9:
            return value
    return ordered[-1][0]


def node_seconds_above(
    ticks: Sequence[Tick], level: float, *, counts: Callable[[str, float], bool] | None = None
) -> float:
    """Sum over ticks of (nodes strictly above ``level``) x the tick's duration; with
    ``counts``, only the (node, tick time) pairs it accepts."""
    return sum(
        d * sum(1 for n, u in k.cpu.items() if u > level and (counts is None or counts(n, k.t)))
        for k, d in zip(ticks, durations(ticks), strict=True)
    )


def after_hotspot(
    ticks: Sequence[Tick],
    *,
    since: float,
    hot_nodes: Sequence[str],
    floor: Callable[[str, float], float],
    level: float = HOT,
) -> dict[str, Any]:
    """Node-seconds above ``level`` from ``since`` (the heat: scenario c's hot spot, e's
    rise) on: on every node, on each hot node, and "avoidable": only while the node's
    ``floor`` (what moving the scheduler's own pods cannot change, at that tick time) is
    not itself above ``level``; and node-seconds above 100 % from then on."""
    late = [k for k in ticks if k.t >= since]
    return {
        "node_seconds_above_80": round(node_seconds_above(late, level), 1),
        "node_seconds_above_100": round(node_seconds_above(late, OVERLOAD), 1),
        "avoidable_node_seconds_above_80": round(
            node_seconds_above(late, level, counts=lambda n, t: floor(n, t) <= level), 1
        ),
        "per_hot_node": {
            node: round(node_seconds_above(late, level, counts=lambda n, _t, x=node: n == x), 1)
            for node in hot_nodes
        },
    }


def mean_spread(ticks: Sequence[Tick]) -> float | None:
    """The population standard deviation of cpu utilisation across nodes, time-averaged."""
    ds = durations(ticks)
    total = sum(ds)
    if not ticks or total <= 0:
        return None
    return (
        sum(
            d * (statistics.pstdev(k.cpu.values()) if len(k.cpu) > 1 else 0.0)
            for k, d in zip(ticks, ds, strict=True)
        )
        / total
    )


def mean_utilisation(ticks: Sequence[Tick]) -> float | None:
    """Mean cpu utilisation over nodes and time: the same load for every system."""
    ds = durations(ticks)
    total = sum(ds)
    if not ticks or total <= 0:
        return None
    return (
        sum(d * statistics.fmean(k.cpu.values()) for k, d in zip(ticks, ds, strict=True) if k.cpu)
        / total
    )


def pod_latency(ticks: Sequence[Tick], p: float) -> float | None:
    """Percentile of the latency pods experience: each running pod, each tick, sees its
    node's latency (weighted by the tick's duration)."""
    pairs = (
        (k.latency[n], k.pods.get(n, 0) * d)
        for k, d in zip(ticks, durations(ticks), strict=True)
        for n in k.latency
    )
    return weighted_percentile(pairs, p)


def hottest_at(
    ticks: Sequence[Tick], *, end: float, window: float = END_WINDOW_S
) -> tuple[str | None, float | None]:
    """The node with the highest mean utilisation over ``[end - window, end]``, and that
    mean (noise averaged out): "the hottest node at the end of the burst"."""
    sums: dict[str, list[float]] = {}
    for k in ticks:
        if end - window <= k.t <= end:
            for n, u in k.cpu.items():
                sums.setdefault(n, []).append(u)
    if not sums:
        return None, None
    node = max(sorted(sums), key=lambda n: statistics.fmean(sums[n]))
    return node, statistics.fmean(sums[node])


def overruns(binds: Sequence[Bind], *, scheduler: str, threshold: float = HOT) -> int:
    """Pods ``scheduler`` bound to a node whose true (eventual) utilisation, counting the
    pod, exceeded ``threshold``."""
    return sum(1 for b in binds if b.scheduler == scheduler and b.cpu_after > threshold)


def overrun_records(
    binds: Sequence[Bind],
    *,
    scheduler: str,
    t0: float,
    decisions: Mapping[str, str] | None = None,
    threshold: float = HOT,
) -> list[dict[str, Any]]:
    """One row per overrun of ``scheduler`` (see ``overruns``), to tell its cause: the
    node's true eventual utilisation before the pod (``before`` above ``threshold``:
    the node's other pods were undercounted; below it: the pod itself was), after it,
    and the decision the scheduler recorded on the pod (``decisions``, by pod name:
    what it believed the node's value and the pod's estimate were)."""
    rows: list[dict[str, Any]] = []
    for b in binds:
        if b.scheduler != scheduler or b.cpu_after <= threshold:
            continue
        name = b.pod.rpartition("/")[2]
        row: dict[str, Any] = {
            "t": round(b.t - t0, 1),
            "pod": name,
            "node": b.node,
            "before": round(b.cpu_before, 3),
            "after": round(b.cpu_after, 3),
            "cause": "node undercounted" if b.cpu_before > threshold else "pod undercounted",
        }
        if decisions and name in decisions:
            row["decision"] = decisions[name]
        rows.append(row)
    return rows


def room(ticks: Sequence[Tick], *, node_cpu: Mapping[str, int], level: float = HOT) -> list[float]:
    """Per tick, the most cores one node could take and stay at or below ``level`` by its
    true utilisation at that tick (its ramping pods as they are then)."""
    return [
        max(((level - u) * node_cpu.get(n, 0) for n, u in k.cpu.items()), default=0.0)
        for k in ticks
    ]


def held_with_room(
    ticks: Sequence[Tick],
    pods: Sequence[Pending],
    *,
    node_cpu: Mapping[str, int],
    t1: float,
    level: float = HOT,
) -> list[float]:
    """For each pod, the longest unbroken time it waited (created, not yet bound, before
    ``t1``) while some node had room for its full usage under ``level`` by true
    utilisation: the wait a threshold with a wrong estimate causes."""
    free = room(ticks, node_cpu=node_cpu, level=level)
    ds = durations(ticks)
    longest = []
    for pod in pods:
        end = pod.bound if pod.bound is not None else t1
        best = run = 0.0
        for k, d, r in zip(ticks, ds, free, strict=True):
            if not pod.created <= k.t < end:
                continue
            run = run + min(d, end - k.t) if r >= pod.cpu else 0.0
            best = max(best, run)
        longest.append(best)
    return longest


def pending(
    ticks: Sequence[Tick],
    pods: Sequence[Pending],
    *,
    node_cpu: Mapping[str, int],
    t1: float,
    level: float = HOT,
    limit: float = HELD_LIMIT_S,
) -> dict[str, Any]:
    """How long the system's pods waited, without a cap (a pod never bound counts until
    ``t1``), and how long while a node had room for them (``held_with_room``)."""
    waits = [(p.bound if p.bound is not None else t1) - p.created for p in pods]
    held = held_with_room(ticks, pods, node_cpu=node_cpu, t1=t1, level=level)
    last = room(ticks[-1:], node_cpu=node_cpu, level=level)
    free_at_end = last[0] if last else 0.0
    return {
        "pending_p50_s": _round(weighted_percentile(((w, 1.0) for w in waits), 50), 1),
        "pending_p99_s": _round(weighted_percentile(((w, 1.0) for w in waits), 99), 1),
        "pending_max_s": _round(max(waits, default=None), 1),
        "still_pending": sum(1 for p in pods if p.bound is None),
        "held_with_room_max_s": _round(max(held, default=0.0), 1),
        "held_with_room_over_limit": sum(1 for h in held if h > limit),
        "pending_at_end_with_room": sum(
            1 for p in pods if p.bound is None and free_at_end >= p.cpu
        ),
    }


def heat(ticks: Sequence[Tick], *, t0: float, columns: int = HEAT_COLUMNS) -> dict[str, Any]:
    """Node x time utilisation for a heat map: nodes by name, time averaged into at most
    ``columns`` equal bins."""
    names = sorted({n for k in ticks for n in k.cpu})
    if not ticks:
        return {"nodes": names, "t": [], "cpu": [[] for _ in names]}
    span = max(ticks[-1].t - t0, 1e-9)
    width = max(span / columns, 1e-9)
    bins: dict[int, list[Tick]] = {}
    for k in ticks:
        bins.setdefault(min(int((k.t - t0) / width), columns - 1), []).append(k)
    order = sorted(bins)
    return {
        "nodes": names,
        "t": [round((i + 0.5) * width, 1) for i in order],
        "cpu": [
            [
                round(statistics.fmean(k.cpu[n] for k in bins[i] if n in k.cpu), 3)
                if any(n in k.cpu for k in bins[i])
                else None
                for i in order
            ]
            for n in names
        ],
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def summarise(
    ticks: Sequence[Tick],
    binds: Sequence[Bind],
    *,
    t0: float,
    scheduler: str,
    burst_end: float | None = None,
) -> dict[str, Any]:
    """Every figure of one system on one scenario; times in the series are from ``t0``."""
    total = sum(durations(ticks)) * (len(ticks[0].cpu) if ticks else 0)
    above80 = node_seconds_above(ticks, HOT)
    above100 = node_seconds_above(ticks, OVERLOAD)
    hot_node, hot_value = (
        hottest_at(ticks, end=t0 + burst_end) if burst_end is not None else (None, None)
    )
    own = [b for b in binds if b.scheduler == scheduler]
    return {
        "ticks": len(ticks),
        "node_seconds": round(total, 1),
        "node_seconds_above_80": round(above80, 1),
        "node_seconds_above_100": round(above100, 1),
        "fraction_above_80": _round(above80 / total if total else None),
        "hottest_max": _round(max((max(k.cpu.values(), default=0.0) for k in ticks), default=None)),
        "hottest_end_of_burst": _round(hot_value),
        "hottest_end_of_burst_node": hot_node,
        "stddev_mean": _round(mean_spread(ticks)),
        "utilisation_mean": _round(mean_utilisation(ticks)),
        "binds": len(own),
        "binds_all": len(binds),
        "overruns": overruns(binds, scheduler=scheduler),
        "overruns_all": sum(1 for b in binds if b.cpu_after > HOT),
        "latency_p50_s": _round(pod_latency(ticks, 50), 4),
        "latency_p99_s": _round(pod_latency(ticks, 99), 4),
        "hottest_series": [
            [round(k.t - t0, 1), round(max(k.cpu.values(), default=0.0), 3)] for k in ticks
        ],
        "above_80_series": [
            [round(k.t - t0, 1), sum(1 for u in k.cpu.values() if u > HOT)] for k in ticks
        ],
        "heat": heat(ticks, t0=t0),
    }
