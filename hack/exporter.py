#!/usr/bin/env python3
"""A per-node metrics exporter for tests and the demo.

Serves gauges labelled with each simulated node's name (``node``) and address
(``instance``, ``<InternalIP>:9100``) in the Prometheus text format, and lets tests and the
demo change the values at run time over HTTP:

    GET    /metrics                      Prometheus exposition (prometheus-client)
    GET    /values                       {"metric": {"node": value}} as JSON
    POST   /values  {"metric": "node_latency_seconds", "values": {"node-3": 0.9}}
    DELETE /values?metric=M[&node=N]     remove series (a node stops reporting)
    POST   /nodes   {"name": "node-9", "address": "10.240.0.10"}

A metric named ``DCGM_FI_*`` (``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_GPU_UTIL``) is served
in dcgm-exporter's shape instead: labels gpu, UUID, device, modelName and ``Hostname`` (the
node's name), one series per GPU: a value keyed ``node-3/1`` is GPU 1 of node-3, one keyed
``node-3`` its GPU 0.

Every change is written to the state file, so a restarted exporter keeps its values.
Only loopback addresses are ever bound.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import json_http  # hack/json_http.py, beside this script
import prometheus_client
import prometheus_client.core
import prometheus_client.registry

# Default families and a deterministic per-node seed value (index i, 1-based).
DEFAULTS: dict[str, tuple[str, Any]] = {
    "node_latency_seconds": (
        "Simulated request latency seen on the node.",
        lambda i: round(0.05 + 0.03 * ((i * 7) % 10), 3),
    ),
    "node_cpu_utilisation": (
        "Simulated CPU utilisation of the node, 0..1.",
        lambda i: round(0.2 + 0.07 * ((i * 3) % 10), 3),
    ),
    "node_gpu_temperature_celsius": (
        "Simulated GPU temperature.",
        lambda i: float(45 + (i * 5) % 30),
    ),
    "node_error_rate": (
        "Simulated error rate of requests served on the node.",
        lambda i: round(0.001 * ((i * 11) % 7), 4),
    ),
}


METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


DCGM_PREFIX = "DCGM_FI_"
DCGM_LABELS = ["gpu", "UUID", "device", "modelName", "Hostname"]


def dcgm_family(metric: str, per_gpu: dict[str, float]) -> prometheus_client.core.Metric:
    """A DCGM_FI_* field as NVIDIA's dcgm-exporter serves it: one series per GPU (keys
    ``node/gpu``, or ``node`` for its GPU 0), labelled by the node's name in ``Hostname``
    (no ``node`` or ``instance`` of its own)."""
    family = prometheus_client.core.GaugeMetricFamily(
        metric, "DCGM field, set at run time by a test or the demo.", labels=DCGM_LABELS
    )
    for key, value in sorted(per_gpu.items()):
        node, _, gpu = key.partition("/")
        gpu = gpu or "0"
        uuid = "GPU-" + hashlib.sha256(f"{node}/{gpu}".encode()).hexdigest()[:32]
        family.add_metric([gpu, uuid, f"nvidia{gpu}", "NVIDIA A100-SXM4-40GB", node], value)
    return family


def node_address(i: int) -> str:
    """Matches hack/cluster.py's node_body(): node-i gets InternalIP 10.240.(i//250).(i%250+1)."""
    return f"10.240.{i // 250}.{i % 250 + 1}"


class State:
    def __init__(self, path: Path, nodes: int) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.addresses: dict[str, str] = {}
        self.values: dict[str, dict[str, float]] = {}
        if path.exists():
            saved = json.loads(path.read_text())
            self.addresses = saved["addresses"]
            self.values = saved["values"]
        # Seed node-1..N that are not known yet (a cluster grown with NODES=...).
        for i in range(1, nodes + 1):
            name = f"node-{i}"
            if name in self.addresses:
                continue
            self.addresses[name] = node_address(i)
            for metric, (_, seed) in DEFAULTS.items():
                self.values.setdefault(metric, {})[name] = float(seed(i))
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"addresses": self.addresses, "values": self.values}))
        tmp.replace(self.path)


class Collector(prometheus_client.registry.Collector):
    def __init__(self, state: State) -> None:
        self.state = state

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        with self.state.lock:
            snapshot = {m: dict(v) for m, v in self.state.values.items()}
            addresses = dict(self.state.addresses)
        for metric, per_node in sorted(snapshot.items()):
            doc = DEFAULTS.get(metric, ("Set at run time by a test or the demo.", None))[0]
            if metric.startswith(DCGM_PREFIX):
                yield dcgm_family(metric, per_node)
                continue
            family = prometheus_client.core.GaugeMetricFamily(
                metric, doc, labels=["node", "instance"]
            )
            for node, value in sorted(per_node.items()):
                family.add_metric([node, f"{addresses.get(node, node)}:9100"], value)
            yield family


def make_handler(state: State, registry: prometheus_client.CollectorRegistry) -> type:
    class Handler(json_http.Replies, BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.urlparse(self.path).path
            if path == "/metrics":
                self.reply(
                    200,
                    prometheus_client.generate_latest(registry),
                    prometheus_client.CONTENT_TYPE_LATEST,
                )
            elif path == "/values":
                with state.lock:
                    self.reply(200, state.values)
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            path = urllib.parse.urlparse(self.path).path
            try:
                req = self.body()
                if path == "/values":
                    metric = str(req["metric"])
                    values = req.get("values") or {str(req["node"]): req["value"]}
                    parsed = {str(n): float(v) for n, v in values.items()}
                    if not METRIC_NAME.fullmatch(metric):
                        raise ValueError(f"bad metric name {metric!r}")
                    with state.lock:
                        state.values.setdefault(metric, {}).update(parsed)
                        for node in parsed:
                            state.addresses.setdefault(node, node)
                        state.save()
                    self.reply(200, {"ok": True})
                elif path == "/nodes":
                    with state.lock:
                        state.addresses[str(req["name"])] = str(req.get("address") or req["name"])
                        state.save()
                    self.reply(200, {"ok": True})
                else:
                    self.reply(404, {"error": "not found"})
            except (KeyError, ValueError, TypeError, json.JSONDecodeError) as e:
                self.reply(400, {"error": f"bad request: {e}"})

        def do_DELETE(self) -> None:
            url = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(url.query)
            if url.path != "/values" or "metric" not in q:
                self.reply(400, {"error": "DELETE /values?metric=M[&node=N]"})
                return
            metric = q["metric"][0]
            with state.lock:
                if "node" in q:
                    state.values.get(metric, {}).pop(q["node"][0], None)
                else:
                    state.values.pop(metric, None)
                state.save()
            self.reply(200, {"ok": True})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=6)
    args = parser.parse_args()
    state = State(args.state, args.nodes)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(Collector(state))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state, registry))
    server.serve_forever()


if __name__ == "__main__":
    main()
