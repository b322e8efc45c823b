"""A DaemonSet's pods meet no threshold by default (spec.daemonSetPods: Exempt); with
Filter they meet them as any pod. The DaemonSet controller of the test bed's
kube-controller-manager makes the pods, pinned to their node by its node affinity."""

from __future__ import annotations

import json

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)

HOT = {f"node-{i}": 0.9 for i in range(1, 7)}


def create_daemon_set(cluster: Cluster, namespace: str, name: str) -> str:
    """A DaemonSet of metricsched on node-3 only; returns its one pod's name."""
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulerName": "metricsched",
                    "nodeSelector": {"kubernetes.io/hostname": "node-3"},
                    "containers": [
                        {
                            "name": "agent",
                            "image": "agent:1",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    pods = wait_for(
        f"the DaemonSet {name}'s pod",
        lambda: cluster.pods(namespace, f"app={name}") or None,
    )
    return str(pods[0]["metadata"]["name"])


def test_a_daemon_set_pod_is_placed_on_its_hot_node_by_default(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, HOT)
    spec_metric = prom_metric(metric) | {"threshold": {"max": 0.5}}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec_metric], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "lat")
    pod = create_daemon_set(cluster, namespace, "agent")
    assert wait_bound(cluster, namespace, pod) == "node-3"


def test_a_policy_with_daemon_set_pods_filter_leaves_it_pending_on_a_hot_node(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, HOT)
    spec_metric = prom_metric(metric) | {"threshold": {"max": 0.5}}
    spec = {"metrics": [spec_metric], "burstPenalty": 0, "daemonSetPods": "Filter"}
    apply_policy(cluster, namespace, "lat", spec)
    wait_policy_refreshed(cluster, namespace, "lat")
    pod = create_daemon_set(cluster, namespace, "agent")
    message = wait_event(cluster, namespace, pod, "FailedScheduling")[0]
    assert "1 node(s) exceeded threshold m > 0.5" in message, message
