#!/usr/bin/env python3
"""A load model for tests and benchmarks: per-node series that answer placement.

Watches the simulated nodes labelled ``loadmodel.metricsched.io/modelled=true`` (by
default) and every pod, and derives each modelled node's utilisation from the pods bound
to it, every tick:

    cpu     = (background cpu fraction * allocatable + sum of its pods' usage now) / allocatable
    memory  = likewise, in bytes
    latency = service time / (1 - min(cpu, 0.98))          (a queueing curve, seconds)

A pod's usage is the simulator's own, independent of its requests: the annotation
``loadmodel.metricsched.io/cpu`` (cores: ``"0.4"``, ``"uniform(0.2,0.6)"``,
``"normal(0.4,0.1)"``, drawn once per pod from the seed and the pod's uid, clipped at 0),
``.../memory`` (a quantity or a distribution of quantities) and ``.../ramp`` (seconds from
being seen bound to full usage, linear; default ``uniform(10,30)``). Once ramped up, a
pod's cpu follows ``.../cpu-pattern``: ``constant`` (the default), ``bursty(period, width,
peak[, offset])`` (``peak`` times its usage for ``width`` seconds every ``period``),
``diurnal(period, amplitude)`` (a sinusoid in step with the clock) or ``step(at, factor)``
(``factor`` times its usage from the unix time ``at`` on). Without a usage
annotation a pod uses its requests; an annotation that does not parse is logged and
ignored. Usage carries multiplicative noise per pod per tick (``--noise``). A node's
background load comes from its annotations ``.../background-cpu`` and
``.../background-memory`` (fractions of allocatable), the cpu drifting by
``.../background-cpu-drift`` (``sine(period, amplitude)``, ``walk(step, every,
bound)``, seeded, or ``linear(slope, limit)``), or from a run-time override (exact,
without drift); ``.../cni`` (veth, calico, cilium or flannel) names the host devices its
pods' traffic crosses.

    GET    /metrics                  node_cpu_utilisation, node_memory_utilisation,
                                     node_latency_seconds, loadmodel_node_pods
                                     (labels node and instance="<InternalIP>:9100")
    GET    /node-exporter/metrics    node-exporter's shape of the same nodes:
                                     node_cpu_seconds_total{cpu,mode,instance} (the cpu
                                     utilisation integrated: user and idle seconds),
                                     node_memory_MemAvailable_bytes, node_memory_MemTotal_bytes,
                                     node_network_receive_bytes_total{device,instance} (eth0
                                     at 1 MB/s per core in use, the CNI's devices at 1 MB/s
                                     per core its pods use, lo at a constant 50 MB/s),
                                     node_pressure_cpu_waiting_seconds_total{instance} (PSI);
                                     labels instance="<InternalIP>:9100" only
    GET    /metrics/cadvisor         the kubelets' cAdvisor series of the pods on modelled
                                     nodes: container_cpu_usage_seconds_total and
                                     container_memory_working_set_bytes, per container (the
                                     pod's usage split by requests) and per pod
                                     (container="", image=""); labels container, image,
                                     namespace, pod, node, instance="<InternalIP>:10250"
    GET    /kube-state-metrics/metrics
                                     kube_pod_info{namespace,pod,uid,node,created_by_kind,
                                     created_by_name} of every pod the model counts
    GET    /truth                    {"t": unix, "nodes": {name: {"cpu", "memory", "latency",
                                     "pods", "eventual_cpu", "ramping"}}}
    POST   /background {"node": "n1", "cpu": 0.6, "memory": 0.2}   a hot spot
    DELETE /background?node=n1       back to the node's annotations

``--record FILE.jsonl`` appends one line per tick, one per pod first seen bound to a
modelled node (with its node's eventual cpu utilisation before and after it) and one per
such pod gone. Only loopback addresses are ever bound.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import json_http  # hack/json_http.py, beside this script
import kube_sync  # hack/kube_sync.py, beside this script
import loadmodel_core as core
import prometheus_client
import prometheus_client.core
import prometheus_client.registry

from metricsched.edges import errors, kube

log = logging.getLogger("loadmodel")


def read_node(body: Mapping[str, Any]) -> core.Node:
    node, problems = core.node_from_body(body)
    for text in problems:
        log.warning("node %s: %s", node.name, text)
    return node


class Model:
    """Nodes, pods and the last tick's samples, behind one lock (watches, ticks and HTTP
    requests run in threads of their own)."""

    def __init__(self, *, seed: int, noise: float, service_time: float, record: IO[str] | None):
        self.seed = seed
        self.noise = noise
        self.service_time = service_time
        self.record = record
        self.noise_rng = random.Random(seed)
        self.lock = threading.Lock()
        self.nodes: dict[str, core.Node] = {}
        self.overrides: dict[str, tuple[float, float]] = {}
        self.pods: dict[str, core.Pod] = {}  # by uid: every pod seen bound, on any node
        self.t = 0.0
        self.samples: dict[str, core.NodeSample] = {}
        self.counters: dict[str, core.NodeCounters] = {}  # by node: node-exporter's view
        self.pod_counters: dict[str, core.PodCounters] = {}  # by uid, on modelled nodes
        self.origins: dict[str, float] = {}  # by node: first sampled (its drift starts)
        self.walks: dict[str, core.Walk] = {}  # by node: its background walk so far

    def write(self, line: Mapping[str, Any]) -> None:
        if self.record is not None:
            self.record.write(json.dumps(line) + "\n")
            self.record.flush()

    def background(self, node: core.Node) -> tuple[float, float]:
        return self.overrides.get(node.name, (node.background_cpu, node.background_memory))

    def eventual_cpu(self, node: core.Node) -> float:
        """The node's cpu utilisation with every pod at full usage (its pattern's mean), no
        noise and the background without drift."""
        used = sum(p.usage.mean_cpu for p in self.pods.values() if p.node == node.name)
        return core.utilisation(self.background(node)[0], node.cpu, used)

    # Nodes -----------------------------------------------------------------------------

    def node_seen(self, body: Mapping[str, Any]) -> None:
        node = read_node(body)
        with self.lock:
            self.nodes[node.name] = node

    def node_gone(self, body: Mapping[str, Any]) -> None:
        with self.lock:
            self.nodes.pop(str((body.get("metadata") or {}).get("name")), None)

    def nodes_listed(self, bodies: list[Mapping[str, Any]]) -> None:
        nodes = [read_node(b) for b in bodies]
        with self.lock:
            self.nodes = {n.name: n for n in nodes}

    # Pods ------------------------------------------------------------------------------

    def pod_seen(self, body: Mapping[str, Any], now: float) -> None:
        uid = str((body.get("metadata") or {}).get("uid") or "")
        if not core.counts(body):
            self.pod_gone(body, now)
            return
        with self.lock:
            if uid in self.pods:
                return
        pod, problems = core.pod_from_body(body, seed=self.seed, seen=now)
        for text in problems:
            log.warning("pod %s: %s", pod.key, text)
        with self.lock:
            if uid in self.pods:
                return
            node = self.nodes.get(pod.node)
            before = self.eventual_cpu(node) if node else 0.0
            self.pods[uid] = pod
            if node is not None:
                after = self.eventual_cpu(node)
                self.write(core.bind_record(now, pod.key, pod.node, pod.scheduler, before, after))

    def pod_gone(self, body: Mapping[str, Any], now: float) -> None:
        uid = str((body.get("metadata") or {}).get("uid") or "")
        with self.lock:
            self._forget(uid, now)

    def _forget(self, uid: str, now: float) -> None:
        pod = self.pods.pop(uid, None)
        if pod is not None and pod.node in self.nodes:
            self.write(core.gone_record(now, pod.key, pod.node))

    def pods_listed(self, bodies: list[Mapping[str, Any]], now: float) -> None:
        """A fresh LIST: pods no longer in it are gone; pods already known keep their
        draws and ramp; new bound ones are seen now."""
        listed = {str((b.get("metadata") or {}).get("uid") or "") for b in bodies}
        with self.lock:
            for uid in [u for u in self.pods if u not in listed]:
                self._forget(uid, now)
        for body in bodies:
            self.pod_seen(body, now)

    # Background overrides ----------------------------------------------------------------

    def set_background(self, node: str, cpu: float | None, memory: float | None) -> None:
        with self.lock:
            known = self.nodes.get(node)
            base = self.overrides.get(node) or (
                (known.background_cpu, known.background_memory) if known else (0.0, 0.0)
            )
            self.overrides[node] = (
                base[0] if cpu is None else cpu,
                base[1] if memory is None else memory,
            )

    def clear_background(self, node: str) -> None:
        with self.lock:
            self.overrides.pop(node, None)

    # Ticks -------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        with self.lock:
            # The counters first, at the rates of the last tick: a counter's slope is what
            # the gauges showed since, and a scrape between ticks (which carries the counter
            # on at that slope) never reads more than the next tick's value.
            dt = now - self.t if self.t else 0.0
            for name, counters in self.counters.items():
                if name in self.samples and name in self.nodes:
                    sample = self.samples[name]
                    core.advance(
                        counters,
                        node=self.nodes[name],
                        cpu=sample.cpu,
                        dt=dt,
                        pod_cores=sample.pod_cores,
                    )
            for pod_counters in self.pod_counters.values():
                core.advance_pod(pod_counters, dt=dt)
            used: dict[str, list[float]] = {n: [0.0, 0.0, 0] for n in self.nodes}
            now_used: dict[str, tuple[float, float]] = {}  # by uid: cores, bytes
            for uid, pod in sorted(self.pods.items()):
                if pod.node not in used:
                    continue
                share = core.ramp_fraction(now - pod.seen, pod.usage.ramp)
                share *= 1 + self.noise_rng.uniform(-self.noise, self.noise)
                pattern = pod.usage.pattern.factor(t=now, seen=pod.seen)
                now_used[uid] = (pod.usage.cpu * share * pattern, pod.usage.memory * share)
                acc = used[pod.node]
                acc[0] += now_used[uid][0]
                acc[1] += now_used[uid][1]
                acc[2] += 1
            samples = {}
            for name, (cpu_used, mem_used, pods) in used.items():
                node = self.nodes[name]
                bg_cpu, bg_mem = self.background_now(node, now)
                cpu = core.utilisation(bg_cpu, node.cpu, cpu_used)
                samples[name] = core.NodeSample(
                    cpu=cpu,
                    memory=core.utilisation(bg_mem, node.memory, mem_used),
                    latency=core.latency(self.service_time, cpu),
                    pods=int(pods),
                    pod_cores=cpu_used,
                )
            # A node or pod gone and back restarts its counters, as the exporters' do.
            for name in [n for n in self.counters if n not in samples]:
                del self.counters[name]
            for name in [n for n in self.origins if n not in samples]:
                del self.origins[name]
                self.walks.pop(name, None)
            for name in samples:
                self.counters.setdefault(name, core.NodeCounters())
            for uid in [u for u in self.pod_counters if u not in now_used]:
                del self.pod_counters[uid]
            for uid, (cpu, memory) in now_used.items():
                pod_counters = self.pod_counters.setdefault(uid, core.PodCounters())
                pod_counters.cpu, pod_counters.memory = cpu, memory
            self.t, self.samples = now, samples
            self.write(core.tick_record(now, samples))

    def background_now(self, node: core.Node, now: float) -> tuple[float, float]:
        """The node's background at ``now``: an override exactly (a test's hot spot), else
        its annotations' with the cpu's drift since the node was first sampled."""
        origin = self.origins.setdefault(node.name, now)
        if node.name in self.overrides:
            return self.overrides[node.name]
        cpu, walk = core.drifted(
            node.drift,
            base=node.background_cpu,
            seed=self.seed,
            node=node.name,
            elapsed=now - origin,
            walk=self.walks.get(node.name, core.Walk()),
        )
        self.walks[node.name] = walk
        return cpu, node.background_memory

    def truth(self, now: float) -> dict[str, Any]:
        with self.lock:
            nodes = {}
            for name, s in sorted(self.samples.items()):
                node = self.nodes.get(name)
                if node is None:
                    continue
                mine = [p for p in self.pods.values() if p.node == name]
                nodes[name] = {
                    "cpu": s.cpu,
                    "memory": s.memory,
                    "latency": s.latency,
                    "pods": s.pods,
                    "eventual_cpu": self.eventual_cpu(node),
                    "ramping": sum(1 for p in mine if now - p.seen < p.usage.ramp),
                }
            return {"t": self.t, "nodes": nodes}


# --- watches ----------------------------------------------------------------------------


class WatchExpiredError(Exception):
    """The watch's resourceVersion is too old (410): re-list."""


WATCH_TIMEOUT_S = 60  # the server ends each watch after this; the next resumes from its rv
LIST_PAGE = 500


def list_all(fetch: Callable[[str | None], Any]) -> tuple[list[Mapping[str, Any]], str]:
    """All items of a paged LIST (``fetch`` gets a page from its continue token) and the
    list's resourceVersion (its first page's)."""
    items: list[Mapping[str, Any]] = []
    version, cont = "", None
    while True:
        page = kube_sync.read_json(fetch(cont))
        items += page.get("items") or []
        meta = page.get("metadata") or {}
        version = version or str(meta.get("resourceVersion") or "")
        cont = meta.get("continue") or None
        if not cont:
            return items, version


def lister(client: Any, path: str, selector: str) -> Callable[[str | None], Any]:
    def fetch(cont: str | None) -> Any:
        query: list[tuple[str, str | int]] = [("limit", LIST_PAGE)]
        query += [("labelSelector", selector)] if selector else []
        query += [("continue", cont)] if cont else []
        return kube_sync.request(
            client, "GET", kube_sync.with_query(path, query), timeout_s=(10, 60)
        )

    return fetch


def watch_events(
    client: Any, path: str, selector: str, version: str
) -> Iterator[Mapping[str, Any]]:
    """The events of one watch from ``version`` until the server ends it."""
    query: list[tuple[str, str | int]] = [
        ("watch", "1"),
        ("resourceVersion", version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", WATCH_TIMEOUT_S),
    ]
    query += [("labelSelector", selector)] if selector else []
    response = kube_sync.request(
        client, "GET", kube_sync.with_query(path, query), timeout_s=(10, WATCH_TIMEOUT_S + 30)
    )
    try:
        pending = b""
        for chunk in response.stream(2**16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)
    finally:
        # A watch left mid-stream has unread bytes: close its connection, never reuse it.
        response.close()
        response.release_conn()


def run_informer(  # noqa: PLR0917
    client: Any,
    path: str,
    selector: str,
    listed: Callable[[list[Mapping[str, Any]]], None],
    seen: Callable[[Mapping[str, Any]], None],
    gone: Callable[[Mapping[str, Any]], None],
) -> None:
    """LIST, then WATCH from the list's resourceVersion; re-list on 410 and on errors
    (with backoff). Runs forever in its own thread."""
    backoff = 1.0
    while True:
        try:
            items, version = list_all(lister(client, path, selector))
            listed(list(items))
            backoff = 1.0
            while True:
                for event in watch_events(client, path, selector, version):
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise WatchExpiredError(str(obj.get("message")))
                        raise RuntimeError(f"watch error: {obj.get('message')}")
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind in ("ADDED", "MODIFIED"):
                        seen(obj)
                    elif kind == "DELETED":
                        gone(obj)
        except WatchExpiredError as e:
            log.info("%s: watch expired (%s); re-listing", path, e)
        except errors.ApiError as e:  # kube_sync.request's error answers
            if e.status != 410:
                log.warning("%s: %s; re-listing in %.0fs", path, errors.describe(e), backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
        except Exception as e:  # supervised: log, back off, re-list
            log.warning("%s: %s; re-listing in %.0fs", path, errors.describe(e), backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 30.0)


def start_watches(model: Model, client: Any, selector: str) -> None:
    def now() -> float:
        return time.time()

    specs = (
        (
            "/api/v1/nodes",
            selector,
            model.nodes_listed,
            model.node_seen,
            model.node_gone,
        ),
        (
            "/api/v1/pods",
            "",
            lambda items: model.pods_listed(items, now()),
            lambda body: model.pod_seen(body, now()),
            lambda body: model.pod_gone(body, now()),
        ),
    )
    for spec in specs:
        threading.Thread(target=run_informer, args=(client, *spec), daemon=True).start()


def run_ticks(model: Model, tick: float) -> None:
    """Tick on a fixed schedule (a slow tick is followed by a shorter wait, not a drift)."""
    next_at = time.monotonic()
    while True:
        try:
            model.tick(time.time())
        except Exception:  # supervised: a bad tick is logged, the next one runs
            log.exception("tick failed")
        next_at += tick
        time.sleep(max(0.0, next_at - time.monotonic()))


# --- HTTP -------------------------------------------------------------------------------


class Collector(prometheus_client.registry.Collector):
    FAMILIES = (
        ("node_cpu_utilisation", "Modelled CPU utilisation of the node, 0..1.", "cpu"),
        (
            "node_memory_utilisation",
            "Modelled memory utilisation of the node, 0..1.",
            "memory",
        ),
        ("node_latency_seconds", "Modelled request latency on the node.", "latency"),
        ("loadmodel_node_pods", "Pods the load model counts on the node.", "pods"),
    )

    def __init__(self, model: Model) -> None:
        self.model = model

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        with self.model.lock:
            samples = dict(self.model.samples)
            instances = {n: node.instance for n, node in self.model.nodes.items()}
        for metric, doc, field in self.FAMILIES:
            family = prometheus_client.core.GaugeMetricFamily(
                metric, doc, labels=["node", "instance"]
            )
            for node, sample in sorted(samples.items()):
                if node in instances:
                    family.add_metric([node, instances[node]], float(getattr(sample, field)))
            yield family


class NodeExporterCollector(prometheus_client.registry.Collector):
    """node-exporter's own series for each modelled node (served on /node-exporter/metrics,
    scraped as job "node-exporter"): the cpu seconds and received bytes the model integrates,
    and the memory in bytes; labelled instance="<InternalIP>:9100" only, as node-exporter's
    are once scraped. Recording rules (hack/prometheus-rules.yml) turn them into
    kube-prometheus's instance:node_cpu_utilisation:rate5m and its kin."""

    def __init__(self, model: Model, clock: Callable[[], float] = time.time) -> None:
        self.model = model
        self.clock = clock

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        with self.model.lock:
            samples = dict(self.model.samples)
            nodes = dict(self.model.nodes)
            since = max(0.0, self.clock() - self.model.t) if self.model.t else 0.0
            counters = {}
            for name, kept in self.model.counters.items():
                # Carried on to this instant at the last tick's rate: the counters grow with
                # wall time, not in tick-sized steps, so a rate over a few scrapes is exact.
                now = kept.copy()
                if name in samples and name in nodes:
                    sample = samples[name]
                    core.advance(
                        now, node=nodes[name], cpu=sample.cpu, dt=since, pod_cores=sample.pod_cores
                    )
                counters[name] = now
        cpu = prometheus_client.core.CounterMetricFamily(
            "node_cpu_seconds_total",
            "Seconds the CPUs spent in each mode.",
            labels=["cpu", "instance", "mode"],
        )
        rx = prometheus_client.core.CounterMetricFamily(
            "node_network_receive_bytes_total",
            "Network device statistic receive_bytes.",
            labels=["device", "instance"],
        )
        waiting = prometheus_client.core.CounterMetricFamily(
            "node_pressure_cpu_waiting_seconds_total",
            "Total time in seconds that processes have waited for CPU time",
            labels=["instance"],
        )
        available = prometheus_client.core.GaugeMetricFamily(
            "node_memory_MemAvailable_bytes",
            "Memory information field MemAvailable_bytes.",
            labels=["instance"],
        )
        total = prometheus_client.core.GaugeMetricFamily(
            "node_memory_MemTotal_bytes",
            "Memory information field MemTotal_bytes.",
            labels=["instance"],
        )
        for name, sample in sorted(samples.items()):
            node = nodes.get(name)
            if node is None or name not in counters:
                continue
            counted = counters[name]
            for index in range(core.cpus(node)):
                cpu.add_metric([str(index), node.instance, "idle"], counted.idle)
                cpu.add_metric([str(index), node.instance, "user"], counted.user)
            for device, value in sorted(counted.rx_bytes.items()):
                rx.add_metric([device, node.instance], value)
            waiting.add_metric([node.instance], counted.cpu_waiting)
            free = max(0.0, 1 - sample.memory) * node.memory
            available.add_metric([node.instance], free)
            total.add_metric([node.instance], node.memory)
        yield from (cpu, rx, waiting, available, total)


def kubelet_instance(node: core.Node) -> str:
    """The kubelet's address as Prometheus labels its targets: the node's, port 10250."""
    return node.instance.rsplit(":", 1)[0] + ":10250"


class CadvisorCollector(prometheus_client.registry.Collector):
    """What the kubelets of the modelled nodes serve on /metrics/cadvisor, scraped as job
    "kubelet" with the label metrics_path="/metrics/cadvisor" (kube-prometheus-stack's
    kubelet ServiceMonitor): per container of each pod bound to a modelled node,
    ``container_cpu_usage_seconds_total`` (the pod's modelled usage integrated, split over
    its containers) and ``container_memory_working_set_bytes``, and the same for the pod's
    own cgroup with container="" and image="". Labelled container, image, namespace, pod,
    and node and instance="<InternalIP>:10250" (which Prometheus adds per kubelet target;
    here one target serves every node). Recording rules (hack/prometheus-rules.yml) join
    them to kube_pod_info, as kube-prometheus-stack's do."""

    LABELS = ("container", "image", "namespace", "pod", "node", "instance")

    def __init__(self, model: Model, clock: Callable[[], float] = time.time) -> None:
        self.model = model
        self.clock = clock

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        with self.model.lock:
            since = max(0.0, self.clock() - self.model.t) if self.model.t else 0.0
            served = []
            for uid, counters in sorted(self.model.pod_counters.items()):
                pod = self.model.pods.get(uid)
                node = self.model.nodes.get(pod.node) if pod else None
                if pod is not None and node is not None:
                    samples = core.cadvisor_samples(pod.containers, counters, since=since)
                    served.append((pod, kubelet_instance(node), samples))
        cpu = prometheus_client.core.CounterMetricFamily(
            "container_cpu_usage_seconds_total",
            "Cumulative cpu time consumed in seconds.",
            labels=self.LABELS,
        )
        memory = prometheus_client.core.GaugeMetricFamily(
            "container_memory_working_set_bytes",
            "Current working set in bytes.",
            labels=self.LABELS,
        )
        for pod, instance, samples in served:
            for s in samples:
                labels = [s.container, s.image, pod.namespace, pod.name, pod.node, instance]
                cpu.add_metric(labels, s.cpu_seconds)
                memory.add_metric(labels, s.memory)
        yield from (cpu, memory)


class KubeStateMetricsCollector(prometheus_client.registry.Collector):
    """kube-state-metrics' ``kube_pod_info`` of every pod the model counts (bound, on any
    node), scraped as job "kube-state-metrics": kube-prometheus-stack's recording rules
    take a pod's node from it."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        with self.model.lock:
            pods = sorted(self.model.pods.values(), key=lambda p: p.key)
        info = prometheus_client.core.GaugeMetricFamily(
            "kube_pod_info",
            "Information about pod.",
            labels=["namespace", "pod", "uid", "node", "created_by_kind", "created_by_name"],
        )
        for pod in pods:
            labels = [pod.namespace, pod.name, pod.uid, pod.node, pod.owner_kind, pod.owner_name]
            info.add_metric(labels, 1.0)
        yield info


def optional_fraction(req: Mapping[str, Any], key: str) -> float | None:
    if req.get(key) is None:
        return None
    value = float(req[key])
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a finite fraction >= 0")
    return value


def make_handler(
    model: Model, registries: Mapping[str, prometheus_client.CollectorRegistry]
) -> type:
    """The HTTP API; ``registries`` by the path each is served on."""

    class Handler(json_http.Replies, BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.urlparse(self.path).path
            if path in registries:
                text = prometheus_client.generate_latest(registries[path])
                self.reply(200, text, prometheus_client.CONTENT_TYPE_LATEST)
            elif path == "/truth":
                self.reply(200, model.truth(time.time()))
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            if urllib.parse.urlparse(self.path).path != "/background":
                self.reply(404, {"error": "not found"})
                return
            try:
                req = self.body()
                cpu = optional_fraction(req, "cpu")
                memory = optional_fraction(req, "memory")
                model.set_background(str(req["node"]), cpu, memory)
            except (KeyError, ValueError, TypeError, AttributeError) as e:
                self.reply(400, {"error": f"bad request: {e}"})
                return
            self.reply(200, {"ok": True})

        def do_DELETE(self) -> None:
            url = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(url.query)
            if url.path != "/background" or "node" not in q:
                self.reply(400, {"error": "DELETE /background?node=N"})
                return
            model.clear_background(q["node"][0])
            self.reply(200, {"ok": True})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path, help="append JSON lines here")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tick", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--noise", type=float, default=0.03, help="per pod per tick, ±")
    parser.add_argument("--service-time", type=float, default=0.05, help="seconds")
    parser.add_argument("--node-selector", default=core.DEFAULT_SELECTOR)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    record = args.record.open("a", encoding="utf-8") if args.record else None
    model = Model(seed=args.seed, noise=args.noise, service_time=args.service_time, record=record)
    client = kube.load_api_client(args.kubeconfig, pool_size=4)
    start_watches(model, client, args.node_selector)
    threading.Thread(target=run_ticks, args=(model, args.tick), daemon=True).start()
    registries = {}
    for path, collector in (
        ("/metrics", Collector(model)),
        ("/node-exporter/metrics", NodeExporterCollector(model)),
        ("/metrics/cadvisor", CadvisorCollector(model)),
        ("/kube-state-metrics/metrics", KubeStateMetricsCollector(model)),
    ):
        registries[path] = prometheus_client.CollectorRegistry(auto_describe=False)
        registries[path].register(collector)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(model, registries))
    log.info("serving on 127.0.0.1:%d (nodes: %s)", args.port, args.node_selector)
    server.serve_forever()


if __name__ == "__main__":
    main()
