"""A Deployment's pods spread over near-equal nodes instead of herding onto one.

Each test adds ten simulated nodes of its own (tainted, so no other test's pod lands
there), sets their metric on the exporter, and removes them afterwards.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.pools import Pool

NODES = 10
EXAMPLE = ROOT / "manifests" / "examples" / "tolerant-latency-policy.yaml"


@pytest.fixture
def pool(cluster: Cluster) -> Iterator[Pool]:
    created = Pool(cluster, size=NODES)
    created.create()
    yield created
    created.delete()


@pytest.fixture
def small_first_pool(cluster: Cluster) -> Iterator[Pool]:
    """The pool with room for only 15 pods on its first node."""
    created = Pool(cluster, size=NODES, pods_capacity={0: 15})
    created.create()
    yield created
    created.delete()


def deploy(cluster: Cluster, namespace: str, pool: Pool, *, replicas: int) -> None:
    """A Deployment of ``replicas`` pods for metricsched, confined to ``pool``."""
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
                    "metadata": {"labels": labels},
                    "spec": {
                        "schedulerName": "metricsched",
                        "containers": [
                            {
                                "name": "app",
                                "image": "registry.invalid/app:1",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                        **pool.pod_spec(),
                    },
                },
            },
        },
    )


def placement(cluster: Cluster, namespace: str, *, pods: int) -> collections.Counter[str]:
    """Wait until ``pods`` pods of the namespace are bound; count them per node."""

    def bound() -> collections.Counter[str] | None:
        nodes = [p["spec"].get("nodeName") for p in cluster.pods(namespace)]
        placed = [node for node in nodes if node]
        return collections.Counter(placed) if len(placed) >= pods else None

    return wait_for(f"{pods} pods bound", bound, timeout=180, interval=1.0)


def example_spec(metric: str) -> dict[str, Any]:
    """manifests/examples/tolerant-latency-policy.yaml, reading this test's metric."""
    spec: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())["spec"]
    spec["metrics"][0]["prometheus"]["query"] = f"max by (node) ({metric})"
    return spec


def test_a_deployment_spreads_over_ten_nodes_whose_metric_differs_by_noise(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str, pool: Pool
) -> None:
    # At most 1 % apart: without a tolerance min-max makes this a 0..100 spread.
    set_and_wait(
        cluster, metric, {name: 0.1 * (1 + index / 1000) for index, name in enumerate(pool.names)}
    )
    apply_policy(cluster, namespace, "web", example_spec(metric))
    wait_policy_refreshed(cluster, namespace, "web")

    deploy(cluster, namespace, pool, replicas=100)
    counts = placement(cluster, namespace, pods=100)

    mean = 100 / NODES
    assert set(counts) <= set(pool.names)
    assert all(0.5 * mean <= counts[name] <= 1.5 * mean for name in pool.names), counts


def test_a_node_ten_times_better_fills_up_first_and_the_rest_spread(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    metric: str,
    small_first_pool: Pool,
) -> None:
    pool = small_first_pool
    best, others = pool.names[0], pool.names[1:]
    values = {name: 0.1 * (1 + index / 1000) for index, name in enumerate(pool.names)}
    set_and_wait(cluster, metric, values | {best: 0.01})
    # Without default spreading (weight 2, and the Deployment's pods get it), which would
    # outvote a weight-1 metric: this test is about the metric and the burst penalty.
    spec = {"metrics": [prom_metric(metric)], "kubeScores": {"PodTopologySpread": 0}}
    apply_policy(cluster, namespace, "web", spec)
    wait_policy_refreshed(cluster, namespace, "web")

    deploy(cluster, namespace, pool, replicas=100)
    counts = placement(cluster, namespace, pods=100)

    # The best node takes pods until it is full (15 < the 20 the burst penalty allows).
    assert counts[best] == 15, counts
    mean = (100 - 15) / len(others)
    assert all(0.5 * mean <= counts[name] <= 1.5 * mean for name in others), counts


def test_pods_arriving_further_apart_than_the_burst_window_spread_over_equal_nodes(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str, pool: Pool
) -> None:
    set_and_wait(cluster, metric, dict.fromkeys(pool.names, 0.1))
    # A 1 s window stands for the default minute: each pod sees no recent bind.
    apply_policy(cluster, namespace, "web", {"metrics": [prom_metric(metric)], "burstWindow": "1s"})
    wait_policy_refreshed(cluster, namespace, "web")

    pods = 20
    for number in range(pods):
        cluster.create_pod(namespace, f"web-{number}", spec=pool.pod_spec())
        time.sleep(1.5)
    counts = placement(cluster, namespace, pods=pods)

    # Drawn at random like kube-scheduler's selectHost: by name all 20 went to one node.
    # Uniform draws fail these with probability below 1e-5.
    assert len(counts) >= 5, counts
    assert max(counts.values()) <= pods // 2, counts
