"""Rebalancing on the load model (issue 23): a hot spot appears on two nodes after the pods
were placed; with spec.rebalance the time those nodes spend above the threshold falls,
PodDisruptionBudgets hold, no pod is evicted twice in a window, and DryRun evicts nothing
but says what it would do.

The policy is manifests/examples/rebalance-latency-policy.yaml with short windows (the
example's 5m window and 10m minPodAge would not fit a test). Latency is the load model's
``node_latency_seconds`` = 0.05 s / (1 - cpu): above the 0.5 s threshold once a node's
cpu passes 0.9. Each node has 4 cpu at 0.1 background; each web pod uses 0.5 cores
(0.125 of a node). The hot spot sets a node's background to 0.75: with two web pods it
reads 1.0 (latency 2.5 s); one pod moved off brings it to 0.875 (0.4 s).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    GROUP,
    PLURAL,
    REFRESH_S,
    VERSION,
    OperatorProcess,
    apply_policy,
    get_policy,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.test_load_model import PREFIX, SCRAPE_S, ModelledPool, truth

THRESHOLD = 0.5
BACKGROUND = 0.1
HOT = 0.75
USAGE = "0.5"  # cores per web pod, whatever it requests
OBSERVE_S = 45.0
EXAMPLE = yaml.safe_load(
    (Path(__file__).parents[3] / "manifests/examples/rebalance-latency-policy.yaml").read_text()
)
assert EXAMPLE["spec"]["rebalance"]["trigger"] == {"metric": "latency", "above": THRESHOLD}
# The example's limits, with windows a test can wait for (the CRD's floors; the
# per-workload limit at the window's length, two moves of the one Deployment per window,
# as the two hot nodes had before there was such a limit).
FAST = {
    "window": "10s",
    "interval": "5s",
    "minPodAge": "5s",
    "maxTotal": 4,
    "margin": 0.05,
    "workloadInterval": "10s",
    "maxPerWorkload": 2,
}
NAME = EXAMPLE["metadata"]["name"]


# The latency metric has a threshold and no declared estimate, so its estimate is learned
# from how latency moved after binds, once each batch of binds has settled (burstWindow).
# A hot spot that appears before the deploy's batches settled would be credited to those
# binds (a learned +0.5 s per pod rules out every node, and nothing can move), so the
# test's batches settle in 10 s and the hot spot comes after (as it would, minutes after
# a rollout, on a real cluster).
SETTLE_S = 10.0


def policy_spec(**rebalance: Any) -> dict[str, Any]:
    """The example's spec; ``rebalance`` overrides its fields (none given: no rebalance)."""
    spec = copy.deepcopy(EXAMPLE["spec"])
    spec["burstWindow"] = f"{SETTLE_S:g}s"
    if rebalance:
        spec["rebalance"] = {**spec["rebalance"], **FAST, **rebalance}
    else:
        del spec["rebalance"]
    return spec


@pytest.fixture
def pool(cluster: Cluster, namespace: str) -> Iterator[Callable[[int], ModelledPool]]:
    made: list[ModelledPool] = []

    def make(size: int) -> ModelledPool:
        created = ModelledPool(cluster, [("4", BACKGROUND)] * size)
        made.append(created)
        created.create()
        cluster.wait_for_promql(
            'node_latency_seconds{job="loadmodel"}',
            lambda got: all(
                got.get(n) == pytest.approx(0.05 / (1 - BACKGROUND), abs=1e-3)
                for n in created.names
            ),
            timeout=3 * SCRAPE_S + 10,
        )
        return created

    yield make
    for created in made:
        for name in created.names:
            background(cluster, name, None)
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for created in made:
        created.delete()


def background(cluster: Cluster, node: str, cpu: float | None) -> None:
    """A hot spot on ``node`` (its background cpu fraction), or back to normal (None)."""
    if cpu is None:
        req = urllib.request.Request(
            f"{cluster.loadmodel_url}/background?node={node}", method="DELETE"
        )
    else:
        req = urllib.request.Request(
            f"{cluster.loadmodel_url}/background",
            data=json.dumps({"node": node, "cpu": cpu}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
    with urllib.request.urlopen(req, timeout=5) as r:
        r.read()


def deploy(cluster: Cluster, namespace: str, pool: ModelledPool, *, replicas: int) -> None:
    labels = {"app": "web"}
    cluster.apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {PREFIX + "cpu": USAGE, PREFIX + "ramp": "0"},
                    },
                    "spec": {
                        "schedulerName": "metricsched",
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "app",
                                "image": "registry.invalid/app:1",
                                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                            }
                        ],
                        **pool.pod_spec(),
                    },
                },
            },
        },
    )


def budget(cluster: Cluster, namespace: str, *, max_unavailable: int) -> None:
    kubernetes.client.PolicyV1Api(cluster.api_client).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {
                "maxUnavailable": max_unavailable,
                "selector": {"matchLabels": {"app": "web"}},
            },
        },
    )
    policy_api = kubernetes.client.PolicyV1Api(cluster.api_client)
    wait_for(
        "the disruption controller to see the budget",
        lambda: (
            (
                policy_api.read_namespaced_pod_disruption_budget("web", namespace).status
                or kubernetes.client.V1PodDisruptionBudgetStatus(
                    current_healthy=0, desired_healthy=0, disruptions_allowed=0, expected_pods=0
                )
            ).observed_generation
        ),
        timeout=30,
    )


def running(cluster: Cluster, namespace: str) -> dict[str, tuple[str, str]]:
    """name -> (node, uid) of the web pods bound, running and not being deleted."""
    return {
        p["metadata"]["name"]: (p["spec"]["nodeName"], p["metadata"]["uid"])
        for p in cluster.pods(namespace, "app=web")
        if p["spec"].get("nodeName")
        and p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def steady(
    cluster: Cluster, namespace: str, pool: ModelledPool, replicas: int
) -> dict[str, tuple[str, str]]:
    """Wait until every replica runs, carries our decision and Prometheus shows its load."""

    def check() -> dict[str, tuple[str, str]] | None:
        pods = running(cluster, namespace)
        if len(pods) != replicas:
            return None
        for p in cluster.pods(namespace, "app=web"):
            if "metricsched.io/decision" not in (p["metadata"].get("annotations") or {}):
                return None
        now = truth(cluster)
        if sum(now[n]["pods"] for n in pool.names) != replicas:
            return None
        series = cluster.promql('node_latency_seconds{job="loadmodel"}')
        seen = {s["metric"]["node"]: float(s["value"][1]) for s in series}
        if any(abs(seen.get(n, -1) - now[n]["latency"]) > 0.02 for n in pool.names):
            return None
        return pods

    pods = wait_for("the web pods placed and their load seen", check, timeout=60, interval=1.0)
    time.sleep(SETTLE_S + 2 * REFRESH_S)  # the binds' batches settle (see SETTLE_S)
    return pods


def node_seconds_above(
    cluster: Cluster, names: list[str], seconds: float, *, namespace: str
) -> tuple[float, int]:
    """Node-seconds above the threshold (the load model's true latency) over ``seconds``,
    and the fewest web pods running at any sample (what a disruption budget bounds)."""
    total, fewest = 0.0, 10**6
    above, last = 0, time.monotonic()
    end = last + seconds
    while True:
        now = truth(cluster)
        fewest = min(fewest, len(running(cluster, namespace)))
        t = time.monotonic()
        total += above * (t - last)
        above, last = sum(1 for n in names if now[n]["latency"] > THRESHOLD), t
        if t >= end:
            return total, fewest
        time.sleep(1.0)


def pod_events(cluster: Cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    found = cluster.core.list_namespaced_event(namespace, field_selector=f"reason={reason}").items
    return [cluster.api_client.sanitize_for_serialization(e) for e in found]


def counter(operator: OperatorProcess, policy: str, result: str) -> float:
    wanted = f'metricsched_rebalance_evictions_total{{policy="{policy}",result="{result}"}}'
    for line in operator.metrics_text().splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    return 0.0


def diagnostics(cluster: Cluster, operator: OperatorProcess, namespace: str) -> str:
    """What rebalancing saw, for a failure message: its /metrics lines, the policy's
    status.rebalance and the operator's log lines about the namespace."""
    lines = [
        line
        for line in operator.metrics_text().splitlines()
        if line.startswith("metricsched_rebalance") and namespace in line
    ]
    status = (get_policy(cluster, namespace, NAME).get("status") or {}).get("rebalance")
    logged = [line for line in operator.log_text().splitlines() if namespace in line][-40:]
    return "\n".join(["/metrics:", *lines, f"status.rebalance: {status}", "log:", *logged])


def hot_nodes(pods: dict[str, tuple[str, str]], names: list[str]) -> list[str]:
    """The two pool nodes with the most web pods (each has at least one)."""
    per_node = {n: sum(1 for node, _ in pods.values() if node == n) for n in names}
    chosen = sorted(names, key=lambda n: (-per_node[n], n))[:2]
    assert all(per_node[n] for n in chosen), per_node
    return chosen


def explain(cluster: Cluster, target: str) -> str:
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    out = subprocess.run(
        ["metricsched", "explain", target, f"--prometheus-url={cluster.prometheus_url}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=120,
    )
    return out.stdout + out.stderr


# --- Evict: fewer node-seconds above the threshold, budgets hold, once per window -------


def test_rebalancing_cuts_the_time_hot_nodes_spend_above_the_threshold(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    pool: Callable[[int], ModelledPool],
) -> None:
    nodes = pool(4)
    replicas = 8
    apply_policy(cluster, namespace, NAME, policy_spec())  # rebalancing off
    wait_policy_refreshed(cluster, namespace, NAME)
    budget(cluster, namespace, max_unavailable=1)
    deploy(cluster, namespace, nodes, replicas=replicas)
    before = steady(cluster, namespace, nodes, replicas)
    hot = hot_nodes(before, nodes.names)

    # Off: the hot spot stays hot; nothing moves.
    for n in hot:
        background(cluster, n, HOT)
    off, _ = node_seconds_above(cluster, nodes.names, OBSERVE_S, namespace=namespace)
    assert running(cluster, namespace) == before
    for n in hot:
        background(cluster, n, None)
    cluster.wait_for_promql(
        'node_latency_seconds{job="loadmodel"}',
        lambda got: all(got.get(n, 9) < THRESHOLD for n in nodes.names),
        timeout=3 * SCRAPE_S + 10,
    )
    time.sleep(2 * REFRESH_S + 0.5)

    # On: the same hot spot, with rebalancing (the example's limits, short windows).
    cluster.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        NAME,
        {"spec": {"rebalance": policy_spec(mode="Evict")["rebalance"]}},
    )
    for n in hot:
        background(cluster, n, HOT)
    on, fewest = node_seconds_above(cluster, nodes.names, OBSERVE_S, namespace=namespace)
    evicted = pod_events(cluster, namespace, "Rebalanced")
    on_pods = [e for e in evicted if e["involvedObject"]["kind"] == "Pod"]
    print(
        f"\nhot={hot} node-seconds above {THRESHOLD}: off={off:.0f} on={on:.0f} "
        f"({on / off:.2f}x); evictions={len(on_pods)} fewest running={fewest}"
    )
    assert off >= 1.7 * OBSERVE_S  # both hot nodes above the whole time without it
    assert on <= 0.6 * off, diagnostics(cluster, operator, namespace)

    # Every eviction is of a pod on a hot node, once (no pod twice within the window),
    # and each is counted by /metrics and the policy status.
    names = [e["involvedObject"]["name"] for e in on_pods]
    assert names and len(names) == len(set(names))
    assert all(e.get("count", 1) == 1 for e in on_pods)
    for e in on_pods:
        assert before[e["involvedObject"]["name"]][0] in hot
        assert any(f" from {n} " in e["message"] for n in hot), e["message"]
    key = f"{namespace}/{NAME}"
    assert counter(operator, key, "Evicted") == len(names)
    status = wait_for(
        "status.rebalance to count the evictions",
        lambda: (
            (block := (get_policy(cluster, namespace, NAME).get("status") or {}).get("rebalance"))
            and block.get("evictedPods") == len(names)
            and block
        ),
        timeout=15,
    )
    assert status["mode"] == "Evict"
    # The room held for replacements is published (the CRD keeps the field) and only ever
    # on a node the moves went to, for the Deployment's replacements.
    assert isinstance(status.get("held"), list), status
    for hold in status["held"]:
        assert hold["node"] in nodes.names and hold["node"] not in hot, status
        assert hold["owner"] == f"{namespace}/Deployment/web", status
    # The budget (maxUnavailable: 1) held at every sample.
    assert fewest >= replicas - 1

    # explain on a replacement says whom it replaces, and why.
    owner_events = {e["involvedObject"]["name"]: e for e in on_pods}
    replacements = [
        p
        for p in cluster.pods(namespace, "app=web")
        if p["metadata"]["name"] not in before and p["spec"].get("nodeName")
    ]
    assert replacements
    text = explain(cluster, f"{namespace}/{replacements[0]['metadata']['name']}")
    assert "replaces a pod that rebalancing moved" in text, text
    assert any(name in text for name in owner_events), text


def test_a_budget_that_allows_no_disruption_blocks_every_eviction(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    pool: Callable[[int], ModelledPool],
) -> None:
    nodes = pool(3)
    replicas = 3
    apply_policy(cluster, namespace, NAME, policy_spec(mode="Evict"))
    wait_policy_refreshed(cluster, namespace, NAME)
    budget(cluster, namespace, max_unavailable=0)
    deploy(cluster, namespace, nodes, replicas=replicas)
    before = steady(cluster, namespace, nodes, replicas)
    hot = hot_nodes(before, nodes.names)[0]
    background(cluster, hot, 0.9)  # one pod there: 0.9 + 0.125 → above the threshold

    key = f"{namespace}/{NAME}"
    wait_for("a blocked eviction", lambda: counter(operator, key, "Blocked") >= 1, timeout=60)
    assert counter(operator, key, "Evicted") == 0
    assert running(cluster, namespace) == before
    blocked = pod_events(cluster, namespace, "RebalanceBlocked")
    assert blocked and "PodDisruptionBudget" in blocked[0]["message"]
    assert pod_events(cluster, namespace, "Rebalanced") == []


# --- DryRun: nothing evicted, everything reported ---------------------------------------


def test_dry_run_evicts_nothing_and_reports_what_it_would_do(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    pool: Callable[[int], ModelledPool],
) -> None:
    nodes = pool(3)
    replicas = 3
    apply_policy(cluster, namespace, NAME, policy_spec(mode="DryRun"))
    wait_policy_refreshed(cluster, namespace, NAME)
    deploy(cluster, namespace, nodes, replicas=replicas)
    before = steady(cluster, namespace, nodes, replicas)
    hot = hot_nodes(before, nodes.names)[0]
    background(cluster, hot, 0.9)

    def reported() -> dict[str, Any] | None:
        block = (get_policy(cluster, namespace, NAME).get("status") or {}).get("rebalance")
        return block if block and block.get("wouldEvictPods", 0) >= 1 else None

    block = wait_for("status.rebalance to report a would-be eviction", reported, timeout=60)
    time.sleep(12)  # past one window: the same pod may be reported once more, not sooner
    block = reported() or block
    assert block["mode"] == "DryRun" and block["evictedPods"] == 0
    first = block["recent"][-1]
    assert first["node"] == hot and first["targetNode"] in nodes.names
    assert first["targetNode"] != hot and first["result"] == "WouldEvict"
    assert first["value"] > THRESHOLD
    times: dict[str, list[str]] = {}
    for entry in block["recent"]:
        times.setdefault(entry["pod"], []).append(entry["time"])
    for pod, stamps in times.items():
        moments = sorted(time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")) for s in stamps)
        assert all(b - a >= 10 for a, b in itertools.pairwise(moments)), (pod, stamps)

    key = f"{namespace}/{NAME}"
    assert counter(operator, key, "WouldEvict") >= 1
    assert counter(operator, key, "Evicted") == 0
    would = pod_events(cluster, namespace, "WouldRebalance")
    kinds = {e["involvedObject"]["kind"] for e in would}
    assert kinds == {"Pod", "SchedulingPolicy"}
    assert all(e["message"].startswith("would evict ") for e in would)
    assert running(cluster, namespace) == before  # nothing evicted
