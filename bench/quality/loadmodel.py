"""The load model as the quality benchmark sees it: its HTTP API and its record file.

hack/cluster.py starts the load model with the cluster (port PORT_BASE + 101, record
``<state>/loadmodel.jsonl``) and writes both into the cluster's env file as
``METRICSCHED_LOADMODEL_URL`` and ``METRICSCHED_LOADMODEL_RECORD``; Prometheus scrapes it
every ``METRICSCHED_LOADMODEL_SCRAPE`` and evaluates hack/prometheus-rules.yml every
``METRICSCHED_RULE_INTERVAL``. When the cluster runs none (a hack/cluster.py from before
the load model), ``start_own`` starts one on the same port and adds its scrape jobs (the
model's gauges, node-exporter's counters, cAdvisor's and kube-state-metrics' series, as
hack/cluster.py has them) and the recording rules to the cluster's Prometheus. Blocking
calls (urllib): run them in a thread.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import env as env_mod

SCRAPE_ENV = "METRICSCHED_LOADMODEL_SCRAPE"
RULE_INTERVAL_ENV = "METRICSCHED_RULE_INTERVAL"
CPU_QUERY = "max by (node) (node_cpu_utilisation)"
RULES = env_mod.ROOT / "hack" / "prometheus-rules.yml"


class LoadModelMissingError(RuntimeError):
    """The benchmark cluster runs no load model (hack/cluster.py predates it)."""


def _env_values() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (env_mod.STATE / "env").read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            values[key] = value.strip('"')
    return values


class LoadModel:
    def __init__(self, url: str, record: Path) -> None:
        self.url = url.rstrip("/")
        self.record = record

    @classmethod
    def of_bench_cluster(cls) -> LoadModel:
        values = _env_values()
        url = values.get("METRICSCHED_LOADMODEL_URL")
        record = values.get("METRICSCHED_LOADMODEL_RECORD")
        if not url or not record:
            raise LoadModelMissingError(
                "the benchmark cluster has no load model (hack/loadmodel.py): "
                "hack/cluster.py must start it (METRICSCHED_LOADMODEL_URL/_RECORD in its env)"
            )
        return cls(url, Path(record))

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def truth(self) -> dict[str, Any]:
        body: dict[str, Any] = self._call("GET", "/truth")
        return body

    def set_background(self, node: str, cpu: float) -> None:
        self._call("POST", "/background", {"node": node, "cpu": cpu})

    def clear_background(self, node: str) -> None:
        self._call("DELETE", "/background?" + urllib.parse.urlencode({"node": node}))

    def offset(self) -> int:
        """Where the record ends now: read from here to get what follows."""
        return self.record.stat().st_size if self.record.exists() else 0

    def records(self, offset: int) -> Iterator[dict[str, Any]]:
        """The record's complete lines from ``offset`` on."""
        with self.record.open("rb") as f:
            f.seek(offset)
            for line in f:
                if line.endswith(b"\n") and line.strip():
                    yield json.loads(line)


def scrape_jobs(port: int, *, scrape: str) -> str:
    """The load model's scrape jobs, as hack/cluster.py writes them: its gauges, and the
    node-exporter, kubelet (cAdvisor) and kube-state-metrics series the recording rules
    read, labelled as kube-prometheus-stack's ServiceMonitors label them."""
    target = f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    head = f"    honor_labels: true\n    scrape_interval: {scrape}\n"
    return (
        f"  - job_name: loadmodel\n{head}{target}"
        f"  - job_name: node-exporter\n{head}    metrics_path: /node-exporter/metrics\n{target}"
        f"  - job_name: kubelet\n{head}    metrics_path: /metrics/cadvisor\n"
        "    relabel_configs: [{source_labels: [__metrics_path__], target_label: metrics_path}]\n"
        f"{target}"
        f"  - job_name: kube-state-metrics\n{head}    metrics_path: /kube-state-metrics/metrics\n"
        f"{target}"
    )


def with_own_jobs(config: str, port: int, *, scrape: str) -> str:
    """``config`` (a prometheus.yml) with the load model's jobs and the recording rules
    added where missing (a cluster from before them); unchanged when it has them."""
    if "job_name: loadmodel" in config:
        return config
    if "rule_files:" not in config:
        config = config.replace("scrape_configs:", f"rule_files: ['{RULES}']\nscrape_configs:", 1)
    return config.rstrip("\n") + "\n" + scrape_jobs(port, scrape=scrape)


def start_own(cluster: env_mod.ClusterEnv, *, scrape: str, seed: int) -> subprocess.Popen[bytes]:
    """Start hack/loadmodel.py for a cluster that has none, and have Prometheus scrape it
    every ``scrape`` with the recording rules (``with_own_jobs``, then a reload)."""
    port = env_mod.PORT_BASE + 101
    record = env_mod.STATE / "quality-loadmodel.jsonl"
    log = (env_mod.STATE / "quality-loadmodel.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(env_mod.ROOT / "hack" / "loadmodel.py"),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--port={port}",
            f"--record={record}",
            f"--seed={seed}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    config = env_mod.STATE / "prometheus.yml"
    text = config.read_text()
    changed = with_own_jobs(text, port, scrape=scrape)
    if changed != text:
        config.write_text(changed)
        req = urllib.request.Request(cluster.prometheus_url + "/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
    model = LoadModel(f"http://127.0.0.1:{port}", record)
    deadline = time.monotonic() + 30
    while True:
        try:
            model.truth()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def prometheus_cpu(
    prometheus_url: str, *, query: str = CPU_QUERY, label: str = "node"
) -> dict[str, float]:
    """What Prometheus reads now for each modelled node (the policy's ``query``), by the
    value of ``label`` (a node name, or node-exporter's instance)."""
    url = prometheus_url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    return {
        s["metric"].get(label, ""): float(s["value"][1])
        for s in body.get("data", {}).get("result", [])
    }


def settled(values: dict[str, float], expected: dict[str, float], tolerance: float) -> bool:
    """Every expected node reads within ``tolerance`` of its expected value."""
    return all(n in values and abs(values[n] - v) <= tolerance for n, v in expected.items())


def wait_settled(
    model: LoadModel,
    prometheus_url: str,
    backgrounds: dict[str, float],
    *,
    query: str = CPU_QUERY,
    label: str = "node",
    names: dict[str, str] | None = None,
    tolerance: float = 0.03,
    timeout: float = 90.0,
) -> float:
    """Wait until the load model and then Prometheus (``query``, nodes named by ``label``;
    ``names`` maps its values to node names when they differ) show every node back at its
    background with no pods; return the seconds waited (raise on timeout)."""
    t0 = time.monotonic()
    while True:
        nodes = model.truth().get("nodes") or {}
        truth = {n: float(v["cpu"]) for n, v in nodes.items() if not v.get("pods")}
        if settled(truth, backgrounds, tolerance):
            break
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"load model not back to background after {timeout:.0f}s")
        time.sleep(1.0)
    while True:
        seen = prometheus_cpu(prometheus_url, query=query, label=label)
        if names is not None:
            seen = {names[k]: v for k, v in seen.items() if k in names}
        if settled(seen, backgrounds, tolerance):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"Prometheus not back to background after {timeout:.0f}s")
        time.sleep(1.0)
