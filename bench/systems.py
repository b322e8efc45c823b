"""The schedulers compared: how each is started, checked and stopped, and its process sampled.

- ``metricsched``: ``metricsched run`` as users run it, with a one-metric SchedulingPolicy.
- ``kube-default``: kube-scheduler (same Kubernetes version as the API server) with its
  default client limits, QPS 50 / burst 100.
- ``kube-open``: the same binary with QPS 5000 / burst 5000 (scheduler_perf's setting).
- ``kube-open-all``: ``kube-open`` with ``percentageOfNodesToScore: 100``: it evaluates every
  node, as metricsched does, where its default samples (``nodes_evaluated``).
- ``null``: ``bench.nullbinder``, round-robin, no filters or scores, 16 Bindings in flight;
  ``null-64`` and ``null-256`` the same with 64 and 256 (the ceiling sweep, opt-in).
- ``metricsched-events``: metricsched with ``--events-per-second=2000`` (burst 4000): one
  Scheduled Event per pod, as kube-scheduler posts, where the default 50/s budget drops
  most of them in a backlog (opt-in).
- ``random`` (the quality benchmark's): ``bench.quality.randombinder``, a random node that
  fits the pod's requests.

All of them authenticate with the cluster's admin token (``system:masters``), so API
Priority and Fairness puts them all in the ``exempt`` priority level.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from bench import env as env_mod

POLICY_NAME = "bench-latency"
POLICY_SPEC: dict[str, Any] = {
    "podSelector": {},
    "metrics": [
        {
            "name": "latency",
            "prometheus": {"query": "max by (node) (node_latency_seconds)", "nodeLabel": "node"},
            "weight": 1,
            "goal": "Minimize",
            "onMissing": "Neutral",
        }
    ],
    "maxMetricAge": "2m",
    "burstPenalty": 5,
    "burstWindow": "60s",
    "fallback": {"strategy": "LeastAllocated"},
}


@dataclasses.dataclass(frozen=True)
class System:
    name: str  # short id used in results
    scheduler_name: str  # spec.schedulerName of its pods
    label: str  # for tables and plots
    qps: float | None = None  # client limit (kube-scheduler only)
    burst: int | None = None
    concurrency: int = 16  # null binder / metricsched bind concurrency
    refresh_interval: str = "15s"  # metricsched's --refresh-interval
    seed: int = 1  # the random binder's
    extra_args: tuple[str, ...] = ()  # metricsched only: flags of the plan's metric pipeline
    percentage_of_nodes_to_score: int | None = None  # kube-scheduler only; None: its default


SYSTEMS: dict[str, System] = {
    # metricsched at its default --bind-concurrency (64); the null binder keeps 16.
    "metricsched": System("metricsched", "metricsched", "metricsched", concurrency=64),
    "kube-default": System(
        "kube-default", "bench-kube", "kube-scheduler QPS 50", qps=50, burst=100
    ),
    "kube-open": System(
        "kube-open", "bench-kube-open", "kube-scheduler QPS 5000", qps=5000, burst=5000
    ),
    "kube-open-all": System(
        "kube-open-all",
        "bench-kube-open-all",
        "kube-scheduler QPS 5000, all nodes scored",
        qps=5000,
        burst=5000,
        percentage_of_nodes_to_score=100,
    ),
    "null": System("null", "bench-null", "Python null binder"),
    # Opt-in (``--systems``): not in any plan by default.
    "null-64": System(
        "null-64", "bench-null-64", "Python null binder, 64 in flight", concurrency=64
    ),
    "null-256": System(
        "null-256", "bench-null-256", "Python null binder, 256 in flight", concurrency=256
    ),
    "metricsched-events": System(
        "metricsched-events",
        "metricsched",
        "metricsched, one Event per pod",
        extra_args=("--events-per-second=2000",),
    ),
}
OPT_IN = ("null-64", "null-256", "metricsched-events")

# kube-scheduler's numFeasibleNodesToFind (pkg/scheduler/schedule_one.go), its constants.
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
BASE_PERCENTAGE = 50


def nodes_evaluated(system: System, nodes: int) -> int:
    """How many nodes a system filters and scores per pod on a cluster of ``nodes``
    (computed, not measured). kube-scheduler stops filtering once it has found
    ``numFeasibleNodesToFind`` feasible nodes: with ``percentageOfNodesToScore`` unset, its
    adaptive rule, ``50 - nodes/125`` % (integer division) with a floor of 5 %, and never
    fewer than 100 nodes; every node at 100 %. metricsched scores every feasible node;
    the null binder evaluates none."""
    if system.name.startswith("null"):
        return 0
    if not system.name.startswith("kube-"):
        return nodes
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    percentage = system.percentage_of_nodes_to_score or 0
    if percentage >= 100:
        return nodes
    if percentage <= 0:
        percentage = max(BASE_PERCENTAGE - nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES)


def _kube_scheduler_config(system: System, cluster: env_mod.ClusterEnv, workdir: Path) -> Path:
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(cluster.kubeconfig),
            "qps": system.qps,
            "burst": system.burst,
        },
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": system.scheduler_name}],
    }
    if system.percentage_of_nodes_to_score is not None:
        cfg["percentageOfNodesToScore"] = system.percentage_of_nodes_to_score
    path = workdir / f"{system.name}-config.yaml"
    path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML
    return path


def command(
    system: System,
    cluster: env_mod.ClusterEnv,
    workdir: Path,
    *,
    metrics_port: int = env_mod.OPERATOR_METRICS_PORT,
    health_port: int = env_mod.OPERATOR_HEALTH_PORT,
) -> list[str]:
    """The argv that runs ``system`` against the benchmark cluster (the ports: metricsched's,
    a second replica gets others)."""
    if system.name.startswith("metricsched"):
        return [
            str(Path(sys.executable).parent / "metricsched"),
            "run",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus-url={cluster.prometheus_url}",
            f"--scheduler-name={system.scheduler_name}",
            f"--metrics-port={metrics_port}",
            f"--health-port={health_port}",
            "--bind-address=127.0.0.1",
            "--log-format=json",
            "--log-level=warning",
            f"--refresh-interval={system.refresh_interval}",
            f"--bind-concurrency={system.concurrency}",
            *system.extra_args,
        ]
    if system.name.startswith("kube-"):
        certs = workdir / "kube-scheduler-certs"
        certs.mkdir(parents=True, exist_ok=True)
        return [
            str(cluster.tools_bin / "kube-scheduler"),
            f"--config={_kube_scheduler_config(system, cluster, workdir)}",
            f"--secure-port={env_mod.KUBE_SCHEDULER_PORT}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={certs}",
            f"--authentication-kubeconfig={cluster.kubeconfig}",
            f"--authorization-kubeconfig={cluster.kubeconfig}",
            "--v=1",
        ]
    if system.name == "random":
        return [
            sys.executable,
            "-m",
            "bench.quality.randombinder",
            f"--scheduler-name={system.scheduler_name}",
            f"--seed={system.seed}",
        ]
    return [
        sys.executable,
        "-m",
        "bench.nullbinder",
        f"--scheduler-name={system.scheduler_name}",
        f"--concurrency={system.concurrency}",
    ]


class Process:
    """One running scheduler, its log, and a 1 Hz sampler of RSS and CPU time."""

    def __init__(
        self, system: System, argv: list[str], log: Path, *, python_path: str | None = None
    ) -> None:
        self.system = system
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("ab")
        self.started = time.time()
        env = dict(os.environ)
        if python_path:  # run a scratch copy of the operator package (experiments)
            env["PYTHONPATH"] = python_path
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=env_mod.ROOT,
            env=env,
        )
        self.samples: list[tuple[float, int, float]] = []  # (t, rss bytes, cpu seconds)
        self.hwm_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="sampler")
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _sample(self) -> None:
        try:
            ps = psutil.Process(self.proc.pid)
            while not self._stop.is_set():
                with ps.oneshot():
                    cpu = ps.cpu_times()
                    self.samples.append((time.time(), ps.memory_info().rss, cpu.user + cpu.system))
                self.hwm_kib = max(self.hwm_kib, _vm_hwm_kib(self.proc.pid))
                self._stop.wait(1.0)
        except psutil.Error:
            return

    def kill(self) -> int | None:
        """SIGKILL (a crashed leader: no step-down, no Lease release); return the code."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.proc.kill()
        self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def stop(self, timeout: float = 20.0) -> int | None:
        """Take a last sample, SIGTERM, wait, SIGKILL if needed; return the exit code."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self.alive():
            try:
                ps = psutil.Process(self.proc.pid)
                cpu = ps.cpu_times()
                self.samples.append((time.time(), ps.memory_info().rss, cpu.user + cpu.system))
                self.hwm_kib = max(self.hwm_kib, _vm_hwm_kib(self.proc.pid))
            except psutil.Error:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def resources(self, bound: int) -> dict[str, Any]:
        """RSS (p50, max, VmHWM) in MiB and CPU seconds, total and per bound pod."""
        if not self.samples:
            return {}
        rss = sorted(s[1] for s in self.samples)
        cpu = self.samples[-1][2]
        wall = self.samples[-1][0] - self.started
        return {
            "rss_mib_p50": round(rss[len(rss) // 2] / 2**20, 1),
            "rss_mib_max": round(rss[-1] / 2**20, 1),
            "vm_hwm_mib": round(self.hwm_kib / 1024, 1),
            "cpu_s": round(cpu, 2),
            "wall_s": round(wall, 1),
            "cpu_utilisation": round(cpu / wall, 3) if wall > 0 else None,
            "cpu_ms_per_pod": round(1000 * cpu / bound, 3) if bound else None,
            "rss_series": [
                [round(t - self.started, 1), round(r / 2**20, 1), round(c, 2)]
                for t, r, c in self.samples
            ],
        }


def _vm_hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def operator_ready(port: int = env_mod.OPERATOR_HEALTH_PORT) -> bool:
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def operator_metrics_text(port: int = env_mod.OPERATOR_METRICS_PORT) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())
