"""The local control plane behaves like a real cluster: what every other e2e test relies on."""

from __future__ import annotations

import json
import os

from tests.e2e.conftest import Cluster, pinned_kube_versions, wait_for


def test_simulated_nodes_are_ready_with_their_taint_and_cordon(cluster: Cluster) -> None:
    nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
    assert {f"node-{i}" for i in range(1, 7)} <= set(nodes)
    for node in nodes.values():
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", node.metadata.name
    assert [(t.key, t.value, t.effect) for t in nodes["node-5"].spec.taints] == [
        ("dedicated", "gpu", "NoSchedule")
    ]
    assert nodes["node-6"].spec.unschedulable is True
    assert not nodes["node-1"].spec.unschedulable


def test_server_reports_the_pinned_kubernetes_version(cluster: Cluster) -> None:
    wanted = os.environ.get("METRICSCHED_KUBE_VERSION") or pinned_kube_versions()[0]
    out = json.loads(cluster.kubectl("version", "-o", "json"))
    assert out["serverVersion"]["gitVersion"] == wanted
    assert out["clientVersion"]["gitVersion"] == wanted


def test_prometheus_returns_one_series_per_simulated_node(cluster: Cluster) -> None:
    series = cluster.promql("node_latency_seconds")
    per_node = {s["metric"]["node"] for s in series}
    assert {f"node-{i}" for i in range(1, 7)} <= per_node
    assert len(series) == len(per_node)
    assert all(s["metric"]["instance"].endswith(":9100") for s in series)


def test_a_metric_set_on_the_exporter_shows_up_in_promql(cluster: Cluster) -> None:
    cluster.set_metric("node_latency_seconds", {"node-3": 0.9})
    got = cluster.wait_for_promql("node_latency_seconds", lambda v: v.get("node-3") == 0.9)
    assert got["node-3"] == 0.9


def test_deployment_with_custom_scheduler_yields_pending_pods(
    cluster: Cluster, namespace: str
) -> None:
    cluster.apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "schedulerName": "nobody-serves-this",
                        "containers": [{"name": "app", "image": "registry.invalid/app:1"}],
                    },
                },
            },
        },
    )
    pods = wait_for(
        "3 pods from the Deployment",
        lambda: (p := cluster.pods(namespace, "app=web")) and len(p) == 3 and p,
    )
    for pod in pods:
        assert pod["status"]["phase"] == "Pending"
        assert not pod["spec"].get("nodeName")


def test_binding_places_a_pending_pod_once(cluster: Cluster, namespace: str) -> None:
    created = cluster.create_pod(namespace, "solo", scheduler="nobody-serves-this")
    assert not cluster.pod(namespace, "solo")["spec"].get("nodeName")

    status = cluster.post_binding(namespace, "solo", "node-1", uid=created["metadata"]["uid"])
    assert status == 201
    pod = cluster.pod(namespace, "solo")
    assert pod["spec"]["nodeName"] == "node-1"
    # kwok drives the bound pod to Running on its simulated node.
    wait_for("pod Running", lambda: cluster.pod(namespace, "solo")["status"]["phase"] == "Running")

    assert cluster.post_binding(namespace, "solo", "node-2") == 409
    assert cluster.pod(namespace, "solo")["spec"]["nodeName"] == "node-1"
