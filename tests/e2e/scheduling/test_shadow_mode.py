"""Shadow mode on the real control plane: a pinned kube-scheduler places the pods, a
shadow policy evaluates them, and the numbers match a hand computation on the exporter's
values. The decision record lands on every pod metricsched binds, and explain shows it
beside what the policy would decide now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    METRICS_ONLY,
    KubeScheduler,
    OperatorProcess,
    apply_policy,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_policy_refreshed,
)

DECISION = "metricsched.io/decision"
EXAMPLE = ROOT / "manifests" / "examples" / "shadow-policy.yaml"
# node-5 (tainted) and node-6 (cordoned) would win, but neither scheduler may use them.
VALUES = {
    "node-1": 0.5,
    "node-2": 0.4,
    "node-3": 0.3,
    "node-4": 0.2,
    "node-5": 0.01,
    "node-6": 0.02,
}
POLICY_NODE = "node-4"  # the lowest value among the schedulable nodes
PODS = 8


SETTINGS = ("KUBECONFIG", "METRICSCHED_KUBECONFIG", "METRICSCHED_PROMETHEUS_URL")


def cli(*argv: str, env: dict[str, str] | None = None) -> str:
    """Run a command from the repository as a developer does: the installed console
    scripts on PATH, no cluster settings but ``env`` (the rest from .cluster/env)."""
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    base["PATH"] = f"{Path(sys.executable).parent}:{base.get('PATH', '')}"
    out = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, **(env or {})},
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def binding_writes(operator: OperatorProcess) -> float:
    for line in operator.metrics_text().splitlines():
        if line.startswith('metricsched_api_writes_total{kind="binding"}'):
            return float(line.split()[-1])
    raise AssertionError("metricsched_api_writes_total{kind=binding} not exported")


def hand_computation(nodes: dict[str, str]) -> dict[str, Any]:
    """What the shadow policy must report, from the exporter's values and where the pods
    went: the policy would place every pod on node-4 (burstPenalty 0)."""
    actual = [VALUES[node] for node in nodes.values()]
    actual_mean = sum(actual) / len(actual)
    policy_mean = VALUES[POLICY_NODE]
    agreeing = sum(1 for node in nodes.values() if node == POLICY_NODE)
    return {
        "agreeing": agreeing,
        "percent": agreeing * 100 // len(nodes),
        "policy_mean": policy_mean,
        "actual_mean": actual_mean,
        "advantage": (actual_mean - policy_mean) / actual_mean * 100,
    }


def test_a_shadow_policy_reports_agreement_and_advantage_on_pods_kube_scheduler_placed(
    cluster: Cluster,
    operator: OperatorProcess,
    kube_scheduler: KubeScheduler,
    namespace: str,
    metric: str,
) -> None:
    set_and_wait(cluster, metric, VALUES)
    # The example, on this test's metric and scheduler (and no burst penalty: every pod's
    # best node is then node-4, whatever else this operator has bound meanwhile).
    spec = yaml.safe_load(EXAMPLE.read_text())["spec"]
    assert (spec["mode"], spec["metrics"][0]["goal"]) == ("Shadow", "Minimize")
    spec["shadow"]["schedulerNames"] = [kube_scheduler.name]
    spec["metrics"][0]["prometheus"]["query"] = f"max by (node) ({metric})"
    # Metrics only (no kubeScores): the hand computation ranks nodes by the metric alone.
    apply_policy(
        cluster, namespace, "trial", {**spec, "burstPenalty": 0, "kubeScores": METRICS_ONLY}
    )
    wait_policy_refreshed(cluster, namespace, "trial")
    binds_before = binding_writes(operator)
    names = [f"web-{i}" for i in range(PODS)]
    for name in names:
        cluster.create_pod(namespace, name, scheduler=kube_scheduler.name, labels={"app": "web"})
    nodes = {name: wait_bound(cluster, namespace, name, timeout=60) for name in names}

    # metricsched bound none of them: no Binding sent, no decision record on any pod.
    assert binding_writes(operator) == binds_before
    for name in names:
        assert DECISION not in (cluster.pod(namespace, name)["metadata"].get("annotations") or {})

    expected = hand_computation(nodes)
    status = wait_for(
        "status.shadow to cover every pod",
        lambda: (
            (s := (get_policy(cluster, namespace, "trial").get("status") or {}).get("shadow"))
            and s.get("evaluatedPods") == PODS
            and s
        ),
        timeout=60,
    )
    assert (status["agreeingPods"], status["agreementPercent"]) == (
        expected["agreeing"],
        expected["percent"],
    )
    (latency,) = status["metrics"]
    assert latency["pods"] == PODS
    assert latency["policyMean"] == pytest.approx(expected["policy_mean"], rel=1e-3)
    assert latency["actualMean"] == pytest.approx(expected["actual_mean"], rel=1e-3)
    assert latency["advantagePercent"] == pytest.approx(expected["advantage"], abs=0.05)
    recent = {entry["pod"]: entry for entry in status["recent"]}
    for name, node in nodes.items():
        entry = recent[f"{namespace}/{name}"]
        assert (entry["node"], entry["policyNode"]) == (node, POLICY_NODE)
        assert entry["actualValues"] == {"latency": VALUES[node]}

    # The same through kubectl's plugin mechanism, reading KUBECONFIG as kubectl does.
    text = cli(
        str(cluster.bin / "kubectl"),
        "metricsched",
        "shadow",
        f"{namespace}/trial",
        env={"KUBECONFIG": cluster.kubeconfig},
    )
    print(text)
    assert f"Agreement: {expected['agreeing']}/{PODS} pods ({expected['percent']} %)" in text
    assert f"{round(expected['advantage'], 1):g} % lower latency" in text
    for name, node in nodes.items():
        row = next(
            line.split() for line in text.splitlines() if line.startswith(f"{namespace}/{name} ")
        )
        assert row[1:3] == [node, POLICY_NODE]

    # explain decides for one of these pods as the shadow policy would.
    text = cli("metricsched", "explain", f"{namespace}/web-0")
    assert f"note: deciding as shadow policy {namespace}/trial (mode Shadow) would" in text
    assert ["Outcome:", "Bind", "→", POLICY_NODE] in [line.split() for line in text.splitlines()]

    # /metrics exports the same per policy.
    exported = operator.metrics_text()
    assert (
        f'metricsched_shadow_agreement_ratio{{policy="{namespace}/trial"}} '
        f"{expected['agreeing'] / PODS}" in exported
    )


def test_a_bound_pod_carries_the_decision_and_explain_shows_then_and_now(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, VALUES)
    apply_policy(
        cluster,
        namespace,
        "lat",
        {
            "metrics": [{**prom_metric(metric), "name": "latency"}],
            "burstPenalty": 0,
            "kubeScores": METRICS_ONLY,  # the recorded scores are the metric's alone
        },
    )
    wait_policy_refreshed(cluster, namespace, "lat")
    writes_before = binding_writes(operator)
    names = [f"web-{i}" for i in range(3)]
    for name in names:
        cluster.create_pod(namespace, name)
    for name in names:
        wait_bound(cluster, namespace, name)
    assert binding_writes(operator) - writes_before == len(names)  # one Binding per pod
    for name in names:
        pod = cluster.pod(namespace, name)
        text = (pod["metadata"].get("annotations") or {})[DECISION]
        assert len(text.encode()) <= 1024
        record = json.loads(text)
        assert record["policy"] == f"{namespace}/lat"
        assert record["node"] == pod["spec"]["nodeName"] == POLICY_NODE
        assert record["metrics"] == {"latency": VALUES[POLICY_NODE]}
        assert record["runnerUp"]["node"] == "node-3"
        assert record["fallback"] is None

    # node-4 gets worse: explain shows the decision at bind time and the one it would make now.
    set_and_wait(cluster, metric, {**VALUES, "node-4": 0.9})
    text = cli("metricsched", "explain", f"{namespace}/web-0")  # settings from .cluster/env
    print(text)
    lines = text.splitlines()
    assert lines[0].startswith("Decision at bind time")
    assert "  Placed on: node-4  score 100  [latency 0.2]" in lines
    assert "  The policy would now place the pod on node-3, not node-4." in lines
    then_now = next(
        line.split() for line in lines if line.strip().startswith("node-4  placed then")
    )
    assert "0.2→0.9" in then_now
    assert ["Outcome:", "Bind", "→", "node-3"] in [line.split() for line in lines]
