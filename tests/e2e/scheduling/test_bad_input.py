"""Nothing a user or Prometheus says crashes the operator or loses a pending pod."""

from __future__ import annotations

import math

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    condition,
    get_policy,
    prom_metric,
    wait_bound,
    wait_policy_refreshed,
)


def test_nan_values_and_series_for_unknown_nodes_count_as_missing(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    # node-3 would win but reports NaN; a series names a node that does not exist.
    cluster.set_metric(
        metric,
        {"node-1": 0.4, "node-2": 0.3, "node-3": math.nan, "node-4": 0.2, "ghost-9": 0.0},
    )
    cluster.wait_for_promql(metric, lambda got: "ghost-9" in got and "node-4" in got)
    spec = prom_metric(metric) | {"onMissing": "Exclude"}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec], "burstPenalty": 0})
    policy = wait_policy_refreshed(cluster, namespace, "lat")
    assert condition(policy, "Ready")["status"] == "True"
    cluster.create_pod(namespace, "p")
    assert wait_bound(cluster, namespace, "p") == "node-4"
    status = get_policy(cluster, namespace, "lat")["status"]["metrics"][0]
    assert status["nodesReporting"] == 3  # node-1, node-2, node-4


def test_unparsable_annotation_values_are_missing_not_fatal(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    key = f"e2e.metricsched.io/bad-{namespace[-5:]}"
    values = {"node-1": "cheap", "node-2": "0.3", "node-3": "NaN", "node-4": "0.5"}
    for node, value in values.items():
        cluster.core.patch_node(node, {"metadata": {"annotations": {key: value}}})
    try:
        apply_policy(
            cluster,
            namespace,
            "price",
            {
                "metrics": [{"name": "price", "nodeAnnotation": key, "onMissing": "Worst"}],
                "burstPenalty": 0,
            },
        )
        cluster.create_pod(namespace, "p")
        assert wait_bound(cluster, namespace, "p") == "node-2"
    finally:
        for node in values:
            cluster.core.patch_node(node, {"metadata": {"annotations": {key: None}}})


def test_pod_pinned_to_a_missing_policy_stays_pending_with_a_reason(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.create_pod(namespace, "p", labels={"metricsched.io/policy": "nope"})
    message = wait_for(
        "FailedScheduling",
        lambda: [
            e["message"]
            for e in cluster.events_for(namespace, "p")
            if e["reason"] == "FailedScheduling"
        ],
    )[0]
    assert "nope" in message, message
    assert not cluster.pod(namespace, "p")["spec"].get("nodeName")
    # Creating the policy lets the pod through: it was never dropped.
    apply_policy(
        cluster,
        namespace,
        "nope",
        {"metrics": [{"name": "price", "nodeAnnotation": "example.com/hourly-price"}]},
    )
    wait_bound(cluster, namespace, "p", timeout=40)
