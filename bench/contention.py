"""The capacity race (issue 29 item 5): kube-scheduler and metricsched binding at full speed
into the same kwok nodes, which have room (by requests) for only part of the pods.

    python -m bench contention [--seeds 1,2,3] [--nodes 16] [--pods 300] [--out FILE]
                               [--conditions shared,preempt,preempt-no-nominations,
                                             refill,refill-no-nominations,pools]
                               [--publish]   # bench/contention.md and its bench/README.md part
    python -m bench contention --render FILE [--publish]   # re-render a results file only

Both schedulers run, each with a fresh cache, and are ready before the first pod exists;
the harness then creates the pods, interleaved between the two schedulerNames in a seeded
order (cpu requests of 250m, 500m or 1 core, seeded), as fast as the API server takes them.
A watch on the trial's namespace records, in resourceVersion order, every bind (the first
event that shows ``spec.nodeName``) and every removal (DELETED) with the pod's requests.
After the run (all pods bound, or no bind or removal for ``QUIET_S``, or the timeout) the
pods are LISTed: the LIST gives each scheduler's pods bound and the nodes overcommitted at the
end (sum of the bound pods' requests over allocatable, cpu, memory or pods); the watch gives
the order. The API's view only: kwok runs no kubelet admission, so no pod is rejected.

Attribution (``walk``): binds and removals are replayed in resourceVersion order, node sums
kept per node; a bind after which its node's requests exceed its allocatable on any
resource is an *overcommitting bind* of the scheduler that made it. It is thus the bind that
came second (later in resourceVersion) into the same room that is counted, and every later
bind onto a node still over allocatable counts again.

Conditions:

- ``shared``: every pod may go to every contention node; equal priorities, so kube-scheduler
  preempts nobody and writes no ``status.nominatedNodeName``.
- ``preempt``: the same, kube-scheduler's pods at priority 1000 (a PriorityClass) over
  metricsched's at 0: once the nodes fill, kube-scheduler preempts metricsched's pods and
  nominates the node for its pod (``status.nominatedNodeName``); metricsched as built
  (issue 29 item 3: nominated pods of equal or higher priority occupy their node).
- ``preempt-no-nominations``: the same with item 3 switched off. The operator has no switch
  for it, so the harness runs a scratch copy of this tree's operator package (PYTHONPATH) in
  which ``Cache.upsert_nominated`` returns at once: no nominated pod ever reaches a cycle.
- ``refill`` and ``refill-no-nominations``: nominations alone. metricsched first fills the
  nodes exactly with pods of ``REFILL_CPU`` (priority 0), alone; then kube-scheduler's
  high-priority pods (3/8 of that count) and twice as many pending metricsched pods are
  created at once. Each high-priority pod needs one victim; a victim beyond that count is a
  pod evicted for nothing (metricsched took the room a preemption freed, and
  kube-scheduler preempted again).
- ``pools``: the mitigation the docs recommend: the nodes split in two pools by a label,
  each scheduler's pods selecting its own pool (nodeSelector). Expected: 0 overcommitting
  binds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import env as env_mod
from bench import systems
from bench.kube import ApiError, Kube
from hack import kwok_node
from metricsched.core import quantity

LABEL = "bench.metricsched.io/contention"
POOL_LABEL = "bench.metricsched.io/pool"
PRIORITY_CLASS = "bench-contention-high"
HIGH_PRIORITY = 1000
NODE_CPU = 4
QUIET_S = 10.0
TIMEOUT_S = 100.0
CPU_CHOICES = ("250m", "500m", "1")
KUBE = "kube-open"  # kube-scheduler, QPS 5000 / burst 5000: full speed
METRICSCHED = "metricsched"
CONDITIONS = (
    "shared",
    "preempt",
    "preempt-no-nominations",
    "refill",
    "refill-no-nominations",
    "pools",
)
NO_NOMINATIONS = "-no-nominations"  # the conditions that run the scratch copy
REFILL_CPU = "500m"
RESOURCES = ("cpu", "memory", "pods")
WORK = env_mod.RESULTS / "work" / "contention"
# The scratch copy's one change (``preempt-no-nominations``): checked to apply exactly once.
NOMINATION_HOOK = (
    '        """An unbound pod\'s nomination (a pod without one, bound, or finished: dropped)."""\n'
)
NOMINATION_OFF = "        return  # bench contention: issue 29 item 3 switched off\n"


# --- the figures (pure) ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Step:
    """One event of the replay: a bind (``bound``) or a bound pod's removal (not ``bound``)."""

    rv: int
    pod: str
    scheduler: str
    node: str
    requests: Mapping[str, int]  # cpu in milli, memory in bytes, pods 1
    bound: bool = True


def requests_of(pod: Mapping[str, Any]) -> dict[str, int]:
    """A pod's requests as NodeResourcesFit sums them for these pods (containers only: the
    harness's pods have no init containers, overhead or pod-level resources)."""
    total = {"cpu": 0, "memory": 0, "pods": 1}
    for container in (pod.get("spec") or {}).get("containers") or []:
        req = (container.get("resources") or {}).get("requests") or {}
        total["cpu"] += quantity.parse_milli(req.get("cpu", "0"))
        total["memory"] += quantity.parse_int(req.get("memory", "0"))
    return total


def allocatable_of(node: Mapping[str, Any]) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {
        "cpu": quantity.parse_milli(alloc.get("cpu", "0")),
        "memory": quantity.parse_int(alloc.get("memory", "0")),
        "pods": quantity.parse_int(alloc.get("pods", "0")),
    }


def _over(used: Mapping[str, int], alloc: Mapping[str, int]) -> bool:
    return any(used.get(r, 0) > alloc.get(r, 0) for r in RESOURCES)


def walk(
    steps: Iterable[Step], allocatable: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Replay binds and removals in resourceVersion order; per scheduler, its binds and its
    overcommitting binds (a bind after which its node is over allocatable). Nodes not in
    ``allocatable`` (not the scenario's) are skipped."""
    used: dict[str, dict[str, int]] = {}
    out: dict[str, dict[str, int]] = {}
    for step in sorted(steps, key=lambda s: s.rv):
        if step.node not in allocatable:
            continue
        node = used.setdefault(step.node, {r: 0 for r in RESOURCES})
        sign = 1 if step.bound else -1
        for r in RESOURCES:
            node[r] += sign * step.requests.get(r, 0)
        if not step.bound:
            continue
        row = out.setdefault(step.scheduler, {"binds": 0, "overcommitting_binds": 0})
        row["binds"] += 1
        if _over(node, allocatable[step.node]):
            row["overcommitting_binds"] += 1
    return out


def end_state(
    pods: Iterable[Mapping[str, Any]], allocatable: Mapping[str, Mapping[str, int]]
) -> dict[str, Any]:
    """From a LIST: each scheduler's pods bound (to the scenario's nodes) and the nodes
    whose bound pods' requests exceed allocatable."""
    used: dict[str, dict[str, int]] = {}
    bound: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if (
            not node
            or node not in allocatable
            or (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        bound[spec.get("schedulerName", "")] = bound.get(spec.get("schedulerName", ""), 0) + 1
        sums = used.setdefault(node, {r: 0 for r in RESOURCES})
        for r, v in requests_of(pod).items():
            sums[r] += v
    over = sorted(n for n, sums in used.items() if _over(sums, allocatable[n]))
    excess = sum(max(0, sums["cpu"] - allocatable[n]["cpu"]) for n, sums in used.items())
    return {
        "bound": bound,
        "overcommitted_nodes": len(over),
        "overcommitted": over,
        "excess_cpu_m": excess,
    }


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """Median and range over the seeds."""
    if not values:
        return {"median": None, "min": None, "max": None}
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"median": median, "min": ordered[0], "max": ordered[-1]}


def pod_plan(seed: int, pods: int) -> list[tuple[str, str]]:
    """(system, cpu request) of each pod in creation order: half each system, shuffled."""
    rng = random.Random(seed)
    systems_ = [KUBE if i % 2 == 0 else METRICSCHED for i in range(pods)]
    rng.shuffle(systems_)
    return [(s, rng.choice(CPU_CHOICES)) for s in systems_]


def refill_plan(seed: int, nodes: int) -> tuple[int, list[tuple[str, str]]]:
    """The ``refill`` conditions: how many metricsched pods of ``REFILL_CPU`` fill the
    nodes exactly (created first, bound by metricsched alone), then the second wave in
    creation order: kube-scheduler's high-priority pods (3/8 of the fill, each needing one
    victim) and as many again pending metricsched pods as there were victims to take,
    times two, shuffled."""
    fill = nodes * NODE_CPU * 1000 // quantity.parse_milli(REFILL_CPU)
    wave = [KUBE] * (fill * 3 // 8) + [METRICSCHED] * (fill * 3 // 4)
    random.Random(seed).shuffle(wave)
    return fill, [(s, REFILL_CPU) for s in wave]


def pool_of(index: int, nodes: int) -> str:
    """The ``pools`` condition's split: the first half of the nodes kube-scheduler's."""
    return KUBE if index < nodes // 2 else METRICSCHED


# --- the cluster side --------------------------------------------------------------------


def node_body(index: int, nodes: int) -> dict[str, Any]:
    name = f"contention-{index:03d}"
    return kwok_node.Node(
        name=name,
        capacity={"cpu": str(NODE_CPU), "memory": "16Gi", "pods": "110"},
        labels={"kubernetes.io/os": "linux", LABEL: "true", POOL_LABEL: pool_of(index, nodes)},
    ).body()


def pod_body(name: str, system: str, cpu: str, condition: str) -> dict[str, Any]:
    selector = {LABEL: "true"}
    if condition == "pools":
        selector[POOL_LABEL] = system
    spec: dict[str, Any] = {
        "schedulerName": systems.SYSTEMS[system].scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "nodeSelector": selector,
        "containers": [
            {
                "name": "app",
                "image": "registry.invalid/pause:1",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
    }
    if system == KUBE and condition.startswith(("preempt", "refill")):
        spec["priorityClassName"] = PRIORITY_CLASS
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench-contention"}},
        "spec": spec,
    }


async def ensure_nodes(kube: Kube, nodes: int) -> dict[str, dict[str, int]]:
    for node in await kube.list_nodes():
        labels = node["metadata"].get("labels") or {}
        if labels.get(LABEL) == "true":
            await kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
    await asyncio.sleep(2.0)
    for i in range(nodes):
        await kube.request("POST", "/api/v1/nodes", node_body(i, nodes))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready = {
            n["metadata"]["name"]: allocatable_of(n)
            for n in await kube.list_nodes()
            if (n["metadata"].get("labels") or {}).get(LABEL) == "true"
            and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        }
        if len(ready) == nodes:
            return ready
        await asyncio.sleep(1.0)
    raise TimeoutError("contention nodes not Ready after 120 s")


async def ensure_priority_class(kube: Kube) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS},
        "value": HIGH_PRIORITY,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    try:
        await kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    except ApiError as e:
        if e.status != 409:
            raise


def scratch_without_nominations(into: Path) -> str:
    """A copy of this tree's operator package with ``Cache.upsert_nominated`` a no-op;
    returns the PYTHONPATH that runs it (checked: ``metricsched`` imports from there)."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(env_mod.ROOT / "operator" / "metricsched", into / "metricsched")
    cache = into / "metricsched" / "runtime" / "cache.py"
    text = cache.read_text()
    if text.count(NOMINATION_HOOK) != 1:
        raise RuntimeError("Cache.upsert_nominated's docstring moved: update NOMINATION_HOOK")
    cache.write_text(text.replace(NOMINATION_HOOK, NOMINATION_HOOK + NOMINATION_OFF))
    probe = subprocess.run(
        [sys.executable, "-c", "import metricsched; print(metricsched.__file__)"],
        env={"PYTHONPATH": str(into), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    if not probe.stdout.strip().startswith(str(into)):
        raise RuntimeError(f"the scratch copy is not what runs: {probe.stdout.strip()}")
    return str(into)


class Log:
    """The trial namespace's watch: binds and removals with their resourceVersion."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.steps: list[Step] = []
        self.bound: dict[str, Step] = {}
        self.last = time.monotonic()
        self.error: str | None = None
        self.opened = asyncio.Event()
        self.rv = ""
        self.reopened = 0
        self.nominated: set[str] = set()  # pods ever seen unbound with a nominatedNodeName

    async def run(self) -> None:
        """Watch from the namespace's LIST; a watch the server ends (a slow reader's is
        closed) is opened again from the last resourceVersion seen, so no event is lost;
        only a 410 (that version compacted away) ends the record, noted in ``error``."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        self.rv = str((await self.kube.request("GET", path))["metadata"]["resourceVersion"])
        while True:
            try:
                async for _, event in self.kube.watch(
                    path, {"resourceVersion": self.rv}, on_open=self.opened.set
                ):
                    if event.get("type") == "ERROR":
                        self.error = json.dumps(event.get("object"))[:300]
                        return
                    self.see(event)
            except (ApiError, OSError) as e:
                self.error = repr(e)
                return
            self.reopened += 1

    def see(self, event: Mapping[str, Any]) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        spec = obj.get("spec") or {}
        self.rv = str(meta.get("resourceVersion") or self.rv)  # bookmarks too
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return
        rv = int(self.rv)
        if event["type"] == "DELETED":
            first = self.bound.pop(name, None)
            if first is not None:
                self.steps.append(dataclasses.replace(first, rv=rv, bound=False))
                self.last = time.monotonic()
            return
        node = spec.get("nodeName")
        if not node and (obj.get("status") or {}).get("nominatedNodeName"):
            self.nominated.add(name)
        if node and name not in self.bound:
            step = Step(rv, name, spec.get("schedulerName", ""), node, requests_of(obj))
            self.bound[name] = step
            self.steps.append(step)
            self.last = time.monotonic()


async def _wait_ready(kube: Kube, namespace: str, system: str) -> None:
    """A warm-up pod (no requests, on a node outside the scenario) bound, then deleted."""
    name = f"warm-{system}"
    body = pod_body(name, system, "0", "shared")
    body["spec"]["nodeSelector"] = {"type": "kwok"}
    body["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": LABEL, "operator": "DoesNotExist"}]}
                ]
            }
        }
    }
    body["spec"].pop("priorityClassName", None)
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    deadline = time.monotonic() + 120
    while not ((await kube.request("GET", path)).get("spec") or {}).get("nodeName"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{system}'s warm-up pod not bound after 120 s")
        await asyncio.sleep(0.2)
    await kube.request("DELETE", path, params={"gracePeriodSeconds": "0"})


@dataclasses.dataclass(frozen=True)
class TrialSpec:
    """One trial's condition, seed, pod count and operator copy (None: this checkout's)."""

    condition: str
    seed: int
    pods: int
    scratch: str | None = None


class _Trial:
    """One trial in three phases: start both schedulers, play the pods and wait for the
    binds to end (``play``), then the figures from the watch's replay and a LIST
    (``figures``)."""

    def __init__(
        self,
        kube: Kube,
        cluster: env_mod.ClusterEnv,
        allocatable: Mapping[str, Mapping[str, int]],
        spec: TrialSpec,
    ) -> None:
        self.kube, self.cluster, self.allocatable, self.spec = kube, cluster, allocatable, spec
        self.namespace = f"ct-{spec.condition[:12]}-{spec.seed}-{secrets.token_hex(2)}"
        self.log = Log(kube, self.namespace)
        self.procs: list[systems.Process] = []
        self.pods = spec.pods
        self.record: dict[str, Any] = {
            "condition": spec.condition,
            "seed": spec.seed,
            "pods": spec.pods,
            "nodes": len(allocatable),
            "load_average_before": env_mod.load_average(),
            "operator_path": spec.scratch,
        }

    def start(self) -> None:
        for name in (KUBE, METRICSCHED):
            system = systems.SYSTEMS[name]
            argv = systems.command(system, self.cluster, WORK)
            tag = f"{self.spec.condition}-{self.spec.seed}-{name}"
            path = self.spec.scratch if name == METRICSCHED else None
            self.procs.append(
                systems.Process(system, argv, WORK / "logs" / f"{tag}.log", python_path=path)
            )

    async def play(self) -> None:
        kube, namespace, log, record = self.kube, self.namespace, self.log, self.record
        condition = self.spec.condition
        await asyncio.wait_for(log.opened.wait(), 30)
        await asyncio.gather(*(_wait_ready(kube, namespace, n) for n in (KUBE, METRICSCHED)))
        gate = asyncio.Semaphore(32)
        t0 = time.monotonic()

        async def one(i: int, system: str, cpu: str) -> None:
            async with gate:
                body = pod_body(f"p-{i:04d}", system, cpu, condition)
                await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)

        plan = pod_plan(self.spec.seed, self.pods)
        if condition.startswith("refill"):
            fill, plan = refill_plan(self.spec.seed, len(self.allocatable))
            await asyncio.gather(*(one(i, METRICSCHED, REFILL_CPU) for i in range(fill)))
            while len(log.bound) < fill and time.monotonic() - t0 < TIMEOUT_S:
                await asyncio.sleep(0.5)
            record["filled"] = len(log.bound)
            record["fill_s"] = round(time.monotonic() - t0, 2)
            plan = [(METRICSCHED, REFILL_CPU)] * fill + plan
            self.pods = record["pods"] = len(plan)
            record["high_priority_pods"] = sum(1 for s, _ in plan if s == KUBE)
            t0 = time.monotonic()
            await asyncio.gather(*(one(i, s, c) for i, (s, c) in enumerate(plan) if i >= fill))
        else:
            await asyncio.gather(*(one(i, s, c) for i, (s, c) in enumerate(plan)))
        record["create_s"] = round(time.monotonic() - t0, 2)
        await self._wait_end(t0)

    async def _wait_end(self, t0: float) -> None:
        record, log = self.record, self.log
        record["ended"] = "timeout"
        while time.monotonic() - t0 < TIMEOUT_S:
            if len(log.bound) >= self.pods:
                record["ended"] = "all bound"
                break
            if time.monotonic() - log.last > QUIET_S and time.monotonic() - t0 > QUIET_S:
                record["ended"] = "quiet"
                break
            if not all(p.alive() for p in self.procs):
                record["scheduler_exited"] = [p.system.name for p in self.procs if not p.alive()]
                break
            await asyncio.sleep(0.5)
        record["run_s"] = round(time.monotonic() - t0, 1)

    async def listed(self, watch: asyncio.Task[None]) -> list[dict[str, Any]]:
        """The namespace's pods by a LIST, once the watch has caught up with it."""
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        page = await self.kube.request("GET", path, timeout_s=60)
        deadline = time.monotonic() + 15  # the watch catches up with the LIST
        while int(self.log.rv or 0) < int(page["metadata"]["resourceVersion"]) and not watch.done():
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        return [p for p in page["items"] if not p["metadata"]["name"].startswith("warm-")]

    def figures(self, listed: Sequence[Mapping[str, Any]]) -> None:
        record, log, allocatable = self.record, self.log, self.allocatable
        steps = [s for s in log.steps if not s.pod.startswith("warm-")]
        names = {n: systems.SYSTEMS[n].scheduler_name for n in (KUBE, METRICSCHED)}
        by_scheduler = walk(steps, allocatable)
        end = end_state(listed, allocatable)
        record["watch_error"] = log.error
        record["watch_reopened"] = log.reopened
        record["pods_nominated"] = len({n for n in log.nominated if not n.startswith("warm-")})
        record["nominated_at_end"] = sum(
            1 for p in listed if (p.get("status") or {}).get("nominatedNodeName")
        )
        for short, scheduler in names.items():
            row = by_scheduler.get(scheduler, {"binds": 0, "overcommitting_binds": 0})
            record[short] = {
                **row,
                "bound_at_end": end["bound"].get(scheduler, 0),
                "removed": sum(1 for s in steps if not s.bound and s.scheduler == scheduler),
            }
        record["overcommitted_nodes_at_end"] = end["overcommitted_nodes"]
        record["excess_cpu_m_at_end"] = end["excess_cpu_m"]
        # The replay's end (binds minus removals) must be the LIST's: else the order is suspect.
        record["watch_matches_list"] = all(
            record[short]["binds"] - record[short]["removed"] == record[short]["bound_at_end"]
            for short in names
        )
        record["room_pods_est"] = (
            sum(a["cpu"] for a in allocatable.values())
            * len(CPU_CHOICES)
            // (sum(quantity.parse_milli(c) for c in CPU_CHOICES))
        )


async def trial(
    kube: Kube,
    cluster: env_mod.ClusterEnv,
    allocatable: Mapping[str, Mapping[str, int]],
    spec: TrialSpec,
) -> dict[str, Any]:
    """One trial of ``spec`` on the cluster's contention nodes (``allocatable``)."""
    run = _Trial(kube, cluster, allocatable, spec)
    await kube.create_namespace(run.namespace)
    await kube.create_policy(run.namespace, systems.POLICY_NAME, systems.POLICY_SPEC)
    WORK.mkdir(parents=True, exist_ok=True)
    watch = asyncio.create_task(run.log.run())
    try:
        run.start()
        await run.play()
    finally:
        for p in run.procs:
            await asyncio.to_thread(p.stop)
    listed = await run.listed(watch)
    watch.cancel()
    run.figures(listed)
    run.record["load_average_after"] = env_mod.load_average()
    run.record["pods_left_after_cleanup"] = await kube.delete_namespace(run.namespace)
    return run.record


def table(trials: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per condition: median and range over the seeds of each figure."""
    rows = []
    for condition in CONDITIONS:
        got = [t for t in trials if t.get("condition") == condition and "error" not in t]
        if not got:
            continue
        row: dict[str, Any] = {"condition": condition, "seeds": sorted(t["seed"] for t in got)}
        for short in (KUBE, METRICSCHED):
            for key in ("binds", "overcommitting_binds", "bound_at_end", "removed"):
                row[f"{short}.{key}"] = summary([t[short][key] for t in got])
        for key in ("overcommitted_nodes_at_end", "excess_cpu_m_at_end", "run_s"):
            row[key] = summary([t[key] for t in got])
        row["pods_nominated"] = summary([t.get("pods_nominated", 0) for t in got])
        rows.append(row)
    return rows


def _fmt(s: Mapping[str, float | None]) -> str:
    if s["median"] is None:
        return "-"
    med = f"{s['median']:g}"
    return med if s["min"] == s["max"] else f"{med} ({s['min']:g}-{s['max']:g})"


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    head = (
        "| condition | kube-scheduler binds | its overcommitting binds | its pods bound at end"
        " | metricsched binds | its overcommitting binds | its pods bound at end"
        " | metricsched pods preempted | nodes overcommitted at end"
        " | cpu requested over allocatable at end (millicores) | pods nominated | run (s) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['condition']} | {_fmt(r[f'{KUBE}.binds'])}"
        f" | {_fmt(r[f'{KUBE}.overcommitting_binds'])}"
        f" | {_fmt(r[f'{KUBE}.bound_at_end'])} | {_fmt(r[f'{METRICSCHED}.binds'])}"
        f" | {_fmt(r[f'{METRICSCHED}.overcommitting_binds'])}"
        f" | {_fmt(r[f'{METRICSCHED}.bound_at_end'])} | {_fmt(r[f'{METRICSCHED}.removed'])}"
        f" | {_fmt(r['overcommitted_nodes_at_end'])} | {_fmt(r['excess_cpu_m_at_end'])}"
        f" | {_fmt(r['pods_nominated'])} | {_fmt(r['run_s'])} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def rate(trials: Sequence[Mapping[str, Any]], condition: str, short: str) -> tuple[int, int]:
    """(overcommitting binds, binds) of one scheduler in one condition, over the seeds."""
    got = [t for t in trials if t.get("condition") == condition and "error" not in t]
    return (
        sum(t[short]["overcommitting_binds"] for t in got),
        sum(t[short]["binds"] for t in got),
    )


def _pct(pair: tuple[int, int]) -> str:
    over, binds = pair
    return f"{over}/{binds} ({100 * over / binds:.0f} %)" if binds else "-"


def section(results: Mapping[str, Any]) -> str:
    """bench/contention.md: the table, the rates over the seeds and the conditions."""
    trials = results.get("trials") or []
    machine = results.get("machine") or {}
    runs = "; ".join(
        f"`python -m bench {r['argv']}` (commit {r['commit']}, {r['started']})"
        for r in _runs(results)
    )
    plain = [t for t in trials if "pods" in t and not t["condition"].startswith("refill")]
    nodes = next((t["nodes"] for t in plain), "?")
    pods = next((t["pods"] for t in plain), "?")
    room = next((t["room_pods_est"] for t in trials if "room_pods_est" in t), "?")
    loads = [t["load_average_before"][0] for t in trials if "load_average_before" in t]
    lines = [
        "## Contention beside kube-scheduler (issue 29 item 5)",
        "",
        f"{runs}; bench/contention.py. {nodes} kwok nodes of {results.get('node_cpu')} cpu"
        f" (110 pods); {pods} pods per trial, half for kube-scheduler"
        f" ({machine.get('kube_scheduler', '')},"
        " QPS 5000 / burst 5000) and half for metricsched (64 Bindings in flight), cpu"
        f" requests {', '.join(results.get('cpu_choices') or [])} drawn per seed, 64Mi each:"
        f" room (by requests) for about {room} of them. Both schedulers are ready before the"
        " first pod exists; the pods are then created as fast as the API server takes them"
        " (32 in flight), the two schedulerNames interleaved in a seeded order, and both bind"
        f" at full speed. A trial ends when no bind or removal has come for {QUIET_S:g} s"
        f" (or at {TIMEOUT_S:g} s). Seeds {sorted({t['seed'] for t in trials})}; machine:"
        f" {machine.get('nproc')} CPUs ({machine.get('cpu_model', '?')}), load average (1 min)"
        f" before the trials {min(loads, default=0):g}-{max(loads, default=0):g} (other"
        " workers and a benchmark shared the box; every process nice 10).",
        "",
        "Counted from the API's view: kwok runs no kubelet admission, so nothing is rejected"
        " here; on a real node the kubelet would reject (`OutOfcpu`) the pod that arrives"
        " second. An *overcommitting bind* is a bind after which its node's bound pods"
        " request more than its allocatable (cpu, memory or pods), replayed in resourceVersion"
        " order from a watch of the namespace (binds and removals): it is charged to the"
        " scheduler whose bind came second, and every later bind onto a node still over"
        " counts again. Pods bound and nodes overcommitted at the end come from a LIST after"
        " the run. Cells: median (min-max) over the seeds.",
        "",
        markdown(table(trials)).rstrip(),
        "",
        "Overcommitting binds over all seeds (kube-scheduler; metricsched):",
        "",
    ]
    for condition in CONDITIONS:
        if any(t.get("condition") == condition for t in trials):
            lines.append(
                f"- {condition}: {_pct(rate(trials, condition, KUBE))};"
                f" {_pct(rate(trials, condition, METRICSCHED))}"
            )
    refills = [
        t for t in trials if t.get("condition", "").startswith("refill") and "error" not in t
    ]
    if refills:
        lines += [
            "",
            "Refill: metricsched pods preempted for the high-priority pods, per seed:",
            "",
        ]
    for condition in ("refill", "refill-no-nominations"):
        got = sorted((t for t in refills if t["condition"] == condition), key=lambda t: t["seed"])
        if got:
            each = ", ".join(
                f"{t[METRICSCHED]['removed']} for {t['high_priority_pods']}" for t in got
            )
            lines.append(f"- {condition}: {each}")
    lines += [
        "",
        "Conditions: **shared**, every node open to both, equal priorities (kube-scheduler"
        " writes no nomination); **preempt**, kube-scheduler's pods at priority"
        f" {HIGH_PRIORITY} over metricsched's at 0, so once the nodes fill kube-scheduler"
        " preempts metricsched's pods and writes `status.nominatedNodeName`, metricsched as"
        " built (issue 29 item 3: nominated pods of equal or higher priority occupy their"
        " node); **preempt-no-nominations**, the same with item 3 off (the operator has no"
        " switch: a scratch copy of this commit's operator in which `Cache.upsert_nominated`"
        " returns at once); **pools**, the documented mitigation, each scheduler's pods"
        " selecting its own half of the nodes (nodeSelector); **refill** and"
        " **refill-no-nominations**, nominations alone: metricsched first fills every node"
        f" exactly with pods of {REFILL_CPU} cpu (priority 0) on its own, then kube-scheduler's"
        f" priority-{HIGH_PRIORITY} pods (3/8 of that count) and twice as many pending"
        " metricsched pods are created at once: each high-priority pod needs one victim, and"
        " victims beyond that count were evicted for nothing.",
        "",
    ]
    return "\n".join(lines)


BEGIN, END = "<!-- contention:begin -->", "<!-- contention:end -->"


def splice(readme: str, body: str) -> str:
    """bench/README.md with the section between the markers (inserted before ``## Machine``
    the first time)."""
    block = f"{BEGIN}\n{body.rstrip()}\n{END}\n"
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1].lstrip("\n")
    at = readme.index("## Machine")
    return readme[:at] + block + "\n" + readme[at:]


async def _main(args: argparse.Namespace, results: dict[str, Any], out: Path) -> None:
    cluster = env_mod.load()
    kube = Kube(cluster.server, cluster.token, cluster.ca_file)
    try:
        allocatable = await ensure_nodes(kube, args.nodes)
        await ensure_priority_class(kube)
        conditions = [c for c in args.conditions.split(",") if c]
        scratch = None
        if any(c.endswith(NO_NOMINATIONS) for c in conditions):
            scratch = await asyncio.to_thread(
                scratch_without_nominations, Path(tempfile.gettempdir()) / "bench-contention-op"
            )
        for seed in (int(s) for s in args.seeds.split(",")):
            order = conditions if seed % 2 else list(reversed(conditions))
            for condition in order:
                path = scratch if condition.endswith(NO_NOMINATIONS) else None
                try:
                    row = await trial(
                        kube, cluster, allocatable, TrialSpec(condition, seed, args.pods, path)
                    )
                except (ApiError, TimeoutError, OSError) as e:
                    row = {"condition": condition, "seed": seed, "error": repr(e)}
                results["trials"].append(row)
                out.write_text(json.dumps(results, indent=1))
                print(f"[contention] {condition} seed {seed}: {json.dumps(row)[:400]}", flush=True)
    finally:
        await kube.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--out", help="results file (default: bench/results/contention.json)")
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument(
        "--append",
        action="store_true",
        help="add to --out's trials (same condition and seed replaced)",
    )
    parser.add_argument("--render", metavar="FILE", help="only render a results file, no run")
    parser.add_argument(
        "--publish", action="store_true", help="write bench/contention.md and its README section"
    )


def _runs(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The invocations a results file holds: (argv, commit, start) of each."""
    if "runs" in results:
        return list(results["runs"])
    code = results.get("code") or {}
    return [
        {
            "argv": " ".join(results.get("argv") or []),
            "commit": code.get("git_head", "?"),
            "started": results.get("started", "?"),
        }
    ]


def publish(results: Mapping[str, Any], *, write: bool) -> str:
    """The section; with ``write``, into bench/contention.md and bench/README.md."""
    body = section(results)
    if write:
        (env_mod.ROOT / "bench" / "contention.md").write_text(body)
        readme = env_mod.ROOT / "bench" / "README.md"
        readme.write_text(splice(readme.read_text(), body))
    return body


def cmd_contention(args: argparse.Namespace) -> int:
    if args.render:
        print(publish(json.loads(Path(args.render).read_text()), write=args.publish), flush=True)
        return 0
    out = Path(args.out) if args.out else env_mod.RESULTS / "contention.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "argv": sys.argv[1:],
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": env_mod.machine(),
        "code": env_mod.code_fingerprint(),
        "node_cpu": NODE_CPU,
        "cpu_choices": list(CPU_CHOICES),
        "trials": [],
    }
    if args.append and out.exists():
        kept = json.loads(out.read_text())
        chosen = set(args.conditions.split(","))
        seeds = {int(x) for x in args.seeds.split(",")}
        results["trials"] = [
            t
            for t in kept["trials"]
            if t.get("condition") not in chosen or t.get("seed") not in seeds
        ]
        results["runs"] = [*_runs(kept), *_runs(results)]
    try:
        env_mod.cluster_cmd("up", "--nodes", "3", "--quiet-nodes")
        env_mod.install_crd(env_mod.load())
        asyncio.run(_main(args, results, out))
    finally:
        if not args.keep_cluster:
            env_mod.cluster_cmd("down")
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results["machine"]["load_average_end"] = env_mod.load_average()
    results["table"] = table(results["trials"])
    out.write_text(json.dumps(results, indent=1))
    print(publish(results, write=args.publish), flush=True)
    print(f"[contention] results: {out}", flush=True)
    return 1 if any("error" in t for t in results["trials"]) else 0
