"""py-spy profiles of the operator and their summary (where the GIL-holding time goes).

``Profiler`` attaches ``py-spy record --gil --format raw`` (collapsed stacks) to a pid and
stops it with SIGINT, which makes py-spy write its output. ``summarise`` turns the
collapsed stacks into the share of samples per function (self and inclusive) and per
coarse category (kopf/watch parsing, the scheduling cycle, the cache, binding, events,
HTTP/TLS, logging, metrics), which is what the report shows.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

RATE_HZ = 100

# First matching rule wins; matched against "function (file:line)" frames of a stack.
CATEGORIES: list[tuple[str, re.Pattern[str]]] = [
    ("scheduling cycle (core.cycle/filters/scoring)", re.compile(r"metricsched/core/")),
    ("cluster cache (runtime/cache.py)", re.compile(r"runtime/cache\.py")),
    ("event recorder (edges/binder.py record)", re.compile(r"\brecord(_pod)? \(.*binder\.py")),
    ("binding call (edges/binder.py bind)", re.compile(r"\bbind \(.*binder\.py")),
    ("watch event handling (runtime/operator.py on_*)", re.compile(r"on_(pod|node|policy) \(")),
    ("kopf machinery", re.compile(r"kopf/")),
    ("kubernetes client / urllib3 / ssl", re.compile(r"kubernetes/|urllib3/|ssl\.py")),
    ("asyncio / aiohttp", re.compile(r"asyncio/|aiohttp/")),
    ("logging", re.compile(r"logging/|pythonjsonlogger")),
    ("prometheus client / refresher", re.compile(r"prometheus_client/|edges/prometheus\.py")),
]


class Profiler:
    """``py-spy record`` on a running process; ``stop()`` returns the output path."""

    def __init__(self, pid: int, out: Path, *, rate: int = RATE_HZ) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.out = out
        self.started = time.time()
        self.rate = rate
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--gil",
                "--nonblocking",
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> tuple[Path | None, float]:
        """Stop recording; return (output file or None, seconds recorded)."""
        duration = time.time() - self.started
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return (self.out if self.out.exists() else None), duration


def _frames(stack: str) -> list[str]:
    return [f for f in stack.split(";") if f]


def _short(frame: str) -> str:
    """'func (path/to/module.py:123)' -> 'func (module.py)'."""
    found = re.match(r"(.*?) \((.*?)(?::\d+)?\)$", frame)
    if not found:
        return frame
    path = found.group(2)
    parts = path.split("/")
    tail = "/".join(parts[-2:]) if "metricsched" in path else parts[-1]
    return f"{found.group(1)} ({tail})"


def _category(frames: list[str]) -> str:
    joined = ";".join(frames)
    for name, pattern in CATEGORIES:
        if pattern.search(joined):
            return name
    return "other"


def summarise(raw: Path, *, seconds: float, rate: int = RATE_HZ, top: int = 25) -> dict[str, Any]:
    """Shares of GIL-holding samples by function and category."""
    total = 0
    self_counts: Counter[str] = Counter()
    incl_counts: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = _frames(stack)
        if not frames:
            continue
        total += count
        self_counts[_short(frames[-1])] += count
        for name in {_short(f) for f in frames}:
            incl_counts[name] += count
        categories[_category(frames)] += count

    def share(counter: Counter[str]) -> list[list[Any]]:
        return (
            [[k, round(100 * v / total, 1)] for k, v in counter.most_common(top)] if total else []
        )

    return {
        "samples": total,
        "seconds": round(seconds, 1),
        "gil_busy_fraction": round(total / (rate * seconds), 3) if seconds > 0 else None,
        "self_pct": share(self_counts),
        "inclusive_pct": share(incl_counts),
        "category_pct": share(categories),
    }
