"""The seeded scenarios of the placement-quality benchmark: nodes, workloads and events.

Pure: no I/O, no clocks. ``scenario(key, plan=..., seed=...)`` returns the same events for
the same arguments, so every system plays the same workload. Each pod's usage and ramp are
drawn here and written into the pod's load-model annotations as plain numbers (the load
model's own distributions are seeded by pod uid, which differs between systems).

Usage differs from requests on purpose (issue 19): ``api`` pods use 3-7 times what they
request, ``batch`` pods a fifth of it, ``web`` pods about what they ask for; in scenarios
b and c a second scheduler binds large pods of its own onto the same nodes.

Scenario e is heat that only the scheduler's own pods cause (issue 32): no other
scheduler, no hot spot. A ``surge`` workload arrives first (so its pods go to the nodes
that are coolest then), the usual mix follows, and every pod stays to the end; at
``rise_at_s`` the surge pods' usage steps up ``rise_factor``-fold for good (the load
model's ``step`` pattern, in step with the clock, so a replacement uses the new level at
once), which takes the nodes holding most of them past 0.8 while the others keep room.

Scenario d is a scale-out (what an autoscaler does): Deployments that have run for a
while (so their pods' usage is in Prometheus) are scaled up several-fold at once. Their
pods request 50m and use 0.3-0.5 cores each, a fixed amount per Deployment (all of a
Deployment's pods share one template, and the load model's own draws are seeded by pod
uid, which differs between systems).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Literal

from hack import kwok_node

MODELLED_LABEL = "loadmodel.metricsched.io/modelled"
BACKGROUND_CPU = "loadmodel.metricsched.io/background-cpu"
USAGE_CPU = "loadmodel.metricsched.io/cpu"
RAMP = "loadmodel.metricsched.io/ramp"
QUALITY_LABEL = "bench.metricsched.io/quality"
OTHER_SCHEDULER = "bench-other-scheduler"  # pods bound directly, as another scheduler would

CPU_PATTERN = "loadmodel.metricsched.io/cpu-pattern"
ScenarioKey = Literal["a", "b", "c", "d", "e"]
KEYS: tuple[ScenarioKey, ...] = ("a", "b", "c", "d", "e")
PLAYED: tuple[ScenarioKey, ...] = ("a", "b", "c", "d")  # a plan's unless it says otherwise
TITLES: dict[str, str] = {
    "a": "burst into skewed background",
    "b": "steady arrivals and departures",
    "c": "hot spot mid-run",
    "d": "scale-out burst",
    "e": "our own pods heat up",
}
SIZES = (4, 8, 16)  # cpus, cycled over the nodes


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: int
    background: float  # fraction of allocatable cpu used by things no pod explains


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    request_cpu_m: int
    request_memory_mi: int
    usage: tuple[float, float]  # cores, uniform(low, high)
    share: float  # of the scheduled arrivals


WORKLOADS = (
    Workload("api", 50, 128, (0.15, 0.35), 0.45),  # uses 3-7x its request
    Workload("batch", 500, 256, (0.03, 0.12), 0.25),  # uses a fifth of it
    Workload("web", 200, 256, (0.12, 0.24), 0.30),  # about what it asks for
)
OTHER = Workload("other", 500, 512, (0.4, 0.9), 0.0)  # bound by another scheduler
# Scenario e's workload whose usage rises after placement (times rise_factor).
SURGE = Workload("surge", 100, 128, (0.10, 0.20), 0.0)
# What a user would write as "each pod uses about ...": the mean usage of the mix above
# (0.45 x 0.25 + 0.25 x 0.075 + 0.30 x 0.18 = 0.185 cores), rounded as people do.
TYPICAL_USAGE = "200m"
# Scenario d's Deployments: each requests 50m and uses one of these (cores), shuffled by
# the seed over the Deployments, so that the true mean is the same for every seed.
SCALE_REQUEST_CPU_M = 50
SCALE_USAGES = (0.30, 0.35, 0.40, 0.45, 0.50)
SCALE_TYPICAL_USAGE = "400m"  # their mean, exactly


def typical_usage_m(key: str) -> int:
    """The true mean usage of a pod of scenario ``key``, in millicores, as a user who knew
    it would write it (what the "declared amount right" system declares)."""
    text = SCALE_TYPICAL_USAGE if key == "d" else TYPICAL_USAGE
    return int(text.removesuffix("m"))


@dataclasses.dataclass(frozen=True)
class PodEvent:
    at: float  # seconds after the scenario starts
    name: str
    workload: str
    cpu: float  # cores at full usage (the load model's annotation)
    ramp: float  # seconds from bind to full usage
    life: float | None  # seconds from bind to deletion; None: lives to the end
    node: str | None = None  # set: bound at creation by "another scheduler"
    rise_at: float | None = None  # seconds after the start: usage times ``rise`` from then
    rise: float = 1.0


@dataclasses.dataclass(frozen=True)
class HotSpot:
    at: float
    node: str
    cpu: float  # the node's background fraction from then on


@dataclasses.dataclass(frozen=True)
class Deployment:
    """A Deployment of scenario d, created at the start with ``replicas``."""

    name: str
    request_cpu_m: int
    request_memory_mi: int
    cpu: float  # cores each pod uses at full usage (the load model's annotation)
    ramp: float  # seconds from bind to full usage
    replicas: int


@dataclasses.dataclass(frozen=True)
class Scale:
    at: float
    deployment: str
    replicas: int


@dataclasses.dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    pods: tuple[PodEvent, ...]
    hotspots: tuple[HotSpot, ...]
    duration_s: float  # from the first event to the end of the observation
    burst_end_s: float | None  # scenarios a and d: when "the end of the burst" is read
    deployments: tuple[Deployment, ...] = ()
    scales: tuple[Scale, ...] = ()

    @property
    def heat_at_s(self) -> float | None:
        """When the heat appears: the hot spot (c), the surge pods' rise (e); else None."""
        if self.hotspots:
            return min(h.at for h in self.hotspots)
        rises = [e.rise_at for e in self.pods if e.rise_at is not None]
        return min(rises) if rises else None


@dataclasses.dataclass(frozen=True)
class QualityPlan:
    nodes: int
    burst_pods: int
    burst_observe_s: float  # after the burst is created
    steady_s: float  # arrivals period of b and c
    steady_rate: float  # scheduled arrivals per second (Poisson)
    life_s: tuple[float, float]  # uniform lifetime from bind
    tail_s: float  # observation after the last arrival
    other_initial: int  # pods of another scheduler bound at the start of b and c
    other_rate: float  # and arriving per second during b and c
    hotspot_nodes: int
    hotspot_cpu: float
    backlog_pods: int  # the throughput trial (estimate on vs off)
    backlog_repeats: int
    scenarios: tuple[ScenarioKey, ...] = PLAYED
    # Scenario d: Deployments of scale_from replicas, each scaled to scale_to at
    # scale_at_s (time enough for their pods to settle and be measured: the operator's
    # settle time, a rate window, a scrape and a refresh), observed scale_observe_s more.
    scale_deployments: int = 5
    scale_from: int = 4
    scale_to: int = 24
    scale_at_s: float = 150.0
    scale_observe_s: float = 120.0
    # Scenario e: rise_surge surge pods then rise_mix of the usual mix arrive at
    # steady_rate and stay; the surge pods' usage steps up rise_factor-fold at rise_at_s
    # (the last arrivals settled and measured), observed rise_observe_s more.
    rise_surge: int = 40
    rise_mix: int = 160
    rise_factor: float = 5.0
    rise_at_s: float = 150.0
    rise_observe_s: float = 150.0


PLANS: dict[str, QualityPlan] = {
    # Per seed, 8 systems x (scenarios a 100 s + b 230 s + c 230 s + d 270 s, and 4 resets
    # with start-up of 40-90 s each: the smoke run's were ~40 s with 30 pods): 2.3-2.6 h a
    # seed on the realistic pipeline, 7-8 h for 3 seeds (an estimate, not yet measured).
    "full": QualityPlan(
        nodes=15,
        burst_pods=300,
        burst_observe_s=100.0,
        steady_s=200.0,
        steady_rate=2.0,
        life_s=(60.0, 150.0),
        tail_s=30.0,
        other_initial=10,
        other_rate=0.08,
        hotspot_nodes=3,
        hotspot_cpu=0.75,
        backlog_pods=400,
        backlog_repeats=2,
    ),
    # The harness end to end, not a result: scenario d on 6 nodes (3 Deployments, 2 -> 10
    # replicas), metricsched's default policy and kube-scheduler, one seed, one small
    # backlog pair (make bench-quality-smoke): ~9 min. Asked for (--scenarios e), scenario
    # e with 24 surge and 60 other pods, the rise at 100 s: the rebalance pair's harness
    # check (bench/README.md, Rebalancing), ~9 min for the pair.
    "smoke": QualityPlan(
        nodes=6,
        burst_pods=150,
        burst_observe_s=60.0,
        steady_s=60.0,
        steady_rate=1.5,
        life_s=(30.0, 60.0),
        tail_s=15.0,
        other_initial=4,
        other_rate=0.05,
        hotspot_nodes=2,
        hotspot_cpu=0.75,
        backlog_pods=100,
        backlog_repeats=1,
        scenarios=("d",),
        scale_deployments=3,
        scale_from=2,
        scale_to=10,
        scale_at_s=100.0,
        scale_observe_s=60.0,
        rise_surge=24,
        rise_mix=60,
        rise_at_s=100.0,
        rise_observe_s=90.0,
    ),
}


def nodes(count: int, *, seed: int) -> tuple[NodeSpec, ...]:
    """``count`` nodes of 4/8/16 cpus with background skewed low (0.05-0.70, most of them
    under 0.3), shuffled by ``seed`` so that size and background are unrelated."""
    rng = random.Random(f"{seed}-nodes")
    backgrounds = [0.05 + 0.65 * ((i + 0.5) / count) ** 2 for i in range(count)]
    rng.shuffle(backgrounds)
    return tuple(
        NodeSpec(f"q-{i + 1:02d}", SIZES[i % len(SIZES)], round(bg, 3))
        for i, bg in enumerate(backgrounds)
    )


def _draw(rng: random.Random, workload: Workload) -> tuple[float, float]:
    low, high = workload.usage
    return round(rng.uniform(low, high), 3), round(rng.uniform(10.0, 30.0), 1)


def _pick(rng: random.Random) -> Workload:
    return rng.choices(WORKLOADS, weights=[w.share for w in WORKLOADS])[0]


def _burst(plan: QualityPlan, rng: random.Random) -> tuple[PodEvent, ...]:
    pods = []
    for i in range(plan.burst_pods):
        w = _pick(rng)
        cpu, ramp = _draw(rng, w)
        pods.append(PodEvent(0.0, f"a-{i:04d}-{w.name}", w.name, cpu, ramp, None))
    return tuple(pods)


def _steady(
    key: str, plan: QualityPlan, rng: random.Random, node_names: list[str]
) -> tuple[PodEvent, ...]:
    pods: list[PodEvent] = []
    for i in range(plan.other_initial):
        cpu, _ = _draw(rng, OTHER)
        name = f"{key}-o{i:03d}-other"
        pods.append(PodEvent(0.0, name, OTHER.name, cpu, 1.0, None, rng.choice(node_names)))
    t, i = 0.0, 0
    total = plan.steady_rate + plan.other_rate
    while True:
        t += rng.expovariate(total)
        if t >= plan.steady_s:
            break
        life = round(rng.uniform(*plan.life_s), 1)
        if rng.random() < plan.other_rate / total:
            cpu, ramp = _draw(rng, OTHER)
            node = rng.choice(node_names)
            pods.append(
                PodEvent(round(t, 2), f"{key}-{i:04d}-other", "other", cpu, ramp, life, node)
            )
        else:
            w = _pick(rng)
            cpu, ramp = _draw(rng, w)
            pods.append(PodEvent(round(t, 2), f"{key}-{i:04d}-{w.name}", w.name, cpu, ramp, life))
        i += 1
    return tuple(pods)


def _scale_out(plan: QualityPlan, rng: random.Random) -> Scenario:
    usages = [SCALE_USAGES[i % len(SCALE_USAGES)] for i in range(plan.scale_deployments)]
    rng.shuffle(usages)
    deployments = tuple(
        Deployment(
            f"d-{i}",
            SCALE_REQUEST_CPU_M,
            128,
            cpu,
            round(rng.uniform(10.0, 20.0), 1),
            plan.scale_from,
        )
        for i, cpu in enumerate(usages)
    )
    scales = tuple(Scale(plan.scale_at_s, d.name, plan.scale_to) for d in deployments)
    end = plan.scale_at_s + plan.scale_observe_s
    return Scenario("d", TITLES["d"], (), (), end, end, deployments, scales)


def _rise(plan: QualityPlan, rng: random.Random) -> Scenario:
    pods: list[PodEvent] = []
    t = 0.0
    for i in range(plan.rise_surge + plan.rise_mix):
        w = SURGE if i < plan.rise_surge else _pick(rng)
        cpu, ramp = _draw(rng, w)
        event = PodEvent(round(t, 2), f"e-{i:04d}-{w.name}", w.name, cpu, ramp, None)
        if w is SURGE:
            event = dataclasses.replace(event, rise_at=plan.rise_at_s, rise=plan.rise_factor)
        pods.append(event)
        t += rng.expovariate(plan.steady_rate)
    end = plan.rise_at_s + plan.rise_observe_s
    return Scenario("e", TITLES["e"], tuple(pods), (), end, None)


def scenario(key: str, *, plan: QualityPlan, seed: int) -> Scenario:
    """Scenario ``key`` (a to e) of ``plan`` with ``seed``."""
    # b and c draw the same arrivals (c is b plus the hot spot), a its own burst.
    rng = random.Random(f"{seed}-{'steady' if key in ('b', 'c') else key}")
    node_specs = nodes(plan.nodes, seed=seed)
    names = [n.name for n in node_specs]
    if key == "a":
        return Scenario(
            "a", TITLES["a"], _burst(plan, rng), (), plan.burst_observe_s, plan.burst_observe_s
        )
    if key == "d":
        return _scale_out(plan, rng)
    if key == "e":
        return _rise(plan, rng)
    if key not in ("b", "c"):
        raise ValueError(f"unknown scenario {key!r} (a to e)")
    pods = _steady(key, plan, rng, names)
    hotspots: tuple[HotSpot, ...] = ()
    if key == "c":
        # The coolest nodes heat up a third of the way in: where every scheduler has been
        # sending pods, so those that read the metrics must turn away from them.
        coolest = sorted(node_specs, key=lambda n: (n.background, n.name))[: plan.hotspot_nodes]
        at = round(plan.steady_s / 3, 1)
        hotspots = tuple(HotSpot(at, n.name, plan.hotspot_cpu) for n in coolest)
    return Scenario(key, TITLES[key], pods, hotspots, plan.steady_s + plan.tail_s, None)


def own_pods(sc: Scenario) -> int:
    """How many pods the scheduler under test places in ``sc``: its own events, and each
    Deployment's replicas after its last scale."""
    final = {d.name: d.replicas for d in sc.deployments}
    final |= {step.deployment: step.replicas for step in sorted(sc.scales, key=lambda x: x.at)}
    return sum(1 for e in sc.pods if e.node is None) + sum(final.values())


def floor(sc: Scenario, node: NodeSpec, t: float) -> float:
    """``node``'s utilisation ``t`` seconds into ``sc`` from what moving the scheduler's own
    pods cannot change: its background (the hot spot's, from its time on) and the other
    scheduler's pods there (ramping up from their creation, gone at the end of their life),
    without noise."""
    background = node.background
    for spot in sc.hotspots:
        if spot.node == node.name and t >= spot.at:
            background = spot.cpu
    used = sum(
        e.cpu * min(1.0, (t - e.at) / e.ramp if e.ramp > 0 else 1.0)
        for e in sc.pods
        if e.node == node.name and e.at <= t and (e.life is None or t < e.at + e.life)
    )
    return background + used / node.cpu


# --- bodies ------------------------------------------------------------------------------


def node_body(node: NodeSpec, index: int) -> dict[str, Any]:
    """A kwok node labelled for the load model, with its background as an annotation."""
    capacity = {
        "cpu": str(node.cpu),
        "memory": f"{node.cpu * 4}Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    return kwok_node.Node(
        name=node.name,
        capacity=capacity,
        labels={
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            MODELLED_LABEL: "true",
            "node.kubernetes.io/instance-type": f"sim-{node.cpu}cpu",
        },
        annotations={BACKGROUND_CPU: f"{node.background:.3f}"},
        addresses={"InternalIP": instance(index).split(":")[0], "Hostname": node.name},
    ).body()


def _workload(name: str) -> Workload:
    return next(w for w in (*WORKLOADS, OTHER, SURGE) if w.name == name)


def _pod_spec(scheduler: str, *, cpu_m: int, memory_mi: int) -> dict[str, Any]:
    return {
        "schedulerName": scheduler,
        "nodeSelector": {MODELLED_LABEL: "true"},
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "app",
                "image": "registry.invalid/pause:1",
                "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}},
            }
        ],
    }


def pod_body(event: PodEvent, scheduler: str, *, t0: float = 0.0) -> dict[str, Any]:
    """The pod of ``event`` for ``scheduler`` (or bound to ``event.node`` by another);
    ``t0``: the unix time the scenario started (a rising pod's step is at ``t0 +
    event.rise_at``)."""
    w = _workload(event.workload)
    spec = _pod_spec(
        OTHER_SCHEDULER if event.node else scheduler,
        cpu_m=w.request_cpu_m,
        memory_mi=w.request_memory_mi,
    )
    if event.node:
        spec["nodeName"] = event.node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": event.name,
            "labels": {"app": event.workload, QUALITY_LABEL: "true"},
            "annotations": {
                USAGE_CPU: f"{event.cpu:.3f}",
                RAMP: f"{event.ramp:.1f}",
                **(
                    {CPU_PATTERN: f"step({t0 + event.rise_at:.1f}, {event.rise:g})"}
                    if event.rise_at is not None
                    else {}
                ),
            },
        },
        "spec": spec,
    }


def deployment_body(deployment: Deployment, scheduler: str) -> dict[str, Any]:
    """Scenario d's Deployment for ``scheduler`` (kube-controller-manager makes its pods)."""
    labels = {"app": deployment.name, QUALITY_LABEL: "true"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": deployment.name, "labels": labels},
        "spec": {
            "replicas": deployment.replicas,
            "selector": {"matchLabels": {"app": deployment.name}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        USAGE_CPU: f"{deployment.cpu:.3f}",
                        RAMP: f"{deployment.ramp:.1f}",
                    },
                },
                "spec": _pod_spec(
                    scheduler,
                    cpu_m=deployment.request_cpu_m,
                    memory_mi=deployment.request_memory_mi,
                ),
            },
        },
    }


def instance(index: int) -> str:
    """node-exporter's ``instance`` label of the plan's node ``index`` (its InternalIP in
    ``node_body``, port 9100), as the realistic pipeline's metric names it."""
    return f"10.241.0.{index + 1}:9100"


def backlog_pod_body(index: int, scheduler: str) -> dict[str, Any]:
    """A usage-free pod of the throughput trial (10m, 16Mi; the load model adds nothing)."""
    event = PodEvent(0.0, f"bl-{index:05d}", "web", 0.0, 1.0, None)
    body = pod_body(event, scheduler)
    body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "10m", "memory": "16Mi"}
    body["metadata"]["labels"]["app"] = "backlog"
    return body
