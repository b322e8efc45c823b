"""A results file's cells (one scenario, one system, every seed) and issue 27's targets.

A cell's figure is the median over its seeds, shown with its range; a target compares
medians of the same run (metricsched's default policy vs kube-scheduler), so a ratio
never mixes runs or commits. Pure: no I/O.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.quality import metrics
from bench.quality import systems as qsys

Row = tuple[str, str, bool | None]  # target, measured, holds (None: not judged)
OVERRUN_SHARE = 0.01  # issue 27: threshold overruns at most 1 % of binds


def trials(results: dict[str, Any], key: str, system: str) -> list[dict[str, Any]]:
    """The cell's trials without a harness error, in seed order."""
    found = [
        t
        for t in results.get("trials", [])
        if t.get("scenario") == key and t.get("system") == system and "error" not in t
    ]
    return sorted(found, key=lambda t: int(t.get("seed") or 0))


def values(results: dict[str, Any], key: str, system: str, field: str) -> list[float]:
    return [float(t[field]) for t in trials(results, key, system) if t.get(field) is not None]


def median(results: dict[str, Any], key: str, system: str, field: str) -> float | None:
    found = values(results, key, system, field)
    return statistics.median(found) if found else None


def show(found: list[float], digits: int = 0) -> str:
    """``found``'s median, and its range when the seeds differ: "12 [8 to 20]"."""
    if not found:
        return "n/a"
    mid = f"{statistics.median(found):.{digits}f}"
    lo, hi = f"{min(found):.{digits}f}", f"{max(found):.{digits}f}"
    return mid if lo == hi else f"{mid} [{lo} to {hi}]"


def cell(results: dict[str, Any], key: str, system: str, field: str, digits: int = 0) -> str:
    return show(values(results, key, system, field), digits)


def seeds(results: dict[str, Any], key: str, system: str) -> list[int]:
    return [int(t.get("seed") or 0) for t in trials(results, key, system)]


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None:
        return ""
    if theirs == 0:
        return " (kube-scheduler 0)" if ours else " (both 0)"
    return f" ({ours / theirs:.2f}x)"


def _at_most(ours: float | None, theirs: float | None, share: float) -> bool | None:
    if ours is None or theirs is None:
        return None
    return ours <= share * theirs


def target_rows(results: dict[str, Any], system: str = qsys.DEFAULT) -> list[Row]:
    """Issue 27's targets for ``system`` (the default policy) against kube-scheduler,
    median of the seeds, scenarios b and d, one run; the declared-amount rows' own."""
    rows: list[Row] = []
    for key in ("b", "d"):
        for field, share, text in (
            ("node_seconds_above_80", 0.25, "node-s > 80 % ≤ 0.25x kube-scheduler's"),
            ("node_seconds_above_100", 0.1, "node-s > 100 % ≤ 0.1x kube-scheduler's"),
        ):
            ours, theirs = (
                median(results, key, system, field),
                median(results, key, qsys.KUBE, field),
            )
            rows.append(
                (
                    f"({key}) {text}",
                    f"{cell(results, key, system, field)} vs "
                    f"{cell(results, key, qsys.KUBE, field)}{_ratio(ours, theirs)}",
                    _at_most(ours, theirs, share),
                )
            )
        over, binds = (
            median(results, key, system, "overruns"),
            median(results, key, system, "binds"),
        )
        rows.append(
            (
                f"({key}) threshold overruns ≤ 1 % of binds",
                f"{cell(results, key, system, 'overruns')} of "
                f"{cell(results, key, system, 'binds')}",
                None if over is None or not binds else over <= OVERRUN_SHARE * binds,
            )
        )
        held = median(results, key, system, "held_with_room_over_limit")
        rows.append(
            (
                f"({key}) no pod pending > {metrics.HELD_LIMIT_S:.0f} s while a node had room "
                "(true usage)",
                f"{cell(results, key, system, 'held_with_room_over_limit')} pods "
                f"(longest {cell(results, key, system, 'held_with_room_max_s')} s)",
                None if held is None else held == 0,
            )
        )
    ours = median(results, "d", system, "hottest_end_of_burst")
    theirs = median(results, "d", qsys.KUBE, "hottest_end_of_burst")
    rows.append(
        (
            "(d) hottest node at the end of the scale-out ≥ 15 points below kube-scheduler's",
            f"{cell(results, 'd', system, 'hottest_end_of_burst', 2)} vs "
            f"{cell(results, 'd', qsys.KUBE, 'hottest_end_of_burst', 2)}",
            None if ours is None or theirs is None else ours <= theirs - 0.15,
        )
    )
    for key in ("b", "d"):
        stuck = median(results, key, qsys.AMOUNT_DOUBLE, "pending_at_end_with_room")
        rows.append(
            (
                f"({key}) amount at double: no pod still pending at the end while a node "
                "had room for it",
                f"{cell(results, key, qsys.AMOUNT_DOUBLE, 'pending_at_end_with_room')} "
                f"(unplaced {cell(results, key, qsys.AMOUNT_DOUBLE, 'unplaced')})",
                None if stuck is None else stuck == 0,
            )
        )
        rows.append(
            (
                f"({key}) amount at half: overruns reported",
                f"{cell(results, key, qsys.AMOUNT_HALF, 'overruns')} of "
                f"{cell(results, key, qsys.AMOUNT_HALF, 'binds')}",
                None,
            )
        )
    on, off = backlog(results, system), backlog(results, qsys.NO_ESTIMATE)
    rows.append(
        (
            "backlog binds/s, the default within 10 % of estimate off",
            f"{'n/a' if on is None else f'{on:.1f}'} vs {'n/a' if off is None else f'{off:.1f}'}",
            None if on is None or off is None else on >= 0.9 * off,
        )
    )
    return rows


def backlog(results: dict[str, Any], system: str) -> float | None:
    """Mean binds/s of ``system``'s backlog trials."""
    found = [
        float(r["throughput"]["pods_per_s"])
        for r in results.get("backlog", [])
        if r.get("system") == system and (r.get("throughput") or {}).get("pods_per_s")
    ]
    return sum(found) / len(found) if found else None
