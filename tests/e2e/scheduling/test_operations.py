"""What operators of metricsched rely on: /metrics, health, `explain`, and the hot path's shape."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    GROUP,
    PLURAL,
    REFRESH_S,
    VERSION,
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_policy_refreshed,
)


def _counter(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _prometheus_policies(cluster: Cluster) -> int:
    items = cluster.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return sum(1 for p in items for m in p["spec"]["metrics"] if "prometheus" in m)


def test_binding_path_makes_one_write_per_pod_and_no_prometheus_query(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "node-4": 0.4})
    apply_policy(cluster, namespace, "lat", {"metrics": [prom_metric(metric)]})
    wait_policy_refreshed(cluster, namespace, "lat")
    policies = _prometheus_policies(cluster)
    before = operator.metrics_text()
    started = time.monotonic()
    for i in range(20):
        cluster.create_pod(namespace, f"p-{i}")
    wait_for(
        "20 pods bound",
        lambda: (
            all(p["spec"].get("nodeName") for p in cluster.pods(namespace))
            and len(cluster.pods(namespace)) == 20
        ),
    )
    elapsed = time.monotonic() - started
    after = operator.metrics_text()

    def delta(name: str, **labels: str) -> float:
        return _counter(after, name, **labels) - _counter(before, name, **labels)

    assert delta("metricsched_api_writes_total", kind="binding") == 20
    assert delta("metricsched_schedule_attempts_total", result="scheduled") == 20
    # Queries follow the refresh interval, never the number of pods.
    refreshes = elapsed / REFRESH_S + 2
    assert delta("metricsched_prometheus_queries_total") <= refreshes * policies
    # Events are at most one per pod (aggregation may merge, never multiply).
    assert delta("metricsched_api_writes_total", kind="event") <= 20
    # Each bound pod is timed once from its creation to its bind.
    assert delta("metricsched_pod_scheduling_duration_seconds_count") == 20
    assert "metricsched_scheduling_attempt_duration_seconds_bucket" in after


def test_health_endpoints_answer(operator: OperatorProcess) -> None:
    for path in ("/healthz", "/readyz"):
        url = f"http://127.0.0.1:{operator.health_port}{path}"
        with urllib.request.urlopen(url, timeout=2) as r:
            assert r.status == 200, path


def test_explain_prints_every_node_with_its_verdict_and_scores(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.9, "node-4": 0.4})
    spec = prom_metric(metric) | {"name": "latency", "threshold": {"max": 0.5}}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    # A pod nobody schedules, so it stays pending and explain says where it would go. It
    # names another scheduler: --scheduler-name asks how metricsched's policies would place
    # it (explain otherwise takes the pod's own schedulerName).
    cluster.create_pod(namespace, "p", scheduler="not-served-here")
    exe = Path(sys.executable).parent / "metricsched"
    out = subprocess.run(
        [
            str(exe),
            "explain",
            f"{namespace}/p",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus-url={cluster.prometheus_url}",
            "--scheduler-name=metricsched",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for node in ("node-1", "node-2", "node-3", "node-4", "node-5", "node-6"):
        assert re.search(rf"^\W*{node}\b", text, re.MULTILINE), (node, text)
    assert "exceeded threshold latency > 0.5" in text, text
    assert "untolerated taint(s)" in text, text
    assert "were unschedulable" in text, text
    winner = [line for line in text.splitlines() if "*" in line and "node-" in line]
    assert winner and "node-1" in winner[0], text


def test_explain_takes_the_policies_of_the_pods_own_scheduler(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    # Two installs' policies select the same pods: one served by "metricsched-gpu" (an
    # install whose operator is not running here), one by the running "metricsched".
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.9, "node-4": 0.4})
    spec = prom_metric(metric) | {"name": "latency", "threshold": {"max": 0.5}}
    apply_policy(
        cluster,
        namespace,
        "gpu-lat",
        {"schedulerName": "metricsched-gpu", "metrics": [spec], "burstPenalty": 0},
    )
    apply_policy(cluster, namespace, "lat", {"metrics": [spec], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "g", scheduler="metricsched-gpu")
    exe = Path(sys.executable).parent / "metricsched"
    out = subprocess.run(
        [
            str(exe),
            "explain",
            f"{namespace}/g",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus-url={cluster.prometheus_url}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    # The pod's own install decides: its policy, with its threshold, not the default one.
    assert "explaining with the policies of schedulerName metricsched-gpu" in text, text
    assert re.search(rf"Policy:\s+{namespace}/gpu-lat\b", text), text
    assert "exceeded threshold latency > 0.5" in text, text
    # The other install's policy selects the pod too: explain says it does not place it.
    assert f"policy {namespace}/lat selects this pod but is served by another install" in text
