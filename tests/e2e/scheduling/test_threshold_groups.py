"""A threshold per node group (threshold.overrides, by node label) and a Soft threshold,
against the real API server (its CEL rules), Prometheus and the operator."""

from __future__ import annotations

from tests.e2e.conftest import Cluster
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    api_error,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)

# node-5 (tainted) and node-6 (cordoned) are infeasible for plain pods whatever they show.
HOT = {"node-1": 0.9, "node-2": 0.9, "node-3": 0.9, "node-4": 0.6, "node-5": 0.1, "node-6": 0.1}
NODE_4 = {
    "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-4"]}]
}


def test_a_node_group_with_its_own_threshold_takes_the_pod_the_others_refuse(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, HOT)
    threshold = {"max": 0.5, "overrides": [{"nodeSelector": NODE_4, "max": 0.7}]}
    spec_metric = prom_metric(metric) | {"threshold": threshold}
    apply_policy(cluster, namespace, "pools", {"metrics": [spec_metric], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "pools")
    cluster.create_pod(namespace, "p")
    assert wait_bound(cluster, namespace, "p") == "node-4"


def test_a_soft_threshold_scores_the_nodes_when_every_one_is_over(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, HOT)
    spec_metric = prom_metric(metric) | {"threshold": {"max": 0.5, "mode": "Soft"}}
    apply_policy(cluster, namespace, "soft", {"metrics": [spec_metric], "burstPenalty": 0})
    wait_policy_refreshed(cluster, namespace, "soft")
    cluster.create_pod(namespace, "p")
    assert wait_bound(cluster, namespace, "p") == "node-4"
    message = wait_event(cluster, namespace, "p", "Scheduled")[0]
    assert (
        "Soft threshold lifted, every node was outside it: 4 node(s) exceeded threshold m > 0.5"
        in message
    ), message


def test_the_api_server_refuses_an_override_that_states_other_bounds(
    cluster: Cluster, crd: None, namespace: str
) -> None:
    metric = {
        "name": "a",
        "nodeAnnotation": "x/y",
        "threshold": {"max": 0.5, "overrides": [{"nodeSelector": NODE_4, "min": 0.1}]},
    }
    err = api_error(lambda: apply_policy(cluster, namespace, "bad", {"metrics": [metric]}))
    assert err.status == 422, err.body
    assert "each threshold override must state what the threshold states" in str(err.body)
