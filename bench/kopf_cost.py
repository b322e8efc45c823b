"""kopf's CPU cost per pod event, as the operator runs it: baseline vs tuned, same run.

    python -m bench kopf [--pods 1000] [--rounds 2] [--variants baseline,tuned] [--profile]

Each variant runs in a fresh worker process (``python -m bench.kopf_cost worker``) that
builds the operator exactly as ``metricsched run`` does (``runtime.operator.Operator``:
its config, cache, queue, handlers and kopf settings), does its initial LIST and then
runs only its watches (``KopfSource.run``): no scheduler, refresher or status writer,
so the process's CPU is kopf's and the handlers'. The parent creates N pods of the
operator's scheduler name in a namespace of its own (they stay Pending: nothing binds
them), patches a label on each, then deletes them all: N ADDED, N MODIFIED and N
DELETED pod events. CPU is the worker's ``getrusage`` (user + system, all threads) per
phase, less its idle rate measured just before; the handlers' own share is
``time.thread_time`` around ``Ingest.on_pending_pod``. ``--profile`` adds a py-spy profile of
each variant (where kopf spends its share).

A variant is a set of the tunings in ``runtime/kopf_tuning.py`` (``TUNINGS``):
``baseline`` has none (kopf as before this tuning), ``tuned`` has all (what the operator
ships), a single tuning's name has only that one, and ``tuned+NAME`` adds one of
``CANDIDATES`` (kopf settings measured but not shipped; ``uvloop`` needs it installed).
A pending pod is created before each worker starts, for kopf's listing to deliver.
Variants alternate within each round (ABBA...) so that drift in the machine's load
falls on all of them; ratios are against the baseline of the same run. Only CPU per
event is reported, never wall-clock claims.

The cluster is the benchmark's (``bench/env.py``: ``BENCH_PORT_BASE``,
``BENCH_CLUSTER_DIR``), brought up with 2 nodes if it is not running; ``--keep-cluster``
leaves it up. Results: ``bench/results/kopf-cost.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

from bench import env as env_mod
from bench import profiling
from bench.kube import ApiError, Kube

NAMESPACE = "kopf-cost"
SCHEDULER = "metricsched"  # the worker's scheduler name: its pods are "ours" and pending
PHASES = ("create", "update", "delete")

# Candidate kopf settings measured on top of the shipped ones (``tuned+NAME``), not in the
# operator unless they win: each a public setting of kopf 1.45 (``OperatorSettings``).
CANDIDATES: dict[str, Any] = {
    # keep a pod's worker (and its last body) between its events instead of 0.1 s
    "idle-1": lambda s: setattr(s.queueing, "idle_timeout", 1.0),
    "idle-5": lambda s: setattr(s.queueing, "idle_timeout", 5.0),
    # WatchList (sendInitialEvents) instead of a paged LIST: the listing, not the events
    "initial-streaming": lambda s: setattr(s.watching, "initial_streaming", True),
    # at most this many per-object workers at once (kopf's default: unlimited)
    "worker-limit-16": lambda s: setattr(s.queueing, "worker_limit", 16),
    # the event loop: uvloop instead of asyncio's (handled in ``main``)
    "uvloop": lambda s: None,
}
_SETTLE_S = 1.5  # past kopf's queueing.idle_timeout (1 s): per-object workers exit in the phase


# --- the worker (one variant, one process) --------------------------------------------


def _emit(out: IO[str], record: dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _worker(kubeconfig: str, tunings: list[str]) -> None:
    from metricsched import config as config_mod  # noqa: PLC0415 (worker-only imports)
    from metricsched.edges import kube  # noqa: PLC0415
    from metricsched.runtime import kopf_tuning  # noqa: PLC0415
    from metricsched.runtime import operator as operator_mod  # noqa: PLC0415

    unknown = set(tunings) - set(kopf_tuning.TUNINGS) - set(CANDIDATES)
    if unknown:
        raise SystemExit(f"unknown tunings: {sorted(unknown)}")

    def configure(settings: Any) -> None:
        for name in tunings:
            (kopf_tuning.TUNINGS.get(name) or CANDIDATES[name])(settings)

    kopf_tuning.configure = configure  # the operator's start-up handler calls this
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    cfg = config_mod.from_args(
        parser.parse_args(
            ["--kubeconfig", kubeconfig, "--scheduler-name", SCHEDULER, "--log-level", "warning"]
        ),
        env={},
    )
    api_client = kube.load_api_client(kubeconfig, pool_size=8)
    op = operator_mod.Operator(cfg, api_client)
    await op.load_once()
    ingest = op.ingest
    counts = {"events": 0, "handler_s": 0.0, "gc_s": 0.0, "gc2": 0}
    gc_started = [0.0]

    def gc_clock(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_started[0] = time.thread_time()
        else:
            counts["gc_s"] += time.thread_time() - gc_started[0]
            counts["gc2"] += info["generation"] == 2

    gc.callbacks.append(gc_clock)
    on_pod = ingest.on_pending_pod  # kopf's pod handler calls it (runtime/kopf_source.py)

    def counting(event_type: str | None, body: Any) -> None:
        t0 = time.thread_time()
        on_pod(event_type, body)
        counts["handler_s"] += time.thread_time() - t0
        counts["events"] += 1

    # the registry looks it up per event
    ingest.on_pending_pod = counting  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(op.kopf.run(stop))
    await asyncio.wait_for(ingest.delivering.wait(), timeout=60)
    await asyncio.sleep(_SETTLE_S)

    def mark() -> dict[str, Any]:
        return {**counts, "cpu_s": _cpu_s(), "t": time.monotonic()}

    loop = asyncio.get_running_loop()
    _emit(sys.stdout, {"ready": True, "pid": os.getpid(), **mark()})
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not line or line[0] == "stop":
            break
        if line[0] == "wait":  # wait EVENTS TIMEOUT: until on_pod has seen EVENTS events
            # ... and then none for _SETTLE_S (a deleted pod may bring two events).
            target, deadline = int(line[1]), time.monotonic() + float(line[2])
            while counts["events"] < target and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            seen = -1
            while seen != counts["events"]:
                seen = int(counts["events"])
                await asyncio.sleep(_SETTLE_S)
        elif line[0] == "idle":  # idle SECONDS
            await asyncio.sleep(float(line[1]))
        _emit(sys.stdout, mark())
    stop.set()
    await asyncio.wait_for(task, timeout=30)


# --- the driver ----------------------------------------------------------------------


def _pod(name: str, i: int) -> dict[str, Any]:
    """A pod shaped like a Deployment's (two containers, env, probes, volumes, affinity)."""
    app = f"svc-{i % 7}"
    container = {
        "image": "registry.invalid/shop/web:1.42.0",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(6)],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": app, "pod-template-hash": "7d4b9c8f5", "tier": "web"},
            "annotations": {"example.com/owner": "team-shop", "example.com/revision": "42"},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {**container, "name": "app"},
                {**container, "name": "sidecar", "ports": []},
            ],
            "volumes": [{"name": "config", "configMap": {"name": f"{app}-config"}}],
            "tolerations": [{"key": "example.com/spot", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["zone-0"]}
                                ]
                            },
                        }
                    ]
                }
            },
        },
    }


async def _each(n: int, fn: Any, *, in_flight: int = 16) -> None:
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            for attempt in range(6):
                try:
                    await fn(i)
                    return
                except ApiError as e:
                    if e.status not in (409, 429, 500, 503, 504) or attempt == 5:
                        raise
                    if e.status == 409:
                        return
                await asyncio.sleep(0.2 * (attempt + 1))

    await asyncio.gather(*(one(i) for i in range(n)))


async def _prepare_namespace(kube: Kube) -> None:
    try:
        await kube.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods")
    except ApiError as e:
        if e.status != 404:
            raise
    try:
        await kube.request(
            "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}, "kind": "Namespace"}
        )
    except ApiError as e:
        if e.status != 409:
            raise
    for _ in range(100):  # pods need the namespace's default ServiceAccount (KCM makes it)
        try:
            await kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            return
        except ApiError as e:
            if e.status != 404:
                raise
        await asyncio.sleep(0.2)
    raise RuntimeError(f"namespace {NAMESPACE} got no default ServiceAccount")


async def _drive(kube: Kube, phase: str, pods: int) -> None:
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"
    if phase == "create":
        await _each(pods, lambda i: kube.request("POST", base, _pod(f"kc-{i:05d}", i)))
    elif phase == "update":
        patch = {"metadata": {"labels": {"example.com/touched": "yes"}}}
        await _each(
            pods,
            lambda i: kube.request(
                "PATCH",
                f"{base}/kc-{i:05d}",
                patch,
                content_type="application/merge-patch+json",
            ),
        )
    else:
        await kube.request("DELETE", base, timeout_s=120.0)


class _Worker:
    def __init__(self, tunings: list[str], kubeconfig: Path, log: Path) -> None:
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.kopf_cost",
                "worker",
                "--kubeconfig",
                str(kubeconfig),
                "--tunings",
                ",".join(tunings),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=env_mod.ROOT,
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"kopf-cost worker died; see {self._log.name}")
        record: dict[str, Any] = json.loads(line)
        return record

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _phase_cost(
    before: dict[str, Any], after: dict[str, Any], idle_cpu_per_s: float
) -> dict[str, Any]:
    events = after["events"] - before["events"]
    seconds = after["t"] - before["t"]
    cpu = after["cpu_s"] - before["cpu_s"] - idle_cpu_per_s * seconds
    handler = after["handler_s"] - before["handler_s"]
    collecting = after["gc_s"] - before["gc_s"]
    return {
        "events": events,
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu, 4),
        "us_per_event": round(1e6 * cpu / events, 1) if events else None,
        "handler_us_per_event": round(1e6 * handler / events, 1) if events else None,
        "gc_us_per_event": round(1e6 * collecting / events, 1) if events else None,
        "gen2_collections": after["gc2"] - before["gc2"],
    }


# Where a profiled worker's samples go (first match of a stack wins, innermost first).
_PROFILE_BUCKETS: list[tuple[str, re.Pattern[str]]] = [
    ("deepcopy (kopf diff-base essence)", re.compile(r"^deepcopy |^_deepcopy_|copy\.py")),
    ("JSON decoding", re.compile(r"json/|orjson|^loads ")),
    ("metricsched handlers (parse, cache, queue)", re.compile(r"metricsched/")),
    ("kopf", re.compile(r"kopf/")),
    ("aiohttp / ssl / asyncio", re.compile(r"aiohttp/|ssl\.py|asyncio/|selectors\.py")),
    ("logging", re.compile(r"logging/")),
]


def _profile_buckets(raw: Path) -> dict[str, float]:
    buckets: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [f for f in stack.split(";") if f]
        count = int(count_text)
        total += count
        for frame in reversed(frames):
            name = next((n for n, rx in _PROFILE_BUCKETS if rx.search(frame)), None)
            if name is not None:
                buckets[name] += count
                break
        else:
            buckets["other"] += count
    return {k: round(100 * v / total, 1) for k, v in buckets.most_common()} if total else {}


async def _run_variant(
    name: str,
    tunings: list[str],
    *,
    kube: Kube,
    cluster: env_mod.ClusterEnv,
    pods: int,
    workdir: Path,
    profile: bool,
) -> dict[str, Any]:
    await _prepare_namespace(kube)
    # One pending pod for kopf's listing to deliver: the worker starts measuring once an
    # event has arrived (``Ingest.delivering``), and an empty cluster sends none.
    await kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", _pod("kc-sentinel", 0))
    worker = _Worker(tunings, cluster.kubeconfig, workdir / f"worker-{name}.log")
    profiler = None
    try:
        idle_from = worker.ask("mark")
        idle_to = worker.ask("idle 3")
        idle_rate = (idle_to["cpu_s"] - idle_from["cpu_s"]) / (idle_to["t"] - idle_from["t"])
        if profile:
            profiler = profiling.Profiler(
                worker.ready["pid"], workdir / f"profile-{name}.txt", rate=200
            )
        phases: dict[str, Any] = {}
        mark = idle_to
        for phase in PHASES:
            await _drive(kube, phase, pods)
            after = await asyncio.to_thread(worker.ask, f"wait {mark['events'] + pods} 120")
            phases[phase] = _phase_cost(mark, after, idle_rate)
            mark = after
        total = _phase_cost(idle_to, mark, idle_rate)
        record: dict[str, Any] = {
            "variant": name,
            "tunings": tunings,
            "idle_cpu_per_s": round(idle_rate, 4),
            "phases": phases,
            "total": total,
        }
        if profiler is not None:
            raw, _ = profiler.stop()
            profiler = None
            if raw is not None:
                record["profile_pct"] = _profile_buckets(raw)
        return record
    finally:
        if profiler is not None:
            profiler.stop()
        worker.close()


def _variants(names: list[str]) -> dict[str, list[str]]:
    from metricsched.runtime import kopf_tuning  # noqa: PLC0415

    out: dict[str, list[str]] = {}
    for name in names:
        if name == "baseline":
            out[name] = []
        elif name == "tuned":
            out[name] = list(kopf_tuning.TUNINGS)
        elif name in kopf_tuning.TUNINGS:
            out[name] = [name]
        elif name.startswith("tuned+") and name[len("tuned+") :] in CANDIDATES:
            out[name] = [*kopf_tuning.TUNINGS, name[len("tuned+") :]]
        else:
            raise SystemExit(
                f"unknown variant {name!r}: baseline, tuned, one of {list(kopf_tuning.TUNINGS)}"
                f" or tuned+ one of {list(CANDIDATES)}"
            )
    return out


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r["variant"], []).append(r)
    out: dict[str, Any] = {}
    for name, rs in by.items():
        row: dict[str, Any] = {}
        for phase in (*PHASES, "total"):
            per = [(r["total"] if phase == "total" else r["phases"][phase]) for r in rs]
            row[phase] = {
                "us_per_event": round(statistics.median(p["us_per_event"] for p in per), 1),
                "handler_us_per_event": round(
                    statistics.median(p["handler_us_per_event"] for p in per), 1
                ),
            }
        out[name] = row
    base = out.get("baseline", {}).get("total", {}).get("us_per_event")
    for row in out.values():
        row["ratio_vs_baseline"] = round(row["total"]["us_per_event"] / base, 3) if base else None
    return out


def _print(summary: dict[str, Any], pods: int, rounds: int) -> None:
    print(
        f"\nkopf cost per pod event ({pods} pods x create/update/delete, {rounds} round(s); "
        "CPU µs per event, median; in brackets: our handlers' share)"
    )
    print(
        f"{'variant':<14}"
        + "".join(f"{p:>18}" for p in (*PHASES, "total"))
        + f"{'vs baseline':>13}"
    )
    for name, row in summary.items():
        cells = "".join(
            f"{row[p]['us_per_event']:>10.0f} [{row[p]['handler_us_per_event']:>4.0f}]"
            for p in (*PHASES, "total")
        )
        ratio = row["ratio_vs_baseline"]
        print(f"{name:<14}{cells}{(f'{ratio:.2f}' if ratio else '-'):>13}")


def cmd_kopf(args: argparse.Namespace) -> int:
    variants = _variants(args.variants.split(","))
    env_mod.cluster_cmd("up", "--nodes", "2")
    cluster = env_mod.load()
    subprocess.run(  # the operator's initial LIST needs its CRD
        [
            str(cluster.tools_bin / "kubectl"),
            f"--kubeconfig={cluster.kubeconfig}",
            "apply",
            "-f",
            str(env_mod.ROOT / "crds"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    out = Path(args.out) if args.out else env_mod.RESULTS / "kopf-cost.json"
    workdir = Path(tempfile.mkdtemp(prefix="kopf-cost-"))
    import kopf  # noqa: PLC0415

    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "argv": sys.argv[1:],
        "pods": args.pods,
        "rounds": args.rounds,
        "kopf": getattr(kopf, "__version__", "unknown"),
        "load_average_start": env_mod.load_average(),
        "code": env_mod.code_fingerprint(),
        "runs": [],
    }

    async def run() -> None:
        kube = Kube(cluster.server, cluster.token, cluster.ca_file)
        try:
            names = list(variants)
            for r in range(args.rounds):
                order = names if r % 2 == 0 else names[::-1]
                for name in order:
                    record = await _run_variant(
                        name,
                        variants[name],
                        kube=kube,
                        cluster=cluster,
                        pods=args.pods,
                        workdir=workdir,
                        profile=args.profile and r == 0,
                    )
                    record["round"] = r
                    results["runs"].append(record)
                    print(f"[kopf-cost] round {r} {name}: {record['total']}", flush=True)
                    if "profile_pct" in record:
                        print(f"[kopf-cost]   profile: {record['profile_pct']}", flush=True)
        finally:
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
            await kube.close()

    try:
        asyncio.run(run())
    finally:
        if not args.keep_cluster:
            env_mod.cluster_cmd("down")
    results["load_average_end"] = env_mod.load_average()
    results["summary"] = _summary(results["runs"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    _print(results["summary"], args.pods, args.rounds)
    print(f"[kopf-cost] results: {out}; worker logs and profiles: {workdir}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=1000, help="pods per phase (default 1000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of all variants (ABBA)")
    parser.add_argument(
        "--variants",
        default="baseline,tuned",
        help="comma-separated: baseline, tuned, one tuning of runtime/kopf_tuning.TUNINGS,"
        " or tuned+CANDIDATE (one of CANDIDATES: kopf settings not shipped)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy each variant (round 0)")
    parser.add_argument("--out", help="results file (default: bench/results/kopf-cost.json)")
    parser.add_argument("--keep-cluster", action="store_true")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kopf_cost")
    sub = parser.add_subparsers(dest="cmd", required=True)
    worker = sub.add_parser("worker", help="(internal) one variant's operator watches")
    worker.add_argument("--kubeconfig", required=True)
    worker.add_argument("--tunings", default="")
    args = parser.parse_args()
    tunings = [t for t in args.tunings.split(",") if t]
    if "uvloop" in tunings:
        # Not a dependency: installed by hand to measure it (``pip install uvloop``).
        uvloop = importlib.import_module("uvloop")
        uvloop.run(_worker(args.kubeconfig, tunings))
    else:
        asyncio.run(_worker(args.kubeconfig, tunings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
