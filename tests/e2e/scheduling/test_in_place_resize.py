"""In-place resize: a pod resized down still holds what its containers run with until the
node actuates the change, as kube-scheduler counts it (resource.PodRequests with the
status resources: per container, the largest of spec, allocated and actuated)."""

from __future__ import annotations

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import OperatorProcess, wait_bound, wait_event
from tests.e2e.scheduling.pools import Pool
from tests.e2e.scheduling.test_parity_edges import still_pending


def _running_with(cluster: Cluster, namespace: str, name: str, cpu: str) -> None:
    """The pod's status as a kubelet reports a container running with ``cpu``."""
    status = cluster.pod(namespace, name)["status"]
    statuses = status.get("containerStatuses") or [{"name": "app", "image": "x", "imageID": ""}]
    for item in statuses:
        item["allocatedResources"] = {"cpu": cpu, "memory": "64Mi"}
        item["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
        item.setdefault("ready", True)
        item.setdefault("restartCount", 0)
    cluster.core.patch_namespaced_pod_status(
        name, namespace, {"status": {"containerStatuses": statuses}}
    )


def test_a_pod_resized_down_keeps_its_running_size_until_the_node_actuates_it(
    cluster: Cluster, operator: OperatorProcess, namespace: str, one_node: Pool
) -> None:
    """Counting the spec alone (2 cpu) would place the 8-cpu pod beside a container that
    still runs with 12: 20 cpu on a 16-cpu node."""
    node = one_node.names[0]
    cluster.create_pod(namespace, "resized", cpu="12", spec=one_node.pod_spec())
    assert wait_bound(cluster, namespace, "resized") == node
    wait_for(
        "the simulated kubelet reports the pod's containers",
        lambda: cluster.pod(namespace, "resized")["status"].get("containerStatuses"),
    )
    _running_with(cluster, namespace, "resized", "12")
    cluster.core.patch_namespaced_pod_resize(
        "resized",
        namespace,
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]}},
    )
    resized = cluster.pod(namespace, "resized")
    assert resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    running = resized["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"]
    assert running == "12", resized["status"]  # the node has not actuated the resize

    cluster.create_pod(namespace, "next", cpu="8", spec=one_node.pod_spec())
    (message,) = wait_event(cluster, namespace, "next", "FailedScheduling")[:1]
    assert "1 Insufficient cpu" in message, message
    assert still_pending(cluster, namespace, "next")

    _running_with(cluster, namespace, "resized", "2")  # the node actuates the resize
    assert wait_bound(cluster, namespace, "next") == node
