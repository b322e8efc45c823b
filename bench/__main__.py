"""Command line of the benchmark.

    python -m bench run [--plan full|smoke] [--nodes 100,1000] [--systems metricsched,null]
                        [--repeats 3] [--cpu-share pin|quota|none]
    python -m bench cycle [--into FILE] [--sizes 1000,5000]  # cycle cost vs nodes (no cluster)
    python -m bench report [FILE]    # plots and bench/README.md from a results file
    python -m bench kopf [--pods N]  # kopf's CPU per pod event: baseline vs tuned settings
    python -m bench memory [--shape realistic|bench]  # what holds RSS with a full cache
    python -m bench writes [--pods N]  # CPU per Binding + Event: threads vs the event loop
    python -m bench quality [--plan full|smoke] [--pipeline realistic|gauge] [--seeds 1,2,3]
    python -m bench quality-report [FILE] [--publish]  # placement-quality tables and plots
    python -m bench contention [--seeds 1,2,3]  # the capacity race beside kube-scheduler

``run`` brings the benchmark's own control plane up (``BENCH_PORT_BASE``, ``.cluster-bench/``),
grows it to each node count in turn, runs the trials, writes the results JSON under
``bench/results/`` after every trial, then renders the report and stops the cluster
(``--keep-cluster`` leaves it running). It exits non-zero only when the harness itself
fails, never because a scheduler was slow.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import (
    contention,
    cycle_cost,
    fairness,
    kopf_cost,
    memory_cost,
    report,
    systems,
    trial,
    write_cost,
)
from bench import env as env_mod
from bench.kube import Kube
from bench.quality import runner as quality_runner


@dataclasses.dataclass(frozen=True)
class Plan:
    nodes: tuple[int, ...]
    backlog_pods: int
    backlog_systems: tuple[str, ...]
    steady: tuple[tuple[int, float], ...]  # (nodes, arrivals per second) of each S3 trial
    steady_s: float
    steady_systems: tuple[str, ...]
    profile_nodes: int | None  # an extra, profiled metricsched backlog trial at this size
    profile_pods: int
    cycle_sizes: tuple[int, ...]
    timeout_s: float
    # Smaller backlogs at large sizes, (nodes, pods): keeps `make bench` near its budget.
    backlog_pods_at: tuple[tuple[int, int], ...] = ()
    # Memory trial (S4): at this size, a backlog of memory_pods pods on top of
    # memory_bound - memory_pods pods already bound (created with spec.nodeName set).
    memory_nodes: int | None = None
    memory_bound: int = 0
    memory_pods: int = 0
    memory_systems: tuple[str, ...] = ()
    # Backlog and steady trials per cell, interleaved: the systems' order reverses on every
    # other repeat (A B C, C B A, A B C: ABBA-like), so drift in the box favours nobody.
    repeats: int = 1
    # Takeover (two metricsched replicas, the leader killed) at these sizes: takeover_pods
    # created after the kill on top of takeover_bound - takeover_pods pods already bound.
    takeover_nodes: tuple[int, ...] = ()
    takeover_bound: int = 0
    takeover_pods: int = 0

    def backlog_size(self, n: int) -> int:
        return dict(self.backlog_pods_at).get(n, self.backlog_pods)


ALL = ("null", "metricsched", "kube-default", "kube-open", "kube-open-all")
PLANS = {
    "full": Plan(
        nodes=(100, 1000, 2000, 5000),  # 5000 fits with --quiet-nodes (bench/method.md)
        backlog_pods=5000,
        backlog_pods_at=((5000, 2000),),
        backlog_systems=ALL,
        steady=((1000, 20.0), (5000, 50.0)),
        steady_s=60.0,
        steady_systems=ALL,
        profile_nodes=1000,
        profile_pods=3000,
        cycle_sizes=cycle_cost.SIZES,
        timeout_s=300.0,
        memory_nodes=5000,
        memory_bound=10_000,
        memory_pods=1000,
        memory_systems=("metricsched", "kube-open"),
        repeats=3,
        takeover_nodes=(1000, 5000),
        takeover_bound=10_000,
        takeover_pods=1000,
    ),
    "smoke": Plan(
        nodes=(100,),
        backlog_pods=300,
        backlog_systems=("null", "metricsched", "kube-open", "kube-open-all"),
        steady=((100, 20.0),),
        steady_s=10.0,
        steady_systems=("null", "metricsched"),
        profile_nodes=100,
        profile_pods=300,
        cycle_sizes=(100, 500),
        timeout_s=90.0,
        repeats=2,
        takeover_nodes=(100,),
        takeover_bound=300,
        takeover_pods=100,
    ),
}


def interleaved(names: tuple[str, ...], repeats: int) -> list[tuple[int, str]]:
    """(repeat, system) in run order: forward on even repeats, backward on odd ones."""
    order: list[tuple[int, str]] = []
    for r in range(repeats):
        order += [(r, s) for s in (names if r % 2 == 0 else tuple(reversed(names)))]
    return order


def _backlog_systems(plan: Plan, only: set[str] | None) -> tuple[str, ...]:
    """The plan's backlog systems that ``--systems`` keeps, then the opt-in ones it names
    (the null binder's concurrency sweep, metricsched with an Event per pod)."""
    chosen = tuple(s for s in plan.backlog_systems if only is None or s in only)
    return chosen + tuple(s for s in systems.OPT_IN if only is not None and s in only)


def _specs(
    plan: Plan,
    n: int,
    only: set[str] | None,
    operator_path: str | None = None,
    placement: fairness.Placement = fairness.UNPINNED,
) -> list[trial.TrialSpec]:
    def wanted(name: str) -> bool:
        return only is None or name in only

    common = {"operator_path": operator_path, "placement": placement}
    specs = [
        trial.TrialSpec(
            "backlog",
            systems.SYSTEMS[s],
            n,
            pods=plan.backlog_size(n),
            timeout_s=plan.timeout_s,
            repeat=r,
            **common,  # type: ignore[arg-type]
        )
        for r, s in interleaved(_backlog_systems(plan, only), plan.repeats)
    ]
    for size, rate in plan.steady:
        if size != n:
            continue
        steady = tuple(s for s in plan.steady_systems if wanted(s))
        specs += [
            trial.TrialSpec(
                "steady",
                systems.SYSTEMS[s],
                n,
                rate=rate,
                duration_s=plan.steady_s,
                timeout_s=60.0,
                repeat=r,
                **common,  # type: ignore[arg-type]
            )
            for r, s in interleaved(steady, plan.repeats)
        ]
    if n == plan.profile_nodes and wanted("metricsched") and wanted("profile"):
        specs.append(
            trial.TrialSpec(
                "profile",
                systems.SYSTEMS["metricsched"],
                n,
                pods=plan.profile_pods,
                timeout_s=plan.timeout_s,
                profile=True,
                **common,  # type: ignore[arg-type]
            )
        )
    if n == plan.memory_nodes:
        specs += [
            trial.TrialSpec(
                "memory",
                systems.SYSTEMS[s],
                n,
                pods=plan.memory_pods,
                bound_before=plan.memory_bound - plan.memory_pods,
                timeout_s=plan.timeout_s,
                **common,  # type: ignore[arg-type]
            )
            for s in plan.memory_systems
            if wanted(s)
        ]
    if n in plan.takeover_nodes and wanted("metricsched"):
        specs.append(
            trial.TrialSpec(
                "takeover",
                systems.SYSTEMS["metricsched"],
                n,
                pods=plan.takeover_pods,
                bound_before=plan.takeover_bound - plan.takeover_pods,
                timeout_s=plan.timeout_s,
                **common,  # type: ignore[arg-type]
            )
        )
    return specs


def _install_crd(cluster: env_mod.ClusterEnv) -> None:
    env_mod.install_crd(cluster)


def _save(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


def _merge(results: dict[str, Any], record: dict[str, Any]) -> None:
    """Replace an earlier record of the same trial (re-runs), else append."""

    def key(r: dict[str, Any]) -> tuple[str, str, int, int]:
        return (r["scenario"], r["system"], r["nodes"], r.get("repeat", 0))

    results["trials"] = [r for r in results["trials"] if key(r) != key(record)] + [record]


async def _run_size(
    plan: Plan,
    n: int,
    *,
    only: set[str] | None,
    results: dict[str, Any],
    out: Path,
    operator_path: str | None,
    scenarios: set[str] | None,
    placement: fairness.Placement,
) -> None:
    t0 = time.monotonic()
    try:
        env_mod.cluster_cmd("up", "--nodes", str(n), "--quiet-nodes")
        # A cluster kept from an earlier run was started unpinned: move it too.
        fairness.pin_processes(placement, fairness.cluster_pids(env_mod.STATE))
    except subprocess.CalledProcessError:
        # Too many nodes for this machine (kwok cannot keep them Ready): say so, go on.
        note = f"hack/cluster.py up --nodes {n} failed after {time.monotonic() - t0:.0f}s"
        results.setdefault("skipped_sizes", {})[str(n)] = note
        _save(out, results)
        print(f"[bench] skipping {n} nodes: {note}", flush=True)
        return
    cluster = env_mod.load()
    _install_crd(cluster)
    kube = Kube(cluster.server, cluster.token, cluster.ca_file)
    filler = 0
    try:
        ready = len(await kube.list_nodes())
        results.setdefault("cluster_up_s", {})[str(n)] = round(time.monotonic() - t0, 1)
        print(f"[bench] {ready} nodes ready ({time.monotonic() - t0:.0f}s)", flush=True)
        specs = [
            s
            for s in _specs(plan, n, only, operator_path, placement)
            if not scenarios or s.scenario in scenarios
        ]
        for spec in specs:
            # The memory trials share one namespace of pods bound before the first starts.
            if spec.bound_before > filler:
                await trial.create_bound_pods(
                    kube, trial.FILLER_NAMESPACE, spec.bound_before, start=filler
                )
                filler = spec.bound_before
            workdir = env_mod.RESULTS / "work"
            record = await trial.run(spec, cluster, kube, workdir)
            _merge(results, record)
            _save(out, results)
    finally:
        if filler:
            await kube.delete_namespace(trial.FILLER_NAMESPACE, wait_s=600.0)
        await kube.close()


def cmd_run(args: argparse.Namespace) -> int:
    plan = PLANS[args.plan]
    if args.nodes:
        plan = dataclasses.replace(plan, nodes=tuple(int(x) for x in args.nodes.split(",")))
    if args.pods:
        plan = dataclasses.replace(plan, backlog_pods=args.pods, backlog_pods_at=())
    if args.repeats:
        plan = dataclasses.replace(plan, repeats=args.repeats)
    placement = fairness.choose(
        args.cpu_share, scheduler_cpu=args.scheduler_cpu, quota_cores=args.cpu_quota
    )
    fairness.pin_harness(placement)  # before any thread or child: they inherit it
    print(f"[bench] CPU share: {placement.mode}: {placement.note}", flush=True)
    only = set(args.systems.split(",")) if args.systems else None
    out = Path(args.out) if args.out else env_mod.RESULTS / f"latest-{args.plan}.json"
    results: dict[str, Any] = {"plan": args.plan, "trials": []}
    if args.append and out.exists():
        results = json.loads(out.read_text())
    results["plan_detail"] = dataclasses.asdict(plan)
    results["started"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results.setdefault("runs", []).append({"started": results["started"], "argv": sys.argv[1:]})
    results["machine"] = env_mod.machine()
    results["cpu_share"] = placement.describe()
    try:
        if not args.no_cycle:
            results["cycle_cost"] = cycle_cost.measure(plan.cycle_sizes)
            _save(out, results)
        for n in plan.nodes:
            asyncio.run(
                _run_size(
                    plan,
                    n,
                    only=only,
                    results=results,
                    out=out,
                    operator_path=args.operator_path,
                    scenarios=set(args.scenarios.split(",")) if args.scenarios else None,
                    placement=placement,
                )
            )
        results["machine"]["load_average_end"] = env_mod.load_average()
        results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        _save(out, results)
    finally:
        if not args.keep_cluster:
            env_mod.cluster_cmd("down")
        fairness.remove(placement)
    report.render(out, publish=args.plan == "full" and not args.out)
    print(f"[bench] results: {out}", flush=True)
    return 0


def cmd_cycle(args: argparse.Namespace) -> int:
    sizes = tuple(int(n) for n in args.sizes.split(",")) if args.sizes else cycle_cost.SIZES
    rows = cycle_cost.measure(sizes)
    if args.into:
        path = Path(args.into)
        results = json.loads(path.read_text()) if path.exists() else {"trials": []}
        results["cycle_cost"] = rows
        _save(path, results)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    path = Path(args.file) if args.file else env_mod.RESULTS / "latest-full.json"
    report.render(path, publish=args.publish)
    return 0


def cmd_quality_report(args: argparse.Namespace) -> int:
    from bench.quality import report as quality_report  # noqa: PLC0415 (matplotlib)

    path = Path(args.file) if args.file else quality_runner.results_path("full")
    quality_report.render(path, publish=args.publish)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run the benchmark on its own local control plane")
    run.add_argument("--plan", choices=sorted(PLANS), default="full")
    run.add_argument("--nodes", help="comma-separated node counts (default: the plan's)")
    run.add_argument("--pods", type=int, help="backlog size (default: the plan's)")
    run.add_argument(
        "--systems",
        help=f"subset of {','.join(ALL)},profile; opt-in (backlog): {','.join(systems.OPT_IN)}",
    )
    run.add_argument("--scenarios", help="subset of backlog,steady,profile,memory,takeover")
    run.add_argument(
        "--repeats", type=int, help="backlog and steady trials per cell, interleaved (plan's)"
    )
    run.add_argument(
        "--cpu-share",
        choices=fairness.MODES,
        default="pin",
        help="pin: the scheduler on a CPU of its own, the rest on the others (default); "
        "quota: a CPU cgroup of --cpu-quota cores; none: opt out",
    )
    run.add_argument("--scheduler-cpu", type=int, help="pin: the scheduler's CPU (default: last)")
    run.add_argument("--cpu-quota", type=float, default=1.0, help="quota: cores (default 1.0)")
    run.add_argument("--out", help="results file (default: bench/results/latest-PLAN.json)")
    run.add_argument("--append", action="store_true", help="merge into an existing results file")
    run.add_argument("--keep-cluster", action="store_true")
    run.add_argument(
        "--operator-path", help="PYTHONPATH of a scratch copy of the operator (experiments)"
    )
    run.add_argument("--no-cycle", action="store_true", help="skip the cycle-cost measurement")
    cyc = sub.add_parser("cycle", help="cycle cost vs node count (no cluster)")
    cyc.add_argument("--into", help="store the rows in this results file")
    cyc.add_argument("--sizes", help="comma-separated node counts (default: 100 to 5000)")
    rep = sub.add_parser("report", help="render plots and README from a results file")
    rep.add_argument("file", nargs="?")
    rep.add_argument("--publish", action="store_true", help="write bench/README.md and bench/*.png")
    kopf = sub.add_parser(
        "kopf", help="kopf's CPU per pod event, baseline vs tuned (bench/kopf_cost.py)"
    )
    kopf_cost.add_arguments(kopf)
    memory = sub.add_parser(
        "memory", help="RSS and bytes per node and pod of each structure (bench/memory_cost.py)"
    )
    memory_cost.add_arguments(memory)
    writes = sub.add_parser(
        "writes", help="CPU per Binding + Event, threads vs the loop (bench/write_cost.py)"
    )
    write_cost.add_arguments(writes)
    quality = sub.add_parser(
        "quality", help="placement quality vs kube-scheduler and random (bench/quality/)"
    )
    quality_runner.add_arguments(quality)
    qrep = sub.add_parser("quality-report", help="render the placement-quality section")
    qrep.add_argument("file", nargs="?")
    qrep.add_argument("--publish", action="store_true")
    race = sub.add_parser(
        "contention", help="kube-scheduler and metricsched on shared nodes (bench/contention.py)"
    )
    contention.add_arguments(race)
    args = parser.parse_args()
    handlers = {
        "run": cmd_run,
        "cycle": cmd_cycle,
        "report": cmd_report,
        "kopf": kopf_cost.cmd_kopf,
        "memory": memory_cost.cmd_memory,
        "writes": write_cost.cmd_writes,
        "quality": quality_runner.cmd_quality,
        "quality-report": cmd_quality_report,
        "contention": contention.cmd_contention,
    }
    return handlers[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
