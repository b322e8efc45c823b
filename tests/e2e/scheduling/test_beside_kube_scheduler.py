"""Beside another scheduler: its nominated pods occupy their node until they bind or the
nomination ends, and a pod of ours the kubelet rejects is counted and told why."""

from __future__ import annotations

import time

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import OperatorProcess, wait_bound, wait_event
from tests.e2e.scheduling.pools import Pool


def _nominate(cluster: Cluster, namespace: str, pod: str, node: str) -> None:
    # What kube-scheduler writes when it preempts for a pod or starts a binding cycle
    # with PreBind work (KEP-5278).
    cluster.core.patch_namespaced_pod_status(
        pod, namespace, {"status": {"nominatedNodeName": node}}
    )


def test_a_pod_nominated_by_another_scheduler_holds_its_room_until_it_goes(
    cluster: Cluster, operator: OperatorProcess, namespace: str, one_node: Pool
) -> None:
    node = one_node.names[0]
    spec = one_node.pod_spec()
    cluster.create_pod(namespace, "preemptor", scheduler="someone-else", cpu="12", spec=spec)
    _nominate(cluster, namespace, "preemptor", node)
    time.sleep(1)  # the nomination reaches the informer
    cluster.create_pod(namespace, "ours", cpu="8", spec=spec)
    (message,) = wait_event(cluster, namespace, "ours", "FailedScheduling")[:1]
    assert "Insufficient cpu" in message, message
    assert not cluster.pod(namespace, "ours")["spec"].get("nodeName")

    cluster.core.delete_namespaced_pod("preemptor", namespace, grace_period_seconds=0)
    assert wait_bound(cluster, namespace, "ours", timeout=60) == node


def test_a_kubelet_rejection_of_our_bind_is_counted_and_told(
    cluster: Cluster, operator: OperatorProcess, namespace: str, one_node: Pool
) -> None:
    cluster.create_pod(namespace, "web", cpu="1", spec=one_node.pod_spec())
    node = wait_bound(cluster, namespace, "web")
    # What the kubelet writes when admission fails (kwok does not run admission).
    cluster.core.patch_namespaced_pod_status(
        "web",
        namespace,
        {
            "status": {
                "phase": "Failed",
                "reason": "OutOfcpu",
                "message": "Pod was rejected: Node didn't have enough resource: cpu",
            }
        },
    )
    (message,) = wait_event(cluster, namespace, "web", "RejectedByKubelet")[:1]
    assert f"kubelet on {node} rejected this pod" in message
    assert "another scheduler" in message
    wait_for(
        "the rejection counted",
        lambda: (
            f'metricsched_kubelet_rejections_total{{node="{node}",reason="OutOfcpu"}} 1.0'
            in operator.metrics_text()
        ),
        timeout=30,
    )
