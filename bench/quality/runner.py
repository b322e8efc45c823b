"""Plays the quality scenarios on the benchmark's control plane, one system at a time.

    python -m bench quality [--plan full|smoke] [--pipeline realistic|gauge]
        [--scenarios a,b,c,d,e] [--systems ...] [--seeds 1,2,3]

Per plan: bring the benchmark cluster up (ports 44xxx, ``.cluster-bench/``, the load
model scraped and the rules evaluated at the pipeline's interval, bench/quality/systems.py
``PIPELINES``), then for each seed make its modelled nodes, and for each scenario and each
system: return to the starting state (no scenario pods, every node at its annotated
background, Prometheus's policy metric showing it), start the system, play the seeded
events (scenario d: create its Deployments, then scale them), stop the system and read
the load model's record for the trial's window. The rebalance pair plays scenarios (c) and
(e) only (e when asked for: a plan plays a-d unless told), its own pods as 1-replica
ReplicaSets under PodDisruptionBudgets (bench/quality/owned.py), and also reports
evictions, moves, budget violations and workloads moved beyond their limit. Then
the backlog pair (metricsched's default vs estimate off, binds/s). Results go to
``bench/results/quality-PLAN[-gauge].json`` after every trial; the report
(bench/quality/report.py) renders tables (median and range over the seeds) and plots.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import env as env_mod
from bench import stats, trial
from bench import systems as bench_systems
from bench.kube import GROUP, PLURAL, VERSION, ApiError, Kube
from bench.quality import loadmodel, metrics, owned, scenarios
from bench.quality import systems as qsys
from metricsched.core import decision_record

WORK = env_mod.RESULTS / "work" / "quality"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{namespace}/deployments"


def results_path(plan: str, pipeline: str = "realistic") -> Path:
    suffix = "" if pipeline == "realistic" else f"-{pipeline}"
    return env_mod.RESULTS / f"quality-{plan}{suffix}.json"


def _save(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


def _merge(rows: list[dict[str, Any]], row: dict[str, Any], *keys: str) -> list[dict[str, Any]]:
    return [r for r in rows if any(r.get(k) != row.get(k) for k in keys)] + [row]


# --- nodes and policies ------------------------------------------------------------------


async def ensure_nodes(kube: Kube, specs: tuple[scenarios.NodeSpec, ...]) -> None:
    """Exactly the plan's modelled nodes, with the plan's backgrounds, all Ready."""
    wanted = {n.name: (i, n) for i, n in enumerate(specs)}
    label = scenarios.MODELLED_LABEL
    for node in await kube.list_nodes():
        name = node["metadata"]["name"]
        if (node["metadata"].get("labels") or {}).get(label) == "true" and name not in wanted:
            await kube.request("DELETE", f"/api/v1/nodes/{name}")
    existing = {n["metadata"]["name"]: n for n in await kube.list_nodes()}
    for name, (i, spec) in wanted.items():
        body = scenarios.node_body(spec, i)
        if name not in existing:
            await kube.request("POST", "/api/v1/nodes", body)
        elif existing[name]["status"]["allocatable"].get("cpu") != str(spec.cpu):
            await kube.request("DELETE", f"/api/v1/nodes/{name}")  # a size from another plan
            await asyncio.sleep(2.0)
            await kube.request("POST", "/api/v1/nodes", body)
        else:
            patch = {"metadata": {"annotations": body["metadata"]["annotations"]}}
            await kube.request(
                "PATCH", f"/api/v1/nodes/{name}", patch, content_type="application/merge-patch+json"
            )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = set(
            n["metadata"]["name"]
            for n in await kube.list_nodes()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        )
        if set(wanted) <= ready:
            return
        await asyncio.sleep(1.0)
    raise TimeoutError("modelled nodes not Ready after 120 s")


async def create_policy(
    kube: Kube,
    namespace: str,
    system: str,
    *,
    scenario: str,
    pipeline: qsys.Pipeline,
    threshold: float,
    margin: float | None = None,
) -> str:
    """Create the system's policy with strict field validation; return a note when the
    CRD has no ``estimate`` (estimate off is then the policy without the field; estimate
    on cannot run: raise)."""
    spec = qsys.policy(
        system, scenario=scenario, pipeline=pipeline, threshold=threshold, margin=margin
    )
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    params = {"fieldValidation": "Strict"}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "quality-cpu", "namespace": namespace},
        "spec": spec,
    }
    try:
        await kube.request("POST", path, body, params=params)
        return ""
    except ApiError as e:
        if "estimate" not in str(e) or system != qsys.NO_ESTIMATE:
            raise
    del spec["metrics"][0]["estimate"]
    await kube.request("POST", path, body, params=params)
    return "the CRD has no metrics[].estimate: policy without the field (burst penalty only)"


async def estimate_unsupported(kube: Kube) -> str:
    """Why the estimate systems cannot run here ("" when they can): the API server
    refuses (strict field validation) a policy with ``metrics[].estimate: {from:
    Measured}`` (a CRD from before issue 27)."""
    namespace = f"q-probe-{secrets.token_hex(2)}"
    await kube.create_namespace(namespace)
    try:
        await create_policy(
            kube,
            namespace,
            qsys.MEASURED,
            scenario="a",
            pipeline=qsys.PIPELINES["realistic"],
            threshold=qsys.THRESHOLD,
        )
        return ""
    except ApiError as e:
        return f"the CRD refuses metrics[].estimate ({str(e)[:160]})"
    finally:
        await kube.delete_namespace(namespace)


# --- one trial ---------------------------------------------------------------------------


class Tracker:
    """Watches the trial's namespace: when each event's pod was created (as the harness
    posted it, or as the watch first saw it: a Deployment's pods) and first bound, and
    what it uses; ends each event whose life has ended (life counts from its first bind):
    deletes its pod, or its ReplicaSet (``owned``; the ledger reads every pod event)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        lives: dict[str, float | None],
        *,
        owned_events: frozenset[str] = frozenset(),
    ) -> None:
        self.kube, self.namespace, self.lives = kube, namespace, lives
        self.owned_events = owned_events
        self.ledger = owned.Ledger()
        self.created: dict[str, float] = {}
        self.bound: dict[str, tuple[float, str]] = {}
        self.cpu: dict[str, float] = {}  # cores at full usage (its load-model annotation)
        self.decisions: dict[str, str] = {}  # pod name -> its metricsched.io/decision
        self.deleted: set[str] = set()

    async def watch(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        rv = str((await self.kube.request("GET", path))["metadata"]["resourceVersion"])
        while True:
            try:
                async for t, event in self.kube.watch(path, {"resourceVersion": rv}):
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.ledger.see(t, event["type"], obj)
                    name = owned.workload_of(obj)
                    node = (obj.get("spec") or {}).get("nodeName")
                    if name and event["type"] == "ADDED":
                        self.created.setdefault(name, t)
                        meta = obj.get("metadata") or {}
                        usage = (meta.get("annotations") or {}).get(scenarios.USAGE_CPU)
                        with contextlib.suppress(ValueError):
                            self.cpu.setdefault(name, float(str(usage or "0")))
                    if name and node and name not in self.bound and event["type"] != "DELETED":
                        self.bound[name] = (t, node)
                    meta = obj.get("metadata") or {}
                    decision = (meta.get("annotations") or {}).get(decision_record.ANNOTATION)
                    if node and decision:
                        self.decisions.setdefault(str(meta.get("name")), str(decision))
            except ApiError as e:
                if e.status != 410:
                    raise
                rv = str((await self.kube.request("GET", path))["metadata"]["resourceVersion"])

    async def reap(self) -> None:
        while True:
            now = time.time()
            for name, (t, _) in list(self.bound.items()):
                life = self.lives.get(name)
                if life is not None and name not in self.deleted and now >= t + life:
                    self.deleted.add(name)
                    if name in self.owned_events:
                        self.ledger.end(name)
                        path = f"/apis/apps/v1/namespaces/{self.namespace}/replicasets/{name}"
                        params = {"propagationPolicy": "Foreground"}
                    else:
                        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
                        params = {"gracePeriodSeconds": "0"}
                    with contextlib.suppress(ApiError):
                        await self.kube.request("DELETE", path, params=params)
            await asyncio.sleep(0.5)


async def _create(kube: Kube, namespace: str, body: dict[str, Any], tracker: Tracker) -> None:
    kind = "apis/apps/v1" if body["kind"] == "ReplicaSet" else "api/v1"
    path = f"/{kind}/namespaces/{namespace}/{body['kind'].lower()}s"
    for attempt in range(6):
        try:
            await kube.request("POST", path, body)
            tracker.created[body["metadata"]["name"]] = time.time()
            return
        except ApiError as e:
            if e.status == 409:
                return
            if e.status not in (429, 500, 503, 504) or attempt == 5:
                raise
        await asyncio.sleep(0.2 * (attempt + 1))


async def play(
    kube: Kube,
    model: loadmodel.LoadModel,
    sc: scenarios.Scenario,
    *,
    namespace: str,
    scheduler: str,
    tracker: Tracker,
    t0: float,
) -> None:
    """Send every event of ``sc`` at its time after ``t0``; return at ``t0 + duration``."""
    gate = asyncio.Semaphore(24)

    async def one(event: scenarios.PodEvent) -> None:
        await asyncio.sleep(max(0.0, t0 + event.at - time.time()))
        if event.name in tracker.owned_events:
            body = owned.replicaset_body(event, scheduler, t0=t0)
        else:
            body = scenarios.pod_body(event, scheduler, t0=t0)
        async with gate:
            await _create(kube, namespace, body, tracker)

    async def hot(spot: scenarios.HotSpot) -> None:
        await asyncio.sleep(max(0.0, t0 + spot.at - time.time()))
        await asyncio.to_thread(model.set_background, spot.node, spot.cpu)

    async def deploy(deployment: scenarios.Deployment) -> None:
        body = scenarios.deployment_body(deployment, scheduler)
        await kube.request("POST", DEPLOYMENTS.format(namespace=namespace), body)

    async def scale(step: scenarios.Scale) -> None:
        await asyncio.sleep(max(0.0, t0 + step.at - time.time()))
        path = DEPLOYMENTS.format(namespace=namespace) + f"/{step.deployment}/scale"
        await kube.request(
            "PATCH",
            path,
            {"spec": {"replicas": step.replicas}},
            content_type="application/merge-patch+json",
        )

    tasks = [asyncio.create_task(one(e)) for e in sc.pods]
    tasks += [asyncio.create_task(hot(h)) for h in sc.hotspots]
    tasks += [asyncio.create_task(deploy(d)) for d in sc.deployments]
    tasks += [asyncio.create_task(scale(step)) for step in sc.scales]
    await asyncio.gather(*tasks)
    await asyncio.sleep(max(0.0, t0 + sc.duration_s - time.time()))


async def warm_up(kube: Kube, namespace: str, scheduler: str, timeout: float = 120.0) -> float:
    """Bind one usage-free pod (the system is live), then delete it; seconds taken."""
    t = time.monotonic()
    body = scenarios.backlog_pod_body(0, scheduler)
    body["metadata"]["name"] = "warm-up"
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    path = f"/api/v1/namespaces/{namespace}/pods/warm-up"
    while not ((await kube.request("GET", path)).get("spec") or {}).get("nodeName"):
        if time.monotonic() - t > timeout:
            raise TimeoutError(f"warm-up pod not bound after {timeout:.0f}s")
        await asyncio.sleep(0.2)
    await kube.request("DELETE", path, params={"gracePeriodSeconds": "0"})
    return round(time.monotonic() - t, 2)


@dataclasses.dataclass
class Run:
    plan: scenarios.QualityPlan
    plan_name: str
    seed: int
    cluster: env_mod.ClusterEnv
    kube: Kube
    model: loadmodel.LoadModel
    nodes: tuple[scenarios.NodeSpec, ...]
    results: dict[str, Any]
    out: Path
    pipeline: qsys.Pipeline
    margin: float | None = None  # the rebalance system's margin, if not REBALANCE_SPEC's
    eviction_budget: int | None = None  # its --rebalance-eviction-budget (None: the default)

    @property
    def backgrounds(self) -> dict[str, float]:
        return {n.name: n.background for n in self.nodes}

    def system(self, system: str) -> bench_systems.System:
        """How ``system`` runs in this run: its catalogue entry, this seed, and for the
        rebalance system the eviction budget given."""
        spec = dataclasses.replace(qsys.catalogue(self.pipeline)[system], seed=self.seed)
        if system == qsys.REBALANCE and self.eviction_budget is not None:
            budget = f"--rebalance-eviction-budget={self.eviction_budget}"
            spec = dataclasses.replace(spec, extra_args=(*spec.extra_args, budget))
        return spec

    def process(self, system: str, tag: str) -> bench_systems.Process:
        spec = self.system(system)
        WORK.mkdir(parents=True, exist_ok=True)
        argv = bench_systems.command(spec, self.cluster, WORK)
        return bench_systems.Process(spec, argv, WORK / "logs" / f"{tag}.log")

    async def reset(self) -> float:
        for n in self.nodes:
            await asyncio.to_thread(self.model.clear_background, n.name)
        names = (
            {scenarios.instance(i): n.name for i, n in enumerate(self.nodes)}
            if self.pipeline.instance_label
            else None
        )
        # Minutes, not seconds: a scale-out's pods go with their namespace, and a rate
        # window then a scrape and a rule evaluation pass before the metric shows it.
        return await asyncio.to_thread(
            functools.partial(
                loadmodel.wait_settled,
                self.model,
                self.cluster.prometheus_url,
                self.backgrounds,
                query=self.pipeline.query,
                label=self.pipeline.node_label,
                names=names,
                timeout=240.0,
            )
        )

    async def scenario_trial(self, key: str, system: str) -> dict[str, Any]:
        sc = scenarios.scenario(key, plan=self.plan, seed=self.seed)
        sysdef = qsys.catalogue(self.pipeline)[system]
        namespace = f"q-{key}-{system[:14]}-{secrets.token_hex(2)}"
        record: dict[str, Any] = {
            "scenario": key,
            "system": system,
            "seed": self.seed,
            "label": sysdef.label,
        }
        record["settle_s"] = round(await self.reset(), 1)
        await self.kube.create_namespace(namespace)
        if qsys.is_metricsched(system):
            record["note"] = await create_policy(
                self.kube,
                namespace,
                system,
                scenario=key,
                pipeline=self.pipeline,
                threshold=qsys.THRESHOLD,
                margin=self.margin,
            )
            record["estimate"] = qsys.estimate(system, scenario=key, pipeline=self.pipeline)
            rebalance = qsys.policy(system, margin=self.margin).get("rebalance")
            if rebalance:
                record["policy_rebalance"] = rebalance
                record["eviction_budget"] = self.eviction_budget
        mine = frozenset(e.name for e in sc.pods if e.node is None)
        if qsys.owns_pods(system):
            for pdb in owned.budget_bodies():
                await self.kube.request(
                    "POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", pdb
                )
        proc = self.process(system, f"{key}-{system}")
        tracker = Tracker(
            self.kube,
            namespace,
            {e.name: e.life for e in sc.pods},
            owned_events=mine if qsys.owns_pods(system) else frozenset(),
        )
        try:
            record["warm_up_s"] = await warm_up(self.kube, namespace, sysdef.scheduler_name)
            if qsys.is_metricsched(system):
                await asyncio.sleep(self.pipeline.refresh_s + 1.0)  # one refresh after start-up
            offset = self.model.offset()
            t0 = time.time()
            watcher = asyncio.create_task(tracker.watch())
            reaper = asyncio.create_task(tracker.reap())
            await play(
                self.kube,
                self.model,
                sc,
                namespace=namespace,
                scheduler=sysdef.scheduler_name,
                tracker=tracker,
                t0=t0,
            )
            t1 = time.time()
            for task in (watcher, reaper):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ApiError):
                    await task
            if qsys.is_metricsched(system):
                record["rebalance_counters"] = await asyncio.to_thread(rebalance_counters)
        finally:
            record["scheduler_exited"] = not proc.alive()
            await asyncio.to_thread(proc.stop)
            record["pods_left_after_cleanup"] = await self.kube.delete_namespace(namespace)
            for h in sc.hotspots:
                await asyncio.to_thread(self.model.clear_background, h.node)
        await asyncio.sleep(1.5)  # the load model's last ticks of the window
        ticks, binds = metrics.parse(
            self.model.records(offset), t0=t0, t1=t1, nodes=[n.name for n in self.nodes]
        )
        other = {e.name for e in sc.pods if e.node is not None}
        # The system's pods: the scenario's own events, and whatever pods its
        # Deployments made (scenario d), as the watch saw them created.
        own = [n for n in tracker.created if n not in other and n != "warm-up"]
        waits = [tracker.bound[n][0] - tracker.created[n] for n in own if n in tracker.bound]
        cpu = {e.name: e.cpu for e in sc.pods} | tracker.cpu
        held = [
            metrics.Pending(
                tracker.created[n],
                tracker.bound[n][0] if n in tracker.bound else None,
                cpu.get(n, 0.0),
            )
            for n in own
        ]
        record.update(
            pods=scenarios.own_pods(sc),
            pods_other_scheduler=len(other),
            created=len(own),
            bound=sum(1 for n in own if n in tracker.bound),
            unplaced=sum(1 for n in own if n not in tracker.bound),
            wait_ms=stats.summary([w * 1000 for w in waits]),
            **metrics.pending(ticks, held, node_cpu={n.name: n.cpu for n in self.nodes}, t1=t1),
            hotspots=[dataclasses.asdict(h) for h in sc.hotspots],
            window_s=round(t1 - t0, 1),
            **metrics.summarise(
                ticks, binds, t0=t0, scheduler=sysdef.scheduler_name, burst_end=sc.burst_end_s
            ),
            overrun_binds=metrics.overrun_records(
                binds, scheduler=sysdef.scheduler_name, t0=t0, decisions=tracker.decisions
            ),
        )
        since = sc.heat_at_s
        if since is not None:
            specs = {n.name: n for n in self.nodes}
            record["after_hotspot" if sc.hotspots else "after_rise"] = {
                "since_s": since,
                **metrics.after_hotspot(
                    ticks,
                    since=t0 + since,
                    hot_nodes=[h.node for h in sc.hotspots],
                    floor=lambda n, t: scenarios.floor(sc, specs[n], t - t0),
                ),
            }
        if qsys.owns_pods(system):
            spec = qsys.REBALANCE_SPEC
            record["rebalance"] = tracker.ledger.figures(
                workload_interval_s=float(str(spec["workloadInterval"]).removesuffix("s")),
                max_per_workload=int(spec["maxPerWorkload"]),
            )
        return record

    async def backlog_trial(self, system: str, rep: int) -> dict[str, Any]:
        """A usage-free backlog with a threshold that holds nothing: binds/s."""
        sysdef = qsys.catalogue(self.pipeline)[system]
        namespace = f"q-bl-{system[:14]}-{secrets.token_hex(2)}"
        record: dict[str, Any] = {"system": system, "label": sysdef.label, "rep": rep}
        await self.kube.create_namespace(namespace)
        record["note"] = await create_policy(
            self.kube, namespace, system, scenario="a", pipeline=self.pipeline, threshold=100.0
        )
        count = self.plan.backlog_pods
        watcher = trial.Watcher(namespace, count, WORK)
        await watcher.wait_ready()
        gate = asyncio.Semaphore(24)

        async def one(i: int) -> None:
            async with gate:
                body = scenarios.backlog_pod_body(i, sysdef.scheduler_name)
                await self.kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)

        await asyncio.gather(*(one(i) for i in range(count)))
        proc = self.process(system, f"backlog-{system}-{rep}")
        try:
            record["complete"] = await watcher.wait_done(time.monotonic() + 180, proc)
        finally:
            await asyncio.to_thread(proc.stop)
            result = watcher.result()
            record["pods_left_after_cleanup"] = await self.kube.delete_namespace(namespace)
        times = [float(v[0]) for v in result["bound"].values()]
        record.update(pods=count, bound=len(times), throughput=stats.throughput(times))
        return record


# --- the command -------------------------------------------------------------------------


async def _main(run_args: dict[str, Any]) -> None:
    plan: scenarios.QualityPlan = run_args["plan"]
    pipeline: qsys.Pipeline = run_args["pipeline"]
    seeds: tuple[int, ...] = run_args["seeds"]
    results: dict[str, Any] = run_args["results"]
    out: Path = run_args["out"]
    cluster = env_mod.load()
    kube = Kube(cluster.server, cluster.token, cluster.ca_file)
    own: subprocess.Popen[bytes] | None = None
    try:
        try:
            model = loadmodel.LoadModel.of_bench_cluster()
            await asyncio.to_thread(model.truth)
        except (loadmodel.LoadModelMissingError, OSError):
            # A cluster started by a hack/cluster.py from before the load model.
            print("[quality] the cluster runs no load model: starting one", flush=True)
            own = await asyncio.to_thread(
                loadmodel.start_own, cluster, scrape=pipeline.scrape, seed=seeds[0]
            )
            model = loadmodel.LoadModel(
                f"http://127.0.0.1:{env_mod.PORT_BASE + 101}",
                env_mod.STATE / "quality-loadmodel.jsonl",
            )
        chosen = list(run_args["systems"])
        estimating = [s for s in chosen if qsys.is_metricsched(s) and s != qsys.NO_ESTIMATE]
        why = await estimate_unsupported(kube) if estimating else ""
        for system in estimating if why else []:
            chosen.remove(system)
            results.setdefault("skipped", {})[system] = why
            print(f"[quality] skipping {system}: {why}", flush=True)
        run: Run | None = None
        for seed in seeds:
            nodes = scenarios.nodes(plan.nodes, seed=seed)
            await ensure_nodes(kube, nodes)
            results.setdefault("nodes_by_seed", {})[str(seed)] = [
                dataclasses.asdict(n) for n in nodes
            ]
            results["nodes"] = [dataclasses.asdict(n) for n in nodes]
            run = Run(
                plan,
                run_args["plan_name"],
                seed,
                cluster,
                kube,
                model,
                nodes,
                results,
                out,
                pipeline,
                run_args.get("margin"),
                run_args.get("eviction_budget"),
            )
            for key in run_args["scenarios"]:
                for system in (s for s in chosen if qsys.plays(s, key)):
                    tag = f"{key}/{system}/seed {seed}"
                    print(f"[quality] {tag}: start", flush=True)
                    try:
                        row = await run.scenario_trial(key, system)
                    except (ApiError, TimeoutError, OSError) as e:
                        row = {"scenario": key, "system": system, "seed": seed, "error": repr(e)}
                    results["trials"] = _merge(results["trials"], row, "scenario", "system", "seed")
                    _save(out, results)
                    print(f"[quality] {tag}: {_line(row)}", flush=True)
        pair = [s for s in qsys.BACKLOG_PAIR if s in chosen]
        repeats = plan.backlog_repeats if run and len(pair) == 2 and run_args["backlog"] else 0
        for rep in range(repeats):
            for system in pair if rep % 2 == 0 else list(reversed(pair)):
                assert run is not None
                row = await run.backlog_trial(system, rep)
                results["backlog"] = _merge(results.get("backlog", []), row, "system", "rep")
                _save(out, results)
                tp = (row.get("throughput") or {}).get("pods_per_s")
                print(
                    f"[quality] backlog {system} #{rep}: {row['bound']}/{row['pods']} {tp} pods/s"
                )
    finally:
        await kube.close()
        if own is not None:
            own.terminate()
            own.wait(timeout=20)


def rebalance_counters() -> dict[str, Any]:
    """The operator's ``metricsched_rebalance_*`` samples now (blocking: run in a thread)."""
    url = f"http://127.0.0.1:{env_mod.OPERATOR_METRICS_PORT}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except OSError as e:
        return {"unreadable": str(e)}
    found: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("metricsched_rebalance_") and "_created{" not in line:
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def _line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"ERROR {row['error']}"
    keys = (
        "bound",
        "unplaced",
        "node_seconds_above_80",
        "node_seconds_above_100",
        "overruns",
        "hottest_end_of_burst",
        "latency_p99_s",
        "stddev_mean",
        "pending_max_s",
        "held_with_room_max_s",
    )
    extra = ""
    if "after_hotspot" in row:
        late = row["after_hotspot"]
        extra += (
            f" after_hotspot={late['node_seconds_above_80']}"
            f" avoidable={late['avoidable_node_seconds_above_80']}"
        )
    if "after_rise" in row:
        late = row["after_rise"]
        extra += (
            f" after_rise={late['node_seconds_above_80']}"
            f" above_100={late['node_seconds_above_100']}"
        )
    if "rebalance" in row:
        r = row["rebalance"]
        extra += (
            f" evictions={r['evictions']} moved={r['pods_moved']}"
            f" violations={r['budget_violations']}"
            f" over_limit={r.get('workloads_over_limit')}"
        )
    return " ".join(f"{k}={row.get(k)}" for k in keys) + extra


def selection(args: Any) -> tuple[scenarios.QualityPlan, tuple[str, ...], tuple[str, ...]]:
    """The plan, scenarios and systems ``args`` ask for (the plan's own when unsaid: the
    smoke plan plays ``qsys.SMOKE``, others ``qsys.CHOSEN``); refuses unknown names."""
    plan = scenarios.PLANS[args.plan]
    keys = tuple(args.scenarios.split(",")) if args.scenarios else plan.scenarios
    default = qsys.SMOKE if args.plan == "smoke" else qsys.CHOSEN
    chosen = tuple(args.systems.split(",")) if args.systems else default
    unknown = [s for s in chosen if s not in qsys.SYSTEMS] + [
        k for k in keys if k not in scenarios.KEYS
    ]
    if unknown:
        raise SystemExit(f"unknown systems or scenarios: {unknown}")
    return plan, keys, chosen


def seeds_of(args: Any) -> tuple[int, ...]:
    """``--seeds 1,2,3`` (or the single ``--seed``), in order, each once."""
    text = getattr(args, "seeds", None) or str(getattr(args, "seed", 1))
    seeds = tuple(dict.fromkeys(int(x) for x in text.split(",") if x.strip()))
    if not seeds:
        raise SystemExit("--seeds: at least one seed")
    return seeds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bench quality``'s options."""
    a = parser.add_argument
    a("--plan", choices=sorted(scenarios.PLANS), default="full")
    a(
        "--pipeline",
        choices=sorted(qsys.PIPELINES),
        default="realistic",
        help="how node usage reaches metricsched: realistic (15 s scrape of counters through "
        "the recording rule, 15 s refresh; the headline) or gauge (5 s scrape of a gauge, "
        "5 s refresh: the best case)",
    )
    a("--scenarios", help=f"subset of {','.join(scenarios.KEYS)} (default: the plan's)")
    a(
        "--systems",
        help=f"subset of {','.join(qsys.ORDER)} (default: the smoke plan "
        f"{','.join(qsys.SMOKE)}, others all but the rebalance pair)",
    )
    a("--seeds", help="comma-separated seeds, each a full pass (default: --seed)")
    a("--seed", type=int, default=1, help="one seed (when --seeds is not given)")
    a("--out", help="results file (default: bench/results/quality-PLAN[-PIPELINE].json)")
    a("--append", action="store_true", help="merge into an existing results file")
    a("--keep-cluster", action="store_true")
    a("--no-backlog", action="store_true", help="skip the backlog pair (scenarios only)")
    a(
        "--rebalance-margin",
        type=float,
        help="the rebalance system's spec.rebalance.margin (default: bench/quality/systems.py's)",
    )
    a(
        "--rebalance-eviction-budget",
        type=int,
        help="the rebalance system's --rebalance-eviction-budget, evictions per minute across "
        "the operator (0 lets none through; default: the operator's default, 10)",
    )
    a("--publish", action="store_true", help="write bench/quality*.png, quality.md and README")


def cmd_quality(args: Any) -> int:
    from bench.quality import report  # noqa: PLC0415 (matplotlib only when rendering)

    plan, keys, chosen = selection(args)
    pipeline = qsys.PIPELINES[getattr(args, "pipeline", None) or "realistic"]
    seeds = seeds_of(args)
    out = Path(args.out) if args.out else results_path(args.plan, pipeline.name)
    results: dict[str, Any] = {"trials": [], "backlog": []}
    if args.append and out.exists():
        results = json.loads(out.read_text())
    results.update(
        plan=args.plan,
        plan_detail=dataclasses.asdict(plan),
        seed=seeds[0],
        seeds=list(seeds),
        systems=list(chosen),
        started=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        machine=env_mod.machine(),
        code=env_mod.code_fingerprint(),
        pipeline=dataclasses.asdict(pipeline),
        scrape_interval=pipeline.scrape,
        refresh_interval=pipeline.refresh,
        policy={
            f"{s} ({k})": qsys.policy(s, scenario=k, pipeline=pipeline)
            for s in chosen
            if qsys.is_metricsched(s)
            for k in keys
            if qsys.plays(s, k)
        },
        operator_args=list(pipeline.operator_args()),
    )
    os.environ[loadmodel.SCRAPE_ENV] = pipeline.scrape
    os.environ[loadmodel.RULE_INTERVAL_ENV] = pipeline.rule_interval
    t0 = time.monotonic()
    try:
        env_mod.cluster_cmd("up", "--nodes", "3", "--quiet-nodes")
        env_mod.install_crd(env_mod.load())
        asyncio.run(
            _main(
                {
                    "plan": plan,
                    "plan_name": args.plan,
                    "pipeline": pipeline,
                    "seeds": seeds,
                    "results": results,
                    "out": out,
                    "scenarios": keys,
                    "systems": chosen,
                    "backlog": not getattr(args, "no_backlog", False),
                    "margin": getattr(args, "rebalance_margin", None),
                    "eviction_budget": getattr(args, "rebalance_eviction_budget", None),
                }
            )
        )
        results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        results["wall_s"] = round(time.monotonic() - t0, 1)
        results["machine"]["load_average_end"] = env_mod.load_average()
        _save(out, results)
    finally:
        if not args.keep_cluster:
            env_mod.cluster_cmd("down")
    report.render(out, publish=args.publish)
    print(f"[quality] results: {out} ({time.monotonic() - t0:.0f} s)", flush=True)
    failed = [
        f"{t['scenario']}/{t['system']}/{t.get('seed')}" for t in results["trials"] if "error" in t
    ]
    if failed:
        print(f"[quality] harness errors in {failed}", flush=True)
    return 1 if failed else 0
