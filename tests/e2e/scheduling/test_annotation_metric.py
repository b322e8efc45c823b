"""nodeAnnotation metrics: the cheapest node wins, no Prometheus involved."""

from __future__ import annotations

from tests.e2e.conftest import Cluster
from tests.e2e.scheduling.conftest import OperatorProcess, apply_policy, wait_bound

PRICES = {"node-1": "0.40", "node-2": "0.10", "node-3": "0.30", "node-4": "0.20"}


def _annotate(cluster: Cluster, key: str, prices: dict[str, str]) -> None:
    for node, price in prices.items():
        cluster.core.patch_node(node, {"metadata": {"annotations": {key: price}}})


def test_pods_go_to_the_cheapest_node_and_follow_an_annotation_change(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    key = f"e2e.metricsched.io/price-{namespace[-5:]}"
    _annotate(cluster, key, PRICES)
    try:
        apply_policy(
            cluster,
            namespace,
            "cheap",
            {
                "metrics": [{"name": "price", "nodeAnnotation": key, "goal": "Minimize"}],
                "burstPenalty": 0,
            },
        )
        cluster.create_pod(namespace, "first")
        assert wait_bound(cluster, namespace, "first") == "node-2"
        _annotate(cluster, key, {"node-2": "0.90", "node-4": "0.05"})
        import time

        time.sleep(1)  # the node watch delivers the change
        cluster.create_pod(namespace, "second")
        assert wait_bound(cluster, namespace, "second") == "node-4"
    finally:
        for node in PRICES:
            cluster.core.patch_node(node, {"metadata": {"annotations": {key: None}}})
