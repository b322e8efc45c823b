"""Pods go where the policy's metrics say, and follow the metrics when they change."""

from __future__ import annotations

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    METRICS_ONLY,
    REFRESH_S,
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)

# node-5 (tainted) and node-6 (cordoned) look best but are infeasible for plain pods.
LATENCY = {
    "node-1": 0.30,
    "node-2": 0.20,
    "node-3": 0.05,
    "node-4": 0.40,
    "node-5": 0.01,
    "node-6": 0.01,
}


def test_pod_goes_to_the_feasible_node_with_the_best_metric(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, LATENCY)
    apply_policy(cluster, namespace, "lat", {"metrics": [prom_metric(metric)], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "p1")
    assert wait_bound(cluster, namespace, "p1") == "node-3"


def test_new_pods_follow_a_metric_change_within_one_refresh(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, LATENCY)
    apply_policy(cluster, namespace, "lat", {"metrics": [prom_metric(metric)], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "before")
    assert wait_bound(cluster, namespace, "before") == "node-3"

    set_and_wait(cluster, metric, {"node-3": 0.9, "node-1": 0.02})
    import time

    time.sleep(REFRESH_S + 0.5)  # one refresh of the operator
    cluster.create_pod(namespace, "after")
    assert wait_bound(cluster, namespace, "after") == "node-1"


def test_threshold_excludes_a_node_that_would_otherwise_win(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {**LATENCY, "node-3": 0.05, "node-2": 0.06})
    spec_metric = prom_metric(metric) | {"goal": "Maximize", "threshold": {"max": 0.3}}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec_metric], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "p")
    # Maximize picks the highest value, but node-4 (0.40) exceeds max 0.3: node-1 (0.30) wins.
    assert wait_bound(cluster, namespace, "p") == "node-1"


def test_threshold_on_every_node_gives_failed_scheduling_in_kube_scheduler_format(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, LATENCY)
    spec_metric = prom_metric(metric) | {"threshold": {"max": 0.001}}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec_metric], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "p")
    message = wait_event(cluster, namespace, "p", "FailedScheduling")[0]
    assert message.startswith("0/6 nodes are available: "), message
    assert "1 node(s) had untolerated taint(s)" in message
    assert "1 node(s) were unschedulable" in message
    assert "4 node(s) exceeded threshold m > 0.001" in message
    assert message.endswith(".")
    # The event is posted first, then the condition is written: wait for the condition.
    cond = wait_for(
        "PodScheduled condition on p",
        lambda: next(
            (
                c
                for c in cluster.pod(namespace, "p")["status"].get("conditions") or ()
                if c["type"] == "PodScheduled"
            ),
            None,
        ),
    )
    pod = cluster.pod(namespace, "p")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == message
    assert not pod["spec"].get("nodeName")


def test_two_weighted_metrics_combine_as_a_weighted_mean(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    cpu = metric + "_cpu"
    # latency (weight 3): node-1 best; cpu (weight 1): node-2 best.
    set_and_wait(cluster, metric, {"node-1": 0.1, "node-2": 0.2, "node-3": 0.5, "node-4": 0.5})
    set_and_wait(cluster, cpu, {"node-1": 0.9, "node-2": 0.1, "node-3": 0.5, "node-4": 0.9})
    # Scores over the 4 feasible nodes: latency node-1 100, node-2 75, node-3/4 0;
    # cpu node-1 0, node-2 100, node-3 50, node-4 0.
    # weight 3:1 -> node-1 75, node-2 81.25: node-2 wins; weight 9:1 -> node-1 90, node-2 77.5.
    for weights, winner in (((3, 1), "node-2"), ((9, 1), "node-1")):
        name = f"w{weights[0]}"
        ns_pod = f"pod-{weights[0]}"
        apply_policy(
            cluster,
            namespace,
            name,
            {
                "podSelector": {"matchLabels": {"policy": name}},
                "metrics": [
                    prom_metric(metric, label="instance")
                    | {"name": "latency", "weight": weights[0]},
                    prom_metric(cpu, label="instance") | {"name": "cpu", "weight": weights[1]},
                ],
                "burstPenalty": 0,
            },
        )
        wait_policy_refreshed(cluster, namespace, name)
        cluster.create_pod(namespace, ns_pod, labels={"policy": name})
        assert wait_bound(cluster, namespace, ns_pod) == winner, weights
        scheduled = wait_event(cluster, namespace, ns_pod, "Scheduled")[0]
        assert f"policy {namespace}/{name}" in scheduled
        assert "latency" in scheduled and "cpu" in scheduled


def test_scheduled_event_names_scheduler_policy_and_scores(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, LATENCY)
    # Metrics only: the expected scores are the metric's (test_kube_scores.py shows the
    # kube-scheduler terms in the event).
    spec = {"metrics": [prom_metric(metric)], "burstPenalty": 0, "kubeScores": METRICS_ONLY}
    apply_policy(cluster, namespace, "lat", spec)
    wait_policy_refreshed(cluster, namespace, "lat")
    cluster.create_pod(namespace, "p")
    wait_bound(cluster, namespace, "p")
    # The event is posted after the Binding returns: wait for it, as a user would.
    wait_event(cluster, namespace, "p", "Scheduled")
    events = [e for e in cluster.events_for(namespace, "p") if e["reason"] == "Scheduled"]
    assert events[0]["source"]["component"] == "metricsched"
    assert events[0]["type"] == "Normal"
    message = events[0]["message"]
    assert message.startswith(f"Successfully assigned {namespace}/p to node-3 "), message
    assert f"policy {namespace}/lat: score 100 [m 0.05 → 100]" in message
    assert "runner-up node-2" in message
    described = cluster.kubectl("describe", "pod", "-n", namespace, "p")
    assert "Scheduled" in described and "metricsched" in described
