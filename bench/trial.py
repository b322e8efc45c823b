"""One trial: one scheduler, one scenario, one node count, in a fresh namespace.

Backlog (S1): the pods are created while no scheduler runs; then the scheduler starts
and the trial ends when the watcher has seen every pod bound (or at the timeout).
Steady (S3): the scheduler runs and has bound a warm-up pod; pods then arrive open-loop
at a fixed rate. Memory (S4): a backlog like S1, on a cluster that already holds many bound
pods (``create_bound_pods``, in a namespace of their own), to read the scheduler's RSS with
every node and pod of a large cluster in its cache; its start to first Binding is the
start-up figure at that size. Takeover: two metricsched replicas with leader election on
a cluster that already holds many bound pods; the leader is SIGKILLed once the standby is
ready, a backlog is created right after, and the figure is the time from the kill to the
first Binding of those pods (the standby's takeover: lease expiry, then its first cycle).
In all, the independent watcher process
records the bind times and the harness samples the scheduler's process, its /metrics
(metricsched), Prometheus's query counter and the API server's write counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import counters, fairness, loadgen, profiling, stats, systems
from bench import env as env_mod
from bench.kube import ApiError, Kube, pod_body, schedulable_node_names

FILLER_NAMESPACE = "bench-bound"
LEASE_DURATION_S = 15.0  # metricsched's (runtime/leader.py), kube-scheduler's default


@dataclasses.dataclass(frozen=True)
class TrialSpec:
    scenario: str  # "backlog" | "steady" | "memory" | "profile" | "takeover"
    system: systems.System
    nodes: int
    pods: int = 0  # backlog size
    bound_before: int = 0  # memory: pods already bound in FILLER_NAMESPACE
    rate: float = 0.0  # steady arrivals per second
    duration_s: float = 0.0  # steady arrival period
    timeout_s: float = 300.0  # after the scheduler starts (backlog) or arrivals end (steady)
    profile: bool = False  # py-spy the scheduler process (metricsched only)
    operator_path: str | None = None  # PYTHONPATH of a scratch copy of the operator
    repeat: int = 0  # which of the cell's repeats (0-based)
    placement: fairness.Placement = fairness.UNPINNED  # the scheduler's CPU share


class Watcher:
    """The watcher process (bench.watcher) for one namespace."""

    def __init__(self, namespace: str, expect: int, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.out = workdir / f"watch-{namespace}.json"
        self.ready = workdir / f"watch-{namespace}.ready"
        self.out.unlink(missing_ok=True)
        self.ready.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "bench.watcher", f"--namespace={namespace}"]
        argv += [f"--expect={expect}", f"--out={self.out}", f"--ready-file={self.ready}"]
        self.proc = subprocess.Popen(argv, cwd=env_mod.ROOT)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"watcher did not start (exit {self.proc.poll()})")
            await asyncio.sleep(0.05)

    async def wait_done(self, deadline: float, scheduler: systems.Process) -> bool:
        """True when the watcher saw every pod bound before ``deadline`` (monotonic)."""
        while self.proc.poll() is None:
            if time.monotonic() > deadline or not scheduler.alive():
                return False
            await asyncio.sleep(0.25)
        return True

    def result(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        body: dict[str, Any] = json.loads(self.out.read_text())
        return body


async def _snapshot_counters(kube: Kube, cluster: env_mod.ClusterEnv) -> dict[str, float]:
    writes = await counters.apiserver_writes(kube)
    queries = await asyncio.to_thread(counters.prometheus_queries, cluster.prometheus_url)
    return {**{f"apiserver_{k}": v for k, v in writes.items()}, "prometheus_queries": queries}


async def create_bound_pods(kube: Kube, namespace: str, count: int, *, start: int = 0) -> None:
    """Pods ``start``..``count - 1`` of ``namespace``, created bound (``spec.nodeName``
    set) round-robin over the schedulable nodes; waits until kwok has them all Running so
    that their status writes are over before the trial starts."""
    t0 = time.monotonic()
    if start == 0:
        await kube.delete_namespace(namespace, wait_s=600.0)  # a leftover of a failed run
        await kube.create_namespace(namespace)
    nodes = schedulable_node_names(await kube.list_nodes())
    created = await loadgen.create_bound(kube, namespace, nodes, count, start=start)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        page = await kube.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            params={"fieldSelector": "status.phase!=Running", "limit": "1"},
            timeout_s=120,
        )
        if not page.get("items"):
            break
        await asyncio.sleep(3.0)
    print(
        f"[bench] {len(created)} bound pods created in {namespace} "
        f"({time.monotonic() - t0:.0f}s with kwok's status writes)",
        flush=True,
    )


async def _wait_ready(proc: systems.Process, health_port: int, timeout: float) -> None:
    """Poll a metricsched replica's /readyz (its caches synced) until it answers 200."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(systems.operator_ready, health_port):
        if time.monotonic() > deadline or not proc.alive():
            raise RuntimeError(f"replica on health port {health_port} did not become ready")
        await asyncio.sleep(0.5)


async def _wait_bound(kube: Kube, namespace: str, name: str, timeout: float) -> float:
    """Poll until the pod is bound; return seconds waited (raise on timeout)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if (pod.get("spec") or {}).get("nodeName"):
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise TimeoutError(f"warm-up pod {namespace}/{name} not bound after {timeout:.0f}s")


class Trial:
    """The state of one running trial: its namespace, scheduler process and record."""

    def __init__(
        self, spec: TrialSpec, cluster: env_mod.ClusterEnv, kube: Kube, workdir: Path
    ) -> None:
        self.spec = spec
        self.cluster = cluster
        self.kube = kube
        self.workdir = workdir
        self.tag = f"{spec.scenario}-{spec.system.name}-n{spec.nodes}-r{spec.repeat}"
        suffix = secrets.token_hex(2)
        self.namespace = f"b-{spec.scenario[:2]}-{spec.system.name}-{spec.nodes}-{suffix}"
        self.record: dict[str, Any] = {
            "scenario": spec.scenario,
            "system": spec.system.name,
            "label": spec.system.label,
            "scheduler_name": spec.system.scheduler_name,
            "client_qps": spec.system.qps,
            "client_burst": spec.system.burst,
            "concurrency": spec.system.concurrency,
            "nodes": spec.nodes,
            "repeat": spec.repeat,
            "nodes_evaluated": systems.nodes_evaluated(spec.system, spec.nodes),
            "cpu_share": spec.placement.describe(),
            "namespace": self.namespace,
            "code": env_mod.code_fingerprint(
                Path(spec.operator_path) if spec.operator_path else None
            ),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load_average_before": env_mod.load_average(),
        }
        self.before: dict[str, float] = {}

    def start_scheduler(self, *, extra: tuple[str, ...] = (), replica: int = 0) -> systems.Process:
        """The system under test with its CPU share; ``replica`` > 0 gets other ports."""
        argv = systems.command(
            self.spec.system,
            self.cluster,
            self.workdir,
            metrics_port=env_mod.OPERATOR_METRICS_PORT + 10 * replica,
            health_port=env_mod.OPERATOR_HEALTH_PORT + 10 * replica,
        )
        argv = self.spec.placement.wrap([*argv, *extra])
        log = self.workdir / "logs" / f"{self.tag}{f'-{replica}' if replica else ''}.log"
        path = self.spec.operator_path if self.spec.system.name.startswith("metricsched") else None
        return systems.Process(self.spec.system, argv, log, python_path=path)

    async def backlog(self) -> None:
        spec, record = self.spec, self.record
        watcher = Watcher(self.namespace, spec.pods, self.workdir)
        await watcher.wait_ready()
        t0 = time.time()
        created = await loadgen.create_backlog(
            self.kube, self.namespace, spec.system.scheduler_name, spec.pods
        )
        record["pods"] = len(created)
        record["create_s"] = round(time.time() - t0, 2)
        if spec.bound_before:
            record["bound_before"] = spec.bound_before
        self.before = await _snapshot_counters(self.kube, self.cluster)
        proc = self.start_scheduler()
        profiler = None
        if spec.profile:
            await asyncio.sleep(1.0)  # let the interpreter start before py-spy attaches
            profiler = profiling.Profiler(proc.pid, self.workdir / f"profile-{self.tag}.txt")
        complete = await watcher.wait_done(time.monotonic() + spec.timeout_s, proc)
        bound, _ = await self.finish(proc, watcher, profiler, complete, set(created))
        times = [t for t, _ in bound.values()]
        record["throughput"] = stats.throughput(times)
        record["start_to_first_bind_s"] = round(min(times) - proc.started, 2) if times else None
        record["bound_curve"] = stats.bound_curve(times, proc.started)
        record["latency_ms"] = stats.latency_ms(created, bound)
        record["resources"].update(stats.drain_cpu([(t, c) for t, _, c in proc.samples], times))

    async def takeover(self) -> None:
        """Two replicas; the leader is killed; time from the kill to the next Binding."""
        spec, record = self.spec, self.record
        watcher = Watcher(self.namespace, spec.pods + 1, self.workdir)
        await watcher.wait_ready()
        lease = (
            "--leader-elect",
            f"--leader-election-namespace={self.namespace}",
            f"--leader-election-id=bench-{self.namespace}",
        )
        leader = self.start_scheduler(extra=lease, replica=0)
        standby: systems.Process | None = None
        try:
            warm = pod_body("warm-up", spec.system.scheduler_name)
            await self.kube.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", warm)
            # A new install's first replica leads one lease duration after it starts.
            record["first_leader_bind_s"] = round(
                await _wait_bound(self.kube, self.namespace, "warm-up", spec.timeout_s), 2
            )
            standby = self.start_scheduler(extra=lease, replica=1)
            await _wait_ready(standby, env_mod.OPERATOR_HEALTH_PORT + 10, spec.timeout_s)
            record["standby_ready_s"] = round(time.time() - standby.started, 2)
            await asyncio.sleep(3.0)  # the standby has read the Lease at least once
        except BaseException:
            for proc in (leader, standby):
                if proc is not None:
                    await asyncio.to_thread(proc.stop)
            raise
        killed_at = time.time()
        await asyncio.to_thread(leader.kill)
        created = await loadgen.create_backlog(
            self.kube, self.namespace, spec.system.scheduler_name, spec.pods
        )
        record["pods"] = len(created)
        record["create_s"] = round(time.time() - killed_at, 2)
        record["bound_before"] = spec.bound_before
        self.before = await _snapshot_counters(self.kube, self.cluster)
        complete = await watcher.wait_done(time.monotonic() + spec.timeout_s, standby)
        bound, _ = await self.finish(standby, watcher, None, complete, set(created))
        times = [t for t, _ in bound.values()]
        record["leader_exit"] = leader.proc.returncode
        record["takeover_s"] = round(min(times) - killed_at, 2) if times else None
        record["throughput"] = stats.throughput(times)
        record["lease_duration_s"] = LEASE_DURATION_S

    async def steady(self) -> None:
        spec, record = self.spec, self.record
        count = int(spec.rate * spec.duration_s)
        watcher = Watcher(self.namespace, count + 1, self.workdir)
        await watcher.wait_ready()
        proc = self.start_scheduler()
        warm = pod_body("warm-up", spec.system.scheduler_name)
        await self.kube.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", warm)
        record["warm_up_s"] = round(await _wait_bound(self.kube, self.namespace, "warm-up", 120), 2)
        self.before = await _snapshot_counters(self.kube, self.cluster)
        cpu_before = proc.samples[-1][2] if proc.samples else 0.0
        created = await loadgen.create_steady(
            self.kube,
            self.namespace,
            spec.system.scheduler_name,
            rate=spec.rate,
            duration_s=spec.duration_s,
        )
        record.update(pods=len(created), rate=spec.rate, duration_s=spec.duration_s)
        complete = await watcher.wait_done(time.monotonic() + spec.timeout_s, proc)
        bound, added = await self.finish(proc, watcher, None, complete, set(created))
        names = sorted(bound)
        latencies = [(bound[n][0] - created[n][1]) * 1000 for n in names]
        record["latency_ms"] = stats.latency_ms(created, bound)
        record["latency_cdf"] = stats.cdf_points(latencies)
        # The same from the watcher's own clock: first seen (unbound) to first seen bound.
        watch_only = [(bound[n][0] - added[n]) * 1000 for n in names if n in added]
        record["latency_ms_watcher_only"] = stats.summary(watch_only)
        t0 = min((created[n][1] for n in names), default=0.0)
        record["latency_series"] = [
            [round(created[n][1] - t0, 3), round(lat, 1)]
            for n, lat in zip(names, latencies, strict=True)
        ]
        record["throughput"] = stats.throughput([t for t, _ in bound.values()])
        cpu_after = record["resources"].get("cpu_s", 0.0)
        record["resources"]["cpu_ms_per_pod_arrivals"] = (
            round(1000 * (cpu_after - cpu_before) / len(bound), 3) if bound else None
        )

    async def finish(
        self,
        proc: systems.Process,
        watcher: Watcher,
        profiler: profiling.Profiler | None,
        complete: bool,
        measured: set[str],
    ) -> tuple[dict[str, tuple[float, str]], dict[str, float]]:
        """Stop everything, read every counter; return the measured pods' bind and first-
        seen times (warm-up pods excluded)."""
        record = self.record
        record["complete"] = complete
        record["scheduler_exited"] = not proc.alive()
        if profiler is not None:
            raw, seconds = profiler.stop()
            if raw is not None:
                record["profile"] = profiling.summarise(raw, seconds=seconds)
                record["profile_file"] = str(raw)
        if self.spec.system.name.startswith("metricsched") and proc.alive():
            with contextlib.suppress(OSError):
                # The takeover's survivor is the second replica (its ports are +10).
                replica = 1 if self.spec.scenario == "takeover" else 0
                port = env_mod.OPERATOR_METRICS_PORT + 10 * replica
                text = await asyncio.to_thread(systems.operator_metrics_text, port)
                record["operator"] = counters.operator_counters(text)
        await asyncio.to_thread(proc.stop)
        after = await _snapshot_counters(self.kube, self.cluster)
        result = watcher.result()
        bound = {k: (v[0], v[1]) for k, v in result["bound"].items() if k in measured}
        record["watcher_error"] = result.get("error")
        record["bound"] = len(bound)
        record["deltas"] = counters.delta(after, self.before)
        record["resources"] = proc.resources(len(bound))
        record["spread"] = stats.spread(bound)
        _per_pod(record, len(bound))
        return bound, result.get("added") or {}


async def run(
    spec: TrialSpec, cluster: env_mod.ClusterEnv, kube: Kube, workdir: Path
) -> dict[str, Any]:
    """Run one trial and return its result record (never raises for a slow scheduler)."""
    t = Trial(spec, cluster, kube, workdir)
    print(f"[bench] {t.tag}: namespace {t.namespace}", flush=True)
    await kube.create_namespace(t.namespace)
    if spec.system.name.startswith("metricsched"):
        await kube.create_policy(t.namespace, systems.POLICY_NAME, systems.POLICY_SPEC)
    try:
        if spec.scenario == "steady":
            await t.steady()
        elif spec.scenario == "takeover":
            await t.takeover()
        else:
            await t.backlog()
    finally:
        t.record["load_average_after"] = env_mod.load_average()
        try:
            t.record["pods_left_after_cleanup"] = await kube.delete_namespace(t.namespace)
        except (ApiError, OSError, TimeoutError) as e:  # the trial's numbers still count
            t.record["cleanup_error"] = repr(e)
    _print_summary(t.tag, t.record)
    return t.record


def _per_pod(record: dict[str, Any], bound: int) -> None:
    """Queries and writes per bound pod, from the operator's counters and the servers'."""
    if not bound:
        return
    d = record["deltas"]
    per: dict[str, Any] = {
        "prometheus_queries_server": round(d.get("prometheus_queries", 0) / bound, 4),
        "apiserver_writes": round(
            sum(d.get(k, 0) for k in d if k.startswith("apiserver_")) / bound, 3
        ),
        "apiserver_bindings": round(d.get("apiserver_binding", 0) / bound, 3),
        "apiserver_events": round(d.get("apiserver_event", 0) / bound, 3),
    }
    op = record.get("operator")
    if op:
        per["prometheus_queries_operator"] = round(op["prometheus_queries"] / bound, 4)
        per["api_writes_operator"] = round(op["api_writes"] / bound, 3)
    record["per_pod"] = per


def _print_summary(tag: str, record: dict[str, Any]) -> None:
    tp = (record.get("throughput") or {}).get("pods_per_s")
    lat = record.get("latency_ms") or {}
    res = record.get("resources") or {}
    print(
        f"[bench] {tag}: bound {record.get('bound')}/{record.get('pods')}"
        f" complete={record.get('complete')} {tp} pods/s"
        f" p50/p99 {lat.get('p50')}/{lat.get('p99')} ms"
        f" rss max {res.get('rss_mib_max')} MiB cpu {res.get('cpu_ms_per_pod')} ms/pod"
        f" load {record.get('load_average_after')}",
        flush=True,
    )
