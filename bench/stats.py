"""Throughput and latency figures from the watcher's bind times and the creation times."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def throughput(bind_times: Sequence[float]) -> dict[str, Any]:
    """Pods/s from first to last bind, and the per-second window counts (CL2 style)."""
    if len(bind_times) < 2:
        return {"pods_per_s": None, "first_to_last_s": None, "windows": {}}
    ordered = sorted(bind_times)
    span = ordered[-1] - ordered[0]
    counts: dict[int, int] = {}
    for t in ordered:
        second = int(t - ordered[0])
        counts[second] = counts.get(second, 0) + 1
    full = [counts.get(s, 0) for s in range(int(span))]  # complete windows only
    return {
        "pods_per_s": round((len(ordered) - 1) / span, 1) if span > 0 else None,
        "first_to_last_s": round(span, 2),
        "windows": {
            "p50": percentile(full, 50),
            "p90": percentile(full, 90),
            "max": max(full) if full else None,
        },
    }


def latency_ms(
    created: Mapping[str, tuple[float, float]], bound: Mapping[str, tuple[float, str]]
) -> dict[str, Any]:
    """Create (201 received) to first-seen-bound, in ms, over pods that were both."""
    return summary([(bound[n][0] - created[n][1]) * 1000 for n in created if n in bound])


def summary(values: Sequence[float]) -> dict[str, Any]:
    """count, p50, p90, p99, max, min of ``values`` (ms)."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "p50": round(percentile(values, 50) or 0, 1),
        "p90": round(percentile(values, 90) or 0, 1),
        "p99": round(percentile(values, 99) or 0, 1),
        "max": round(max(values), 1),
        "min": round(min(values), 1),
    }


def cdf_points(values: Sequence[float], points: int = 200) -> list[list[float]]:
    """A compact CDF, [[value, fraction]...], for plotting."""
    ordered = sorted(values)
    if not ordered:
        return []
    step = max(1, len(ordered) // points)
    out = [
        [round(ordered[i], 2), round((i + 1) / len(ordered), 4)]
        for i in range(0, len(ordered), step)
    ]
    out.append([round(ordered[-1], 2), 1.0])
    return out


def bound_curve(bind_times: Sequence[float], start: float, points: int = 300) -> list[list[float]]:
    """[[seconds since start, pods bound so far]...] for the bound-over-time plot."""
    ordered = sorted(bind_times)
    if not ordered:
        return []
    step = max(1, len(ordered) // points)
    out = [[round(ordered[i] - start, 2), i + 1] for i in range(0, len(ordered), step)]
    out.append([round(ordered[-1] - start, 2), len(ordered)])
    return out


def spread(bound: Mapping[str, tuple[float, str]]) -> dict[str, int]:
    """How many nodes got pods, and the most pods on one node (placement sanity)."""
    per_node: dict[str, int] = {}
    for _, node in bound.values():
        per_node[node] = per_node.get(node, 0) + 1
    return {"nodes_used": len(per_node), "max_pods_per_node": max(per_node.values(), default=0)}


def value_at(samples: Sequence[Sequence[float]], t: float) -> float | None:
    """The cumulative value (column 1) of ``[[time, value]...]`` samples (time ascending) at
    ``t``, linear between the two samples around it; None outside the sampled span."""
    if not samples or t < samples[0][0] or t > samples[-1][0]:
        return None
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return float(samples[-1][1])


def drain_cpu(samples: Sequence[Sequence[float]], bind_times: Sequence[float]) -> dict[str, Any]:
    """CPU over the drain window, first to last bind, from the 1 Hz ``[[time, cpu seconds]
    ...]`` samples: ms per pod over the (M - 1) pods bound inside it and the cores used.
    Start-up (before the first bind) and the idle tail are left out; the whole-process
    figure keeps them. None where the window is not inside the samples."""
    if len(bind_times) < 2:
        return {"cpu_ms_per_pod_drain": None, "cores_drain": None}
    first, last = min(bind_times), max(bind_times)
    a, b = value_at(samples, first), value_at(samples, last)
    if a is None or b is None or last <= first:
        return {"cpu_ms_per_pod_drain": None, "cores_drain": None}
    return {
        "cpu_ms_per_pod_drain": round(1000 * (b - a) / (len(bind_times) - 1), 3),
        "cores_drain": round((b - a) / (last - first), 3),
    }


def median_range(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """(median, lowest, highest) of the values that are not None; None when none are.
    The median of an even count is the mean of the middle two."""
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    median = present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2
    return median, present[0], present[-1]
