"""py-spy profiles of the operator and their summary (where the GIL-holding time goes).

``Profiler`` attaches ``py-spy record --gil --format raw`` (collapsed stacks) to a pid and
stops it with SIGINT, which makes py-spy write its output. ``summarise`` turns the
collapsed stacks into the share of samples per function (self and inclusive) and per
category, which is what the report shows. A category is named after what it measures and
is chosen by the stack's callers (``CATEGORIES``, first match wins): the cycle, the attempt
around it, the informer (reads, parsing, cache upserts), the kopf pod handlers, kopf's own
machinery, Bindings, Events, the queue, the refresher, and the event-loop plumbing that no
code of ours is on the stack for.
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

# First matching rule wins; matched against the whole stack of "function (file:line)"
# frames, so a bucket names the activity a sample belongs to (its caller chain), not the
# library at the leaf: the informer's parsing is the informer's, a log line written by the
# scheduler is the scheduler's. The plumbing bucket is last and takes only stacks with none
# of our frames on them (the loop polling, aiohttp reading for nobody in particular).
CATEGORIES: list[tuple[str, re.Pattern[str]]] = [
    # A <module> frame below the root (the console script's own) is an import.
    (
        "imports (module loading, mostly at start-up)",
        re.compile(r";<module> \(|importlib\._bootstrap"),
    ),
    (
        "the cycle (core/cycle.py, core/class_run.py: a pod's or a class run's decision)",
        re.compile(r"core/(cycle|class_run)\.py"),
    ),
    (
        "event recorder (edges/events.py, edges/policy_events.py)",
        re.compile(r"edges/(policy_)?events\.py"),
    ),
    ("Binding POST (edges/binder.py)", re.compile(r"edges/binder\.py")),
    (
        "kopf pod handlers (runtime/ingest.py on_pending_pod, on_bound_pod, on_*)",
        re.compile(r"\bon_[a-z_]+ \([^;]*runtime/ingest\.py"),
    ),
    (
        "informer: watch reads, parsing, cache upserts (edges/informer.py, runtime/informers.py)",
        re.compile(r"edges/informer\.py|runtime/informers\.py"),
    ),
    ("queue (runtime/queue.py)", re.compile(r"runtime/queue\.py")),
    (
        "attempt outside the cycle (runtime/scheduler.py: snapshot, record, assume)",
        re.compile(r"runtime/scheduler\.py"),
    ),
    (
        "metric refresher and Prometheus client (runtime/refresher.py, edges/prometheus*.py)",
        re.compile(
            r"runtime/refresher\.py|edges/prometheus(_http|_series)?\.py"
            r"|edges/query_rounds\.py|edges/metric_store\.py"
        ),
    ),
    ("reconciler (runtime/reconcile.py)", re.compile(r"runtime/reconcile\.py")),
    ("cluster cache, other callers (runtime/cache.py)", re.compile(r"runtime/cache\.py")),
    (
        "other metricsched core (core/, e.g. parse.py outside the informer)",
        re.compile(r"metricsched/core/"),
    ),
    ("kopf machinery (kopf/: watch stream, JSON, dispatch)", re.compile(r"kopf/")),
    ("logging (outside the callers above)", re.compile(r"logging/|pythonjsonlogger")),
    (
        "prometheus_client: /metrics and counters (outside the callers above)",
        re.compile(r"prometheus_client/"),
    ),
    ("kubernetes client / urllib3 / ssl (threads)", re.compile(r"kubernetes/|urllib3/")),
    # Not cli.py: its main() is below the loop on every stack.
    ("other metricsched code (runtime/, edges/)", re.compile(r"metricsched/(runtime|edges)/")),
    (
        "event loop and aiohttp plumbing (asyncio/, aiohttp/, ssl; none of our frames below main)",
        re.compile(r"asyncio/|aiohttp/|ssl\.py|selectors\.py"),
    ),
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


def category(frames: list[str]) -> str:
    """The bucket of one stack (root first), by ``CATEGORIES``."""
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
        categories[category(frames)] += count

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
