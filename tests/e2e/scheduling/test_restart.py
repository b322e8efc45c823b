"""A restarted operator forgets no pending pod."""

from __future__ import annotations

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_policy_refreshed,
)


def test_operator_restarted_with_twenty_pending_pods_schedules_all_of_them(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "node-4": 0.4})
    apply_policy(cluster, namespace, "lat", {"metrics": [prom_metric(metric)]})
    wait_policy_refreshed(cluster, namespace, "lat")
    operator.stop()
    try:
        for i in range(20):
            cluster.create_pod(namespace, f"p-{i}")
        assert all(not p["spec"].get("nodeName") for p in cluster.pods(namespace))
    finally:
        operator.start()
    wait_for(
        "all 20 pods bound",
        lambda: all(p["spec"].get("nodeName") for p in cluster.pods(namespace)),
        timeout=60,
    )
    nodes = {p["spec"]["nodeName"] for p in cluster.pods(namespace)}
    assert nodes <= {"node-1", "node-2", "node-3", "node-4"}
    # The default burst penalty (5 per recent pod) spreads 20 pods beyond the best node.
    assert len(nodes) > 1
