"""The test bed's recording rules (hack/prometheus-rules.yml) over the series the load model
serves, as the test bed's Prometheus scrapes them: ``promtool test rules`` with input
series taken from the model's own collectors, every 15 s (the default scrape interval).

promtool is Debian's ``prometheus`` package (``make deps``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.load_model.conftest import ROOT, core, loadmodel, node, pod

T0 = 1_000_000.0
SCRAPE_S = 15
SCRAPES = 6  # 0 s .. 75 s
# What the test bed's scrape jobs add (hack/cluster.py): the job, and the path as a label.
KUBELET = {"job": "kubelet", "metrics_path": "/metrics/cadvisor"}
KUBE_STATE_METRICS = {"job": "kube-state-metrics", "instance": "127.0.0.1:1"}


def _promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if found is None:
        pytest.skip("promtool is missing: `make deps` installs Debian's prometheus package")
    return found


def _series(name: str, labels: dict[str, str]) -> str:
    inside = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inside}}}"


def scraped_every_15s() -> dict[str, list[float]]:
    """Two pods on n1, ramped up at once and without noise: ``a`` of containers app (300m
    requested) and log (100m) using 1 core and 512Mi, ``b`` of one container using 0.5
    cores; and ``c`` on a node the model does not serve. Each series' values, scrape by
    scrape (amounts exact in binary: promtool compares values exactly)."""
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1", cpu="4")])
    a = pod("a", annotations={core.POD_CPU: "1", core.POD_MEMORY: "512Mi", core.POD_RAMP: "0"})
    a["spec"]["containers"] = [
        {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "300m"}}},
        {"name": "log", "image": "log:1", "resources": {"requests": {"cpu": "100m"}}},
    ]
    b = pod("b", annotations={core.POD_CPU: "0.5", core.POD_MEMORY: "64Mi", core.POD_RAMP: "0"})
    for body in (a, b, pod("c", node="elsewhere")):
        m.pod_seen(body, T0)
    values: dict[str, list[float]] = {}
    for second in range(SCRAPES * SCRAPE_S):
        m.tick(T0 + second)
        if second % SCRAPE_S:
            continue
        collectors: list[tuple[Any, dict[str, str]]] = [
            (loadmodel.CadvisorCollector(m, clock=lambda s=second: T0 + s + 0.5), KUBELET),
            (loadmodel.KubeStateMetricsCollector(m), KUBE_STATE_METRICS),
        ]
        for collector, added in collectors:
            for family in collector.collect():
                for s in family.samples:
                    values.setdefault(_series(s.name, {**s.labels, **added}), []).append(s.value)
    return values


def run(tmp_path: Path, exprs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yml").write_text((ROOT / "hack" / "prometheus-rules.yml").read_text())
    series = [
        {"series": name, "values": " ".join(repr(v) for v in vs)}
        for name, vs in scraped_every_15s().items()
    ]
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": f"{SCRAPE_S}s",
        "tests": [{"interval": f"{SCRAPE_S}s", "input_series": series, "promql_expr_test": exprs}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    return subprocess.run(
        [_promtool(), "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def samples(values: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    return [
        {
            "labels": _series("", {"container": c, "namespace": "ns", "node": "n1", "pod": p}),
            "value": v,
        }
        for (p, c), v in values.items()
    ]


def rounded(expr: str) -> str:
    """To a thousandth: rate()'s extrapolation is a float off exact (0.7499999999999999),
    and promtool compares values exactly."""
    return f"round({expr}, 0.001)"


# The per-pod query issue 27 (item 1) names as the operator's default source.
BY_POD = 'sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!=""}[1m]))'
PER_CONTAINER_CPU = {("a", "app"): 0.75, ("a", "log"): 0.25, ("b", "app"): 0.5}


def test_kube_prometheus_stacks_container_rules_record_each_containers_modelled_usage(
    tmp_path: Path,
) -> None:
    rate5m = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m"
    irate = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate"
    memory = "node_namespace_pod_container:container_memory_working_set_bytes"
    exprs = [
        # The pod-level series (image="") are left out; the node comes from kube_pod_info.
        {"expr": rounded(rate5m), "eval_time": "60s", "exp_samples": samples(PER_CONTAINER_CPU)},
        {"expr": rounded(irate), "eval_time": "60s", "exp_samples": samples(PER_CONTAINER_CPU)},
        {
            "expr": f"sum by (container, namespace, node, pod) ({memory})",
            "eval_time": "60s",
            "exp_samples": samples(
                {("a", "app"): 256 * 2**20, ("a", "log"): 256 * 2**20, ("b", "app"): 64 * 2**20}
            ),
        },
    ]
    out = run(tmp_path, exprs)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_pods_rate_is_its_usage_with_container_filter_and_twice_it_without(
    tmp_path: Path,
) -> None:
    exprs = [
        {
            "expr": rounded(BY_POD),
            "eval_time": "75s",
            "exp_samples": [
                {"labels": '{namespace="ns", pod="a"}', "value": 1.0},
                {"labels": '{namespace="ns", pod="b"}', "value": 0.5},
            ],
        },
        {
            "expr": rounded(BY_POD.replace('{container!=""}', "")),
            "eval_time": "75s",
            "exp_samples": [
                {"labels": '{namespace="ns", pod="a"}', "value": 2.0},
                {"labels": '{namespace="ns", pod="b"}', "value": 1.0},
            ],
        },
    ]
    out = run(tmp_path, exprs)
    assert out.returncode == 0, out.stdout + out.stderr
