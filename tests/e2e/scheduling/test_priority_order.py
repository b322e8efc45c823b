"""Pending pods are tried highest priority first, as kube-scheduler's PrioritySort does:
when room for one pod appears, the high-priority pod created last gets it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes
import pytest

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import OperatorProcess, wait_bound, wait_event
from tests.e2e.scheduling.pools import Pool

LOW_PODS = 4


@pytest.fixture
def priority_classes(cluster: Cluster, namespace: str) -> Iterator[tuple[str, str]]:
    api = kubernetes.client.SchedulingV1Api(cluster.api_client)
    low, high = f"{namespace}-low", f"{namespace}-high"
    api.create_priority_class({"metadata": {"name": low}, "value": 10})
    api.create_priority_class({"metadata": {"name": high}, "value": 1000})
    yield low, high
    for name in (low, high):
        api.delete_priority_class(name)


def test_room_for_one_pod_goes_to_the_highest_priority_pending_pod(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    one_node: Pool,
    priority_classes: tuple[str, str],
) -> None:
    """Before the queue ordered by priority (FIFO with backoff), the oldest low-priority
    pod took the freed cpu; after, a low-priority pod whose backoff ended while the
    deletion arrived still could (the change was applied only after the next pop)."""
    low, high = priority_classes
    node = one_node.names[0]
    cluster.create_pod(namespace, "blocker", cpu="15", spec=one_node.pod_spec())
    cluster.create_pod(namespace, "filler", cpu="1", spec=one_node.pod_spec())
    assert wait_bound(cluster, namespace, "blocker") == node
    assert wait_bound(cluster, namespace, "filler") == node

    waiting = [f"low-{i}" for i in range(LOW_PODS)] + ["high"]
    for name in waiting:
        cls = high if name == "high" else low
        cluster.create_pod(
            namespace, name, cpu="1", spec={**one_node.pod_spec(), "priorityClassName": cls}
        )
        time.sleep(0.2)  # the low-priority pods are the oldest
    for name in waiting:
        wait_event(cluster, namespace, name, "FailedScheduling")
    assert cluster.pod(namespace, "high")["spec"]["priority"] == 1000
    time.sleep(2)  # past every pod's first backoff (1 s): kube-scheduler's choice is clear

    cluster.core.delete_namespaced_pod("filler", namespace, grace_period_seconds=0)
    assert wait_bound(cluster, namespace, "high") == node
    time.sleep(3)  # each low-priority pod is retried (backoff ≤ 10 s; the delete woke them)
    bound = wait_for(
        "the pods' bindings settled",
        lambda: [n for n in waiting if cluster.pod(namespace, n)["spec"].get("nodeName")],
    )
    assert bound == ["high"]
