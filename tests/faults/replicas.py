"""Operator replicas as Kubernetes would run them: restarted when they exit.

Each replica is a `metricsched run --leader-elect` process with its own identity and its
own fault proxy in front of the API server. A supervisor thread restarts a replica that
exits (after ``RESTART_DELAY_S``, like a kubelet restarting a container) and records every
exit: when, with what code, and whether the harness caused it (SIGKILL on purpose).

Crash loop rule (the fault suite's fourth invariant): an exit the harness did not cause is
*explained* if it happened while a fault was in effect or within ``EXPLAIN_AFTER_S`` after
it ended (a replica that lost its Lease during a fault exits on purpose, as kube-scheduler
does). An unexplained exit is one the replica made while the API was healthy: any such
exit is counted as a crash loop.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.faults import memcg
from tests.faults import proxy as proxy_mod

RESTART_DELAY_S = 2.0
LEASE_DURATION_S = 15.0
EXPLAIN_AFTER_S = LEASE_DURATION_S + 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Exit:
    at: float  # time.time()
    code: int
    by_harness: bool


@dataclasses.dataclass
class FaultWindow:
    start: float
    end: float | None = None  # None = still in effect


class Replica:
    """One supervised operator process behind its own fault proxy."""

    def __init__(
        self,
        *,
        name: str,
        argv: list[str],
        proxy: proxy_mod.FaultProxy,
        log: Path,
        health_port: int,
        metrics_port: int,
        memory_limit_bytes: int | None = None,
    ) -> None:
        """``memory_limit_bytes``: run each start in a memory cgroup with that limit (as
        the chart's container limit), where the machine has one to give (``cgroup``
        is None otherwise; see memcg.py)."""
        self.name = name
        self.argv = argv
        self.proxy = proxy
        self.log = log
        self.health_port = health_port
        self.metrics_port = metrics_port
        self.exits: list[Exit] = []
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._killing = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.cgroup: memcg.MemoryCgroup | None = None
        if memory_limit_bytes is not None:
            self.cgroup = memcg.MemoryCgroup.create(f"{log.stem}-{os.getpid()}", memory_limit_bytes)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._spawn()
        self._thread = threading.Thread(target=self._supervise, name=self.name, daemon=True)
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            logf = self.log.open("ab")
            logf.write(f"--- {self.name} start #{self.starts + 1} at {time.time():.3f}\n".encode())
            logf.flush()
            # POD_NAME prefixes the Lease holder identity: the harness tells replicas apart.
            self._proc = subprocess.Popen(
                self.cgroup.wrap(self.argv) if self.cgroup is not None else self.argv,
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "POD_NAME": self.name},
            )
            logf.close()
            self.starts += 1

    def _supervise(self) -> None:
        while not self._stopped.is_set():
            proc = self._proc
            assert proc is not None
            code = proc.wait()
            if self._stopped.is_set():
                return
            with self._lock:
                self.exits.append(Exit(at=time.time(), code=code, by_harness=self._killing))
                self._killing = False
            if self._stopped.wait(RESTART_DELAY_S):
                return
            self._spawn()

    def rss_mib(self) -> float | None:
        """The running process's resident memory (VmRSS), or None if it is not running."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return None
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    def sigkill(self) -> None:
        """Kill the process on purpose (the supervisor restarts it; not a crash)."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return
            self._killing = True
            proc.send_signal(signal.SIGKILL)
        # Wait until the supervisor has recorded the exit, so the next kill sees a new pid.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)

    def stop(self) -> None:
        self._stopped.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.proxy.close()
        if self.cgroup is not None:
            self.cgroup.remove()

    # --- probes ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def running(self) -> bool:
        return self.pid is not None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/readyz", timeout=2
            ) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def unexplained_exits(self, faults: list[FaultWindow]) -> list[Exit]:
        out = []
        for e in self.exits:
            if e.by_harness:
                continue
            explained = any(
                w.start <= e.at and (w.end is None or e.at <= w.end + EXPLAIN_AFTER_S)
                for w in faults
            )
            if not explained:
                out.append(e)
        return out


def operator_argv(
    *,
    kubeconfig: Path,
    prometheus_url: str,
    scheduler: str,
    lease_namespace: str,
    lease_name: str,
    metrics_port: int,
    health_port: int,
    refresh_interval: str,
    extra: list[str] | None = None,
) -> list[str]:
    exe = Path(sys.executable).parent / "metricsched"
    return [
        str(exe),
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--prometheus-url={prometheus_url}",
        f"--scheduler-name={scheduler}",
        "--leader-elect",
        f"--leader-election-namespace={lease_namespace}",
        f"--leader-election-id={lease_name}",
        f"--metrics-port={metrics_port}",
        f"--health-port={health_port}",
        "--bind-address=127.0.0.1",
        f"--refresh-interval={refresh_interval}",
        "--query-timeout=2s",
        "--log-format=json",
        "--log-level=info",
        *(extra or []),
    ]


def log_records(path: Path, *, since: float = 0.0) -> list[dict[str, Any]]:
    """The operator's JSON log lines in ``path`` stamped at or after ``since``
    (``time.time()``), each with ``at``: its ``time`` field as a ``time.time()`` value.

    The harness's own lines (``--- r0 start #1 ...``) and anything else that is not a
    JSON object with a readable ``time`` are skipped: a process killed mid-line leaves
    half a record."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            record = json.loads(line)
            at = datetime.datetime.fromisoformat(str(record["time"])).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(record, dict) and at >= since:
            record["at"] = at
            out.append(record)
    return out
