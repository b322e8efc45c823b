"""Prometheus gone: the fallback strategy decides, says so, and it all recovers."""

from __future__ import annotations

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    condition,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)


def _policy_status(cluster: Cluster, namespace: str, name: str, ctype: str) -> str:
    return str(condition(get_policy(cluster, namespace, name), ctype).get("status"))


def test_fallback_places_pods_while_prometheus_is_down_and_recovers(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "node-4": 0.4})
    apply_policy(
        cluster,
        namespace,
        "lat",
        {
            "metrics": [prom_metric(metric)],
            "burstPenalty": 0,
            "fallback": {"strategy": "LeastAllocated"},
        },
    )
    wait_policy_refreshed(cluster, namespace, "lat")
    assert _policy_status(cluster, namespace, "lat", "MetricsAvailable") == "True"

    cluster.component("stop", "prometheus")
    try:
        wait_for(
            "MetricsAvailable False",
            lambda: _policy_status(cluster, namespace, "lat", "MetricsAvailable") == "False",
            timeout=30,
        )
        cluster.create_pod(namespace, "during")
        wait_bound(cluster, namespace, "during")
        message = wait_event(cluster, namespace, "during", "Scheduled")[0]
        assert "fallback LeastAllocated" in message and "unreachable" in message, message
        wait_for(
            "MetricQueryFailed event",
            lambda: (
                "MetricQueryFailed" in {e["reason"] for e in cluster.events_for(namespace, "lat")}
            ),
        )
        wait_for(
            "FallbackActive event",
            lambda: "FallbackActive" in {e["reason"] for e in cluster.events_for(namespace, "lat")},
        )
    finally:
        cluster.component("start", "prometheus")

    wait_for(
        "MetricsAvailable True again",
        lambda: _policy_status(cluster, namespace, "lat", "MetricsAvailable") == "True",
        timeout=60,
    )
    wait_for(
        "MetricsRecovered event",
        lambda: "MetricsRecovered" in {e["reason"] for e in cluster.events_for(namespace, "lat")},
    )
    cluster.create_pod(namespace, "after")
    assert wait_bound(cluster, namespace, "after") == "node-1"
    assert ": fallback " not in wait_event(cluster, namespace, "after", "Scheduled")[0]
    # Counters reach the status at the next refresh.
    status = wait_for(
        "policy counters",
        lambda: (
            (s := get_policy(cluster, namespace, "lat")["status"]) and s["scheduledPods"] >= 2 and s
        ),
    )
    assert status["scheduledPods"] == 2 and status["fallbackPods"] == 1


def test_wait_strategy_keeps_pods_pending_until_metrics_return(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "node-4": 0.4})
    apply_policy(
        cluster,
        namespace,
        "lat",
        {"metrics": [prom_metric(metric)], "burstPenalty": 0, "fallback": {"strategy": "Wait"}},
    )
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.component("stop", "prometheus")
    try:
        wait_for(
            "MetricsAvailable False",
            lambda: _policy_status(cluster, namespace, "lat", "MetricsAvailable") == "False",
            timeout=30,
        )
        cluster.create_pod(namespace, "waiting")
        message = wait_event(cluster, namespace, "waiting", "FailedScheduling")[0]
        assert "waiting for metrics" in message, message
        assert not cluster.pod(namespace, "waiting")["spec"].get("nodeName")
    finally:
        cluster.component("start", "prometheus")
    assert wait_bound(cluster, namespace, "waiting", timeout=60) == "node-1"
