"""The load model's arithmetic (hack/loadmodel.py): what a pod uses and how it varies
over the pod's life, how a node's utilisation, background drift and latency follow, the
counters node-exporter and cAdvisor would serve of them, and the record lines.

Pure: no I/O, no clocks, no logging. A problem with an input (an annotation that does not
parse, unreadable requests) is returned as text beside a usable value; the process logs it.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from metricsched.core import parse, quantity

PREFIX = "loadmodel.metricsched.io/"
POD_CPU = PREFIX + "cpu"
POD_MEMORY = PREFIX + "memory"
POD_RAMP = PREFIX + "ramp"
POD_CPU_PATTERN = PREFIX + "cpu-pattern"
NODE_BACKGROUND_CPU = PREFIX + "background-cpu"
NODE_BACKGROUND_MEMORY = PREFIX + "background-memory"
NODE_BACKGROUND_CPU_DRIFT = PREFIX + "background-cpu-drift"
NODE_CNI = PREFIX + "cni"
DEFAULT_SELECTOR = PREFIX + "modelled=true"
DEFAULT_RAMP = "uniform(10,30)"
MAX_RHO = 0.98  # the latency curve's cap: a saturated node is slow, not infinitely slow


# --- distributions, ramps, arithmetic ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Distribution:
    """A fixed value or a distribution to draw one value from."""

    kind: Literal["fixed", "uniform", "normal"]
    a: float
    b: float = 0.0

    def draw(self, rng: random.Random) -> float:
        """One value, clipped at 0 (a pod never uses a negative amount)."""
        if self.kind == "uniform":
            value = rng.uniform(self.a, self.b)
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:
            value = self.a
        return max(0.0, value)

    @property
    def mean(self) -> float:
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a


_CALL = re.compile(r"\s*(uniform|normal)\s*\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*")


def seconds(text: str) -> float:
    return float(text)


def amount(text: str) -> float:
    """A Kubernetes quantity as a float: cores for cpu ("0.4", "400m"), bytes for memory."""
    return quantity.parse_nano(text) / quantity.NANO


def parse_distribution(text: str, unit: Callable[[str], float]) -> Distribution:
    """``"0.4"``, ``"uniform(a,b)"`` or ``"normal(mean,sd)"``, each value read by ``unit``.
    Raises ValueError on anything else (a non-finite value, low > high, a negative sd)."""
    match = _CALL.fullmatch(text)
    if match is None:
        dist = Distribution("fixed", unit(text.strip()))
    else:
        kind: Literal["uniform", "normal"] = "uniform" if match[1] == "uniform" else "normal"
        dist = Distribution(kind, unit(match[2]), unit(match[3]))
        if kind == "uniform" and dist.a > dist.b:
            raise ValueError(f"{text!r}: uniform(low, high) needs low <= high")
        if kind == "normal" and dist.b < 0:
            raise ValueError(f"{text!r}: normal(mean, sd) needs sd >= 0")
    if not (math.isfinite(dist.a) and math.isfinite(dist.b)):
        raise ValueError(f"{text!r}: not a finite value")
    return dist


def pod_rng(seed: int, uid: str, what: str) -> random.Random:
    """The generator for one of a pod's draws: the same seed and uid give the same usage."""
    return random.Random(f"{seed}:{uid}:{what}")


def ramp_fraction(elapsed: float, ramp: float) -> float:
    """How much of its full usage a pod uses ``elapsed`` seconds after it was seen bound."""
    if ramp <= 0 or elapsed >= ramp:
        return 1.0
    return max(0.0, elapsed / ramp)


def utilisation(background: float, allocatable: float, used: float) -> float:
    """(background fraction * allocatable + used) / allocatable; 0 on a node without any."""
    if allocatable <= 0:
        return 0.0
    return (background * allocatable + used) / allocatable


def latency(service_time: float, cpu: float) -> float:
    return service_time / (1 - min(cpu, MAX_RHO))


# --- usage that varies over a pod's life, background that drifts -------------------------

_FUNCTION = re.compile(r"\s*([a-z]+)\s*\(([^()]*)\)\s*")


def _call(text: str, arities: Mapping[str, tuple[int, int]]) -> tuple[str, list[float]]:
    """``name(x, y, ...)``: a name of ``arities`` and between its least and most numbers,
    each finite. Raises ValueError on anything else."""
    match = _FUNCTION.fullmatch(text)
    if match is None or match[1] not in arities:
        raise ValueError(f"{text!r}: expected " + " or ".join(f"{k}(...)" for k in arities))
    least, most = arities[match[1]]
    args = [float(a) for a in match[2].split(",")] if match[2].strip() else []
    if not least <= len(args) <= most:
        raise ValueError(f"{text!r}: {match[1]} takes {least} to {most} numbers")
    if not all(math.isfinite(a) for a in args):
        raise ValueError(f"{text!r}: not a finite value")
    return match[1], args


@dataclasses.dataclass(frozen=True)
class Pattern:
    """How a pod's cpu usage varies once it has ramped up, as a factor of its usage.

    - ``constant``: 1.
    - ``bursty``: ``peak`` for ``width`` seconds every ``period`` seconds, 1 in between,
      the spikes starting at ``seen + offset + k * period`` (``seen``: when the pod was
      first seen bound). A pod's own timer (a cron, a garbage collector), so pods spike
      out of step unless their offsets agree. Its mean is above 1 when ``peak`` is.
    - ``diurnal``: ``1 + amplitude * sin(2 pi t / period)``, ``t`` in unix seconds: in step
      with the clock, as a day is for every pod, so the pods of a workload (and their new
      replicas) peak together. Its mean over a period is 1.
    - ``step``: 1 before the unix time ``at``, ``peak`` from then on: a workload whose
      usage rises (or falls) for good at a moment of the clock, so its pods and the
      replicas that replace them later use the new level alike. Its mean is ``peak``
      (the level that lasts).
    """

    kind: Literal["constant", "bursty", "diurnal", "step"] = "constant"
    period: float = 0.0
    width: float = 0.0
    peak: float = 1.0
    amplitude: float = 0.0
    offset: float | None = None  # bursty; None until draw_usage draws it for the pod
    at: float = 0.0  # step: unix seconds

    def factor(self, *, t: float, seen: float) -> float:
        if self.kind == "bursty":
            into = (t - seen - (self.offset or 0.0)) % self.period
            return self.peak if into < self.width else 1.0
        if self.kind == "diurnal":
            return 1 + self.amplitude * math.sin(2 * math.pi * t / self.period)
        if self.kind == "step":
            return self.peak if t >= self.at else 1.0
        return 1.0

    @property
    def mean(self) -> float:
        """The factor's mean over a whole period."""
        if self.kind == "bursty":
            return 1 + (self.peak - 1) * self.width / self.period
        if self.kind == "step":
            return self.peak
        return 1.0


def parse_pattern(text: str) -> Pattern:
    """``"constant"``, ``"bursty(period, width, peak)"`` (seconds, seconds, a factor; a
    fourth number fixes the offset of the spikes in seconds, else it is drawn per pod),
    ``"diurnal(period, amplitude)"`` (seconds, 0..1) or ``"step(at, factor)"`` (unix
    seconds, a factor >= 0). Raises ValueError on anything else."""
    if text.strip() == "constant":
        return Pattern()
    kind, args = _call(text, {"bursty": (3, 4), "diurnal": (2, 2), "step": (2, 2)})
    if kind == "step":
        if args[1] < 0:
            raise ValueError(f"{text!r}: the factor must be >= 0")
        return Pattern("step", peak=args[1], at=args[0])
    period = args[0]
    if period <= 0:
        raise ValueError(f"{text!r}: the period must be above 0 seconds")
    if kind == "bursty":
        width, peak = args[1], args[2]
        if not 0 <= width <= period:
            raise ValueError(f"{text!r}: the width must be within 0..period")
        if peak < 0:
            raise ValueError(f"{text!r}: the peak must be a factor >= 0")
        offset = args[3] if len(args) == 4 else None
        return Pattern("bursty", period=period, width=width, peak=peak, offset=offset)
    amplitude = args[1]
    if not 0 <= amplitude <= 1:
        # Above 1 the usage would go negative at the trough.
        raise ValueError(f"{text!r}: the amplitude must be within 0..1")
    return Pattern("diurnal", period=period, amplitude=amplitude)


@dataclasses.dataclass(frozen=True)
class Drift:
    """How a node's background cpu moves about its annotated value over the node's life
    (``elapsed``: seconds since the model first sampled the node).

    - ``sine``: ``amplitude * sin(2 pi elapsed / period + phase)``, the phase drawn per node
      from the seed; its mean over a period is 0.
    - ``walk``: every ``every`` seconds a step drawn from ``uniform(-step, step)`` (per node
      and step number, from the seed), folded back at the walls ``bound`` either side of
      the annotated value and at a background of 0: autocorrelated, unlike the noise.
    - ``linear``: ``slope * elapsed`` (a fraction of allocatable per second), the
      background held within [0, ``limit``]: a node heating up (or cooling down) steadily,
      what a forecast sees coming before an instant reading does.
    """

    kind: Literal["sine", "walk", "linear"]
    period: float = 0.0
    amplitude: float = 0.0
    step: float = 0.0
    every: float = 0.0
    bound: float = 0.0
    slope: float = 0.0
    limit: float = 0.0


def parse_drift(text: str) -> Drift:
    """``"sine(period, amplitude)"`` (seconds, a fraction of allocatable),
    ``"walk(step, every, bound)"`` (a fraction, seconds, a fraction) or
    ``"linear(slope, limit)"`` (a fraction per second, a fraction). Raises ValueError on
    anything else."""
    kind, args = _call(text, {"sine": (2, 2), "walk": (3, 3), "linear": (2, 2)})
    if kind == "linear":
        if args[1] < 0:
            raise ValueError(f"{text!r}: linear(slope, limit >= 0)")
        return Drift("linear", slope=args[0], limit=args[1])
    if kind == "sine":
        if args[0] <= 0 or args[1] < 0:
            raise ValueError(f"{text!r}: sine(period > 0, amplitude >= 0)")
        return Drift("sine", period=args[0], amplitude=args[1])
    if args[0] < 0 or args[1] <= 0 or args[2] < 0:
        raise ValueError(f"{text!r}: walk(step >= 0, every > 0, bound >= 0)")
    return Drift("walk", step=args[0], every=args[1], bound=args[2])


@dataclasses.dataclass(frozen=True)
class Walk:
    """Where a node's random walk has got to: its offset from the annotated background
    after ``steps`` steps."""

    steps: int = 0
    offset: float = 0.0


def fold(x: float, low: float, high: float) -> float:
    """``x`` folded back into [low, high] at its edges, as a walk between walls moves."""
    width = high - low
    if width <= 0:
        return low
    x = (x - low) % (2 * width)
    return low + (2 * width - x if x > width else x)


def drifted(
    drift: Drift | None, *, base: float, seed: int, node: str, elapsed: float, walk: Walk
) -> tuple[float, Walk]:
    """The node's background cpu ``elapsed`` seconds after it was first sampled (never
    below 0), and its walk advanced to then. Each step has its own generator, so the same
    seed and node give the same walk however the ticks fall."""
    if drift is None:
        return base, walk
    if drift.kind == "linear":
        return min(drift.limit, max(0.0, base + drift.slope * max(0.0, elapsed))), walk
    if drift.kind == "sine":
        phase = random.Random(f"{seed}:{node}:drift").uniform(0, 2 * math.pi)
        wave = drift.amplitude * math.sin(2 * math.pi * elapsed / drift.period + phase)
        return max(0.0, base + wave), walk
    due = max(walk.steps, int(max(0.0, elapsed) // drift.every))
    offset = walk.offset
    for k in range(walk.steps, due):
        step = random.Random(f"{seed}:{node}:drift:{k}").uniform(-drift.step, drift.step)
        offset = fold(offset + step, max(-drift.bound, -base), drift.bound)
    return max(0.0, base + offset), Walk(due, offset)


@dataclasses.dataclass(frozen=True)
class Usage:
    """A pod's full usage (cores, bytes), its ramp (seconds) and how its cpu varies."""

    cpu: float
    memory: float
    ramp: float
    pattern: Pattern = Pattern()

    @property
    def mean_cpu(self) -> float:
        """Cores once ramped up, averaged over the pattern's period (without noise)."""
        return self.cpu * self.pattern.mean


def draw_usage(
    body: Mapping[str, Any], *, seed: int, requests: tuple[float, float]
) -> tuple[Usage, list[str]]:
    """The pod's usage from its annotations, else its ``requests`` (cores, bytes), and its
    cpu pattern (constant unless annotated); and the problems with annotations that did not
    parse (each such annotation is ignored)."""
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    uid = str(meta.get("uid") or "")
    problems: list[str] = []
    values: list[float] = []
    fields = (
        (POD_CPU, amount, requests[0], None),
        (POD_MEMORY, amount, requests[1], None),
        (POD_RAMP, seconds, 0.0, DEFAULT_RAMP),
    )
    for key, unit, fallback, default in fields:
        text = annotations.get(key)
        dist = None
        if text is not None:
            try:
                if not isinstance(text, str):
                    raise TypeError("not a string")
                dist = parse_distribution(text, unit)
            except (ValueError, TypeError, quantity.QuantityError) as e:
                problems.append(f"{key}={text!r} ignored: {e}")
        if dist is None and default is not None:
            dist = parse_distribution(default, unit)
        values.append(dist.draw(pod_rng(seed, uid, key)) if dist is not None else fallback)
    pattern = Pattern()
    text = annotations.get(POD_CPU_PATTERN)
    if text is not None:
        try:
            if not isinstance(text, str):
                raise TypeError("not a string")
            pattern = parse_pattern(text)
        except (ValueError, TypeError) as e:
            problems.append(f"{POD_CPU_PATTERN}={text!r} ignored: {e}")
    if pattern.kind == "bursty" and pattern.offset is None:
        offset = pod_rng(seed, uid, POD_CPU_PATTERN).uniform(0, pattern.period)
        pattern = dataclasses.replace(pattern, offset=offset)
    return Usage(values[0], values[1], values[2], pattern), problems


def pod_requests(body: Mapping[str, Any]) -> tuple[tuple[float, float], str | None]:
    """The pod's effective requests (cores, bytes) as kube-scheduler counts them; (0, 0)
    and the problem if they cannot be read."""
    try:
        requests = parse.pod_from_body(body).requests
    except (ValueError, TypeError, KeyError, AttributeError) as e:  # ParseError is a ValueError
        return (0.0, 0.0), f"unreadable requests counted as 0: {e}"
    return (requests.milli_cpu / 1000, float(requests.memory)), None


def pod_key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def counts(body: Mapping[str, Any]) -> bool:
    """A pod counts while it is bound, not terminal and not being deleted."""
    meta = body.get("metadata") or {}
    phase = (body.get("status") or {}).get("phase")
    node = (body.get("spec") or {}).get("nodeName")
    return bool(node) and phase not in ("Succeeded", "Failed") and not meta.get("deletionTimestamp")


def round6(value: float) -> float:
    return round(value, 6)


def tick_record(t: float, nodes: Mapping[str, NodeSample]) -> dict[str, Any]:
    return {
        "t": round(t, 3),
        "nodes": {
            name: {
                "cpu": round6(s.cpu),
                "memory": round6(s.memory),
                "latency": round6(s.latency),
                "pods": s.pods,
            }
            for name, s in sorted(nodes.items())
        },
    }


def bind_record(  # noqa: PLR0917 (a record's fields)
    t: float, pod: str, node: str, scheduler: str, before: float, after: float
) -> dict[str, Any]:
    return {
        "t": round(t, 3),
        "bind": pod,
        "node": node,
        "scheduler": scheduler,
        "cpu_before": round6(before),
        "cpu_after": round6(after),
    }


def gone_record(t: float, pod: str, node: str) -> dict[str, Any]:
    return {"t": round(t, 3), "gone": pod, "node": node}


# --- nodes and pods as the model holds them ----------------------------------------------


@dataclasses.dataclass
class Node:
    name: str
    instance: str
    cpu: float  # allocatable cores
    memory: float  # allocatable bytes
    background_cpu: float
    background_memory: float
    drift: Drift | None = None  # of background_cpu
    cni: str = "veth"  # which host devices its pods' traffic crosses (CNI_DEVICES)


@dataclasses.dataclass(frozen=True)
class Container:
    """A container as cAdvisor labels it, and its shares of its pod's cpu and memory."""

    name: str
    image: str
    cpu_share: float
    memory_share: float


@dataclasses.dataclass(frozen=True)
class Pod:
    key: str
    node: str
    scheduler: str
    usage: Usage
    seen: float  # when first seen bound (unix seconds): its ramp starts here
    uid: str = ""
    containers: tuple[Container, ...] = ()
    owner_kind: str = ""  # its controller's, as kube-state-metrics' created_by_kind
    owner_name: str = ""

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[-1]


def containers_of(body: Mapping[str, Any]) -> tuple[tuple[Container, ...], list[str]]:
    """The containers that run for the pod's life (its containers, and its sidecars: init
    containers with ``restartPolicy: Always``), each with its share of the pod's cpu and
    of its memory, in proportion to its requests of each (its limits where it states no
    request, as the API server defaults them; evenly where none requests the resource);
    and the problems with quantities that did not parse (counted as 0)."""
    spec = body.get("spec") or {}
    running = [
        c
        for c in spec.get("initContainers") or []
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    ]
    running += [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    problems: list[str] = []
    weights: dict[str, list[float]] = {"cpu": [], "memory": []}
    for container in running:
        resources = container.get("resources") or {}
        for resource, amounts in weights.items():
            text = (resources.get("requests") or {}).get(resource)
            if text is None:
                text = (resources.get("limits") or {}).get(resource)
            try:
                amounts.append(amount(str(text)) if text is not None else 0.0)
            except quantity.QuantityError as e:
                problems.append(f"container {container.get('name')!r} {resource}: {e}")
                amounts.append(0.0)
    shares = {r: _shares(w) for r, w in weights.items()}
    containers = tuple(
        Container(
            name=str(c.get("name") or ""),
            image=str(c.get("image") or "unknown"),  # cAdvisor's rules drop image=""
            cpu_share=shares["cpu"][i],
            memory_share=shares["memory"][i],
        )
        for i, c in enumerate(running)
    )
    return containers, problems


def _shares(weights: list[float]) -> list[float]:
    total = sum(w for w in weights if w > 0)
    if total <= 0:
        return [1 / len(weights)] * len(weights)
    return [max(0.0, w) / total for w in weights]


def _controller(meta: Mapping[str, Any]) -> tuple[str, str]:
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind") or ""), str(ref.get("name") or "")
    return "", ""


def pod_from_body(body: Mapping[str, Any], *, seed: int, seen: float) -> tuple[Pod, list[str]]:
    """A bound pod as the model holds it from ``seen`` on: its usage drawn (draw_usage),
    its containers and controller; and any problems with its body (each one ignored)."""
    requests, problem = pod_requests(body)
    usage, problems = draw_usage(body, seed=seed, requests=requests)
    containers, more = containers_of(body)
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    kind, name = _controller(meta)
    pod = Pod(
        key=pod_key(body),
        node=str(spec.get("nodeName")),
        scheduler=str(spec.get("schedulerName")),
        usage=usage,
        seen=seen,
        uid=str(meta.get("uid") or ""),
        containers=containers,
        owner_kind=kind,
        owner_name=name,
    )
    return pod, ([problem] if problem else []) + problems + more


@dataclasses.dataclass(frozen=True)
class NodeSample:
    cpu: float
    memory: float
    latency: float
    pods: int
    pod_cores: float = 0.0  # what its pods use of the cpu (cores), background aside


def fraction(annotations: Mapping[str, Any], key: str, problems: list[str]) -> float:
    """A node's background fraction (>= 0) from an annotation; 0 if absent or unreadable."""
    text = annotations.get(key)
    if text is None:
        return 0.0
    try:
        value = float(text)
        if not math.isfinite(value) or value < 0:
            raise ValueError("not a finite fraction >= 0")
    except (TypeError, ValueError) as e:
        problems.append(f"{key}={text!r} ignored: {e}")
        return 0.0
    return value


def node_from_body(body: Mapping[str, Any]) -> tuple[Node, list[str]]:
    """The node's allocatable cpu and memory, address, background and its drift; and any
    problems (an annotation that does not parse is ignored)."""
    meta = body.get("metadata") or {}
    name = str(meta.get("name"))
    annotations = meta.get("annotations") or {}
    status = body.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    address = next(
        (a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"),
        name,
    )
    problems: list[str] = []
    sizes = []
    for resource in ("cpu", "memory"):
        try:
            sizes.append(amount(str(alloc.get(resource, "0"))))
        except quantity.QuantityError as e:
            problems.append(f"allocatable {resource} unreadable, counted as 0: {e}")
            sizes.append(0.0)
    node = Node(
        name=name,
        instance=f"{address}:9100",
        cpu=sizes[0],
        memory=sizes[1],
        background_cpu=fraction(annotations, NODE_BACKGROUND_CPU, problems),
        background_memory=fraction(annotations, NODE_BACKGROUND_MEMORY, problems),
        drift=_drift(annotations, problems),
        cni=_cni(annotations, problems),
    )
    return node, problems


def _cni(annotations: Mapping[str, Any], problems: list[str]) -> str:
    text = str(annotations.get(NODE_CNI, "veth"))
    if text not in CNI_DEVICES:
        problems.append(f"{NODE_CNI}={text!r} ignored: one of {', '.join(CNI_DEVICES)}")
        return "veth"
    return text


def _drift(annotations: Mapping[str, Any], problems: list[str]) -> Drift | None:
    text = annotations.get(NODE_BACKGROUND_CPU_DRIFT)
    if text is None:
        return None
    try:
        return parse_drift(str(text))
    except ValueError as e:
        problems.append(f"{NODE_BACKGROUND_CPU_DRIFT}={text!r} ignored: {e}")
        return None


# --- node-exporter-shaped counters -------------------------------------------------------

# Receive traffic the load model attributes to a node: eth0 (the NIC) carries this many
# bytes per second per core in use (background and pods), lo a constant amount that has
# nothing to do with load, and the host-side devices of the node's CNI (``CNI_DEVICES``,
# chosen by the node annotation ``loadmodel.metricsched.io/cni``) the pods' share again:
# a pod's packets cross the NIC and then its own device, so a sum over every device but lo
# (kube-prometheus's instance:node_network_receive_bytes_excluding_lo:rate5m) counts pod
# traffic twice, three times on Flannel (the veth and the cni0 bridge). Why the network
# recipe names these devices.
RX_BYTES_PER_CORE = 1_000_000.0
LO_RX_BYTES = 50_000_000.0
CNI_DEVICES: dict[str, tuple[str, ...]] = {
    "veth": ("veth0",),  # a veth pair per pod (the bridge and ptp plugins)
    "calico": ("cali0",),  # Calico: cali<id> per pod
    "cilium": ("lxc0",),  # Cilium: lxc<id> per pod
    "flannel": ("veth0", "cni0"),  # Flannel: the pod's veth and the cni0 bridge
}
# cpu pressure (PSI "some": the share of time at least one task waited for a cpu) as the
# model draws it from utilisation: none up to PSI_ONSET, then rising linearly to all of
# the time at a fully busy node. Real PSI starts earlier and noisier; what matters to a
# recipe is that it rises with contention and is served as node-exporter serves it
# (node_pressure_cpu_waiting_seconds_total, a counter of seconds).
PSI_ONSET = 0.6


def cpu_pressure(cpu: float) -> float:
    """PSI "some" of cpu (a share of time, 0..1) at utilisation ``cpu``."""
    return min(1.0, max(0.0, (cpu - PSI_ONSET) / (1 - PSI_ONSET)))


@dataclasses.dataclass
class NodeCounters:
    """What node-exporter would report of a node: the seconds each of its cpus spent idle
    and busy (every cpu alike: node-exporter's per-cpu series are made from these two at
    scrape time, so a tick costs the same on a 64-core node), the seconds some task waited
    for a cpu (PSI), and received bytes per device. The seconds are the node's utilisation
    integrated over time, so ``rate(node_cpu_seconds_total{mode="idle"}[w])`` averaged over
    cpus is 1 - cpu."""

    idle: float = 0.0
    user: float = 0.0
    cpu_waiting: float = 0.0
    rx_bytes: dict[str, float] = dataclasses.field(default_factory=dict)

    def copy(self) -> NodeCounters:
        return NodeCounters(self.idle, self.user, self.cpu_waiting, dict(self.rx_bytes))


def cpus(node: Node) -> int:
    """node-exporter's cpu label values: one per whole core, at least one."""
    return max(1, math.ceil(node.cpu))


def advance(
    counters: NodeCounters, *, node: Node, cpu: float, dt: float, pod_cores: float = 0.0
) -> None:
    """Add ``dt`` seconds at utilisation ``cpu`` (clipped to 0..1) to a node's counters:
    each cpu spends the fraction in mode user and the rest idle; the NIC receives with
    every core in use, the CNI's devices with the ``pod_cores`` its pods use."""
    busy = min(1.0, max(0.0, cpu))
    counters.idle += (1 - busy) * dt
    counters.user += busy * dt
    counters.cpu_waiting += cpu_pressure(cpu) * dt
    cores = max(0.0, cpu) * node.cpu
    pods = max(0.0, pod_cores)
    devices = [("eth0", cores), *((d, pods) for d in CNI_DEVICES[node.cni])]
    for device, used in devices:
        counters.rx_bytes[device] = (
            counters.rx_bytes.get(device, 0.0) + used * RX_BYTES_PER_CORE * dt
        )
    counters.rx_bytes["lo"] = counters.rx_bytes.get("lo", 0.0) + LO_RX_BYTES * dt


# --- cAdvisor-shaped counters --------------------------------------------------------------


@dataclasses.dataclass
class PodCounters:
    """What cAdvisor would report of a pod: the cpu seconds its containers used in all
    (each container's are its share), and its cpu (cores) and memory (bytes) at the last
    tick. The seconds grow at that tick's cpu until the next tick (advance_pod), as the
    node's do, so a rate over two scrapes is the usage the ticks modelled in between."""

    cpu_seconds: float = 0.0
    cpu: float = 0.0
    memory: float = 0.0


def advance_pod(counters: PodCounters, *, dt: float) -> None:
    """Add ``dt`` seconds at the last tick's cpu."""
    counters.cpu_seconds += max(0.0, counters.cpu) * max(0.0, dt)


@dataclasses.dataclass(frozen=True)
class ContainerSample:
    container: str  # "" for the pod's own cgroup
    image: str
    cpu_seconds: float
    memory: float


def cadvisor_samples(
    containers: tuple[Container, ...], counters: PodCounters, *, since: float
) -> list[ContainerSample]:
    """cAdvisor's series of one pod ``since`` seconds after the last tick: one per container
    (its shares of the pod's cpu seconds and memory) and the pod's own cgroup
    (``container=""``, ``image=""``), which holds all of them, as cAdvisor reports it: so
    a sum over a pod's series without ``container!=""`` counts it twice."""
    total = counters.cpu_seconds + max(0.0, counters.cpu) * max(0.0, since)
    samples = [
        ContainerSample(c.name, c.image, total * c.cpu_share, counters.memory * c.memory_share)
        for c in containers
    ]
    samples.append(ContainerSample("", "", total, counters.memory))
    return samples
