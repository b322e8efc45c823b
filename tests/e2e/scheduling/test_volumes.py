"""Claims and CSI attach limits against the real API server and the KCM's PV controller:
unbound Immediate claims get kube-scheduler's refusal, unbound WaitForFirstConsumer claims
a message saying what to do, and a node at its CSINode's attach limit is passed over."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import OperatorProcess, wait_bound, wait_event
from tests.e2e.scheduling.test_parity_edges import (
    NOT_HELPFUL_6,
    claim_body,
    no_claims,
    pod_scheduled,
    still_pending,
    storage_class,
    with_claim,
)

IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"  # kube-scheduler v1.35


def refused_as_unschedulable(cluster: Cluster, namespace: str, pod: str) -> str:
    """The pod's FailedScheduling message, checked against its PodScheduled condition."""
    message = wait_event(cluster, namespace, pod, "FailedScheduling")[0]
    condition = pod_scheduled(cluster, namespace, pod)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == message
    assert still_pending(cluster, namespace, pod)
    return message


# --- unbound claims ------------------------------------------------------------------------


def test_an_unbound_claim_of_an_immediate_class_is_refused_as_kube_scheduler_refuses_it(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """On main (before StorageClasses were watched) every unbound claim got metricsched's
    own "is not bound: metricsched ... does not bind or provision claims" text."""
    with storage_class(cluster, mode="Immediate") as name:
        cluster.core.create_namespaced_persistent_volume_claim(
            namespace, claim_body("now", storage_class=name)
        )
        cluster.create_pod(namespace, "stateful", spec=with_claim("now"))
        message = refused_as_unschedulable(cluster, namespace, "stateful")
    # kube-scheduler's reason and the PostFilter text it writes once DynamicResources'
    # PreFilter has run (v1.35.4 ends this event with " not found" instead).
    assert message == f"0/6 nodes are available: {IMMEDIATE}. " + no_claims(cluster) + NOT_HELPFUL_6


def test_an_unbound_wait_for_first_consumer_claim_is_refused_with_what_to_do(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """On main the message named no class and said only that the pod waits (the class
    was never read: a claim of a missing class got the same answer)."""
    with storage_class(cluster, mode="WaitForFirstConsumer") as name:
        cluster.core.create_namespaced_persistent_volume_claim(
            namespace, claim_body("later", storage_class=name)
        )
        cluster.create_pod(namespace, "stateful", spec=with_claim("later"))
        message = refused_as_unschedulable(cluster, namespace, "stateful")
    assert (
        message
        == (
            '0/6 nodes are available: persistentvolumeclaim "later" is not bound: metricsched '
            "places pods whose claims are bound and does not bind or provision claims (its "
            f'StorageClass "{name}" is WaitForFirstConsumer: the scheduler that places the pod '
            "must pick the node the volume is provisioned or bound for); bind the claim first "
            "(a PersistentVolume with its claimRef, or a StorageClass with volumeBindingMode "
            "Immediate), or set spec.schedulerName to default-scheduler. "
        )
        + no_claims(cluster)
        + NOT_HELPFUL_6
    )


# --- NodeVolumeLimits ----------------------------------------------------------------------


@pytest.fixture
def driver(cluster: Cluster) -> Iterator[str]:
    """A CSI driver that node-3 (LeastAllocated's pick on the kwok cluster) can attach one
    volume of, by its CSINode; no other node has a CSINode."""
    storage = kubernetes.client.StorageV1Api(cluster.api_client)
    name = f"e2e-{uuid.uuid4().hex[:6]}.csi.example.com"
    with contextlib.suppress(kubernetes.client.exceptions.ApiException):
        storage.delete_csi_node("node-3")
    storage.create_csi_node(
        {
            "metadata": {"name": "node-3"},
            "spec": {"drivers": [{"name": name, "nodeID": "node-3", "allocatable": {"count": 1}}]},
        }
    )
    yield name
    storage.delete_csi_node("node-3")


def bound_csi_claim(cluster: Cluster, namespace: str, claim: str, *, driver: str) -> None:
    """``claim``, bound by the KCM's PV controller to a CSI volume of ``driver``."""
    volume = f"{namespace}-{claim}"
    body: dict[str, Any] = {
        "metadata": {"name": volume},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "csi": {"driver": driver, "volumeHandle": f"handle-{volume}"},
            "claimRef": {"namespace": namespace, "name": claim},
            "persistentVolumeReclaimPolicy": "Retain",
        },
    }
    cluster.core.create_persistent_volume(body)
    cluster.core.create_namespaced_persistent_volume_claim(namespace, claim_body(claim, volume))
    wait_for(
        f"claim {claim} Bound",
        lambda: (
            cluster.core.read_namespaced_persistent_volume_claim(claim, namespace).status.phase
            == "Bound"
        ),
        timeout=60,
    )


@pytest.fixture
def csi_claims(cluster: Cluster, namespace: str, driver: str) -> Iterator[list[str]]:
    claims = ["vol-1", "vol-2", "vol-3"]
    for claim in claims:
        bound_csi_claim(cluster, namespace, claim, driver=driver)
    yield claims
    for claim in claims:
        with contextlib.suppress(kubernetes.client.exceptions.ApiException):
            cluster.core.delete_persistent_volume(f"{namespace}-{claim}")


def test_a_node_at_its_csi_attach_limit_is_refused_and_another_node_chosen(
    cluster: Cluster, operator: OperatorProcess, namespace: str, csi_claims: list[str]
) -> None:
    """On main CSINodes were not read: db-1 went to node-3 too, over its attach limit."""
    first, second, third = csi_claims
    cluster.create_pod(namespace, "db-0", spec={"nodeName": "node-3", **with_claim(first)})
    wait_for(
        "db-0 Running on node-3",
        lambda: cluster.pod(namespace, "db-0")["status"].get("phase") == "Running",
        timeout=60,
    )
    # 1 cpu / 4Gi: node-3 (16 cpu, 64Gi) scores clearly above node-2 (8 cpu, 32Gi).
    size = {"cpu": "1", "memory": "4Gi"}
    cluster.create_pod(namespace, "db-1", spec=with_claim(second), **size)
    assert wait_bound(cluster, namespace, "db-1") == "node-2"  # node-3 holds its one volume

    # The volume node-3 already has does not count again: node-3 is still the pick.
    cluster.create_pod(namespace, "reader", spec=with_claim(first), **size)
    assert wait_bound(cluster, namespace, "reader") == "node-3"

    pinned = {"nodeSelector": {"kubernetes.io/hostname": "node-3"}, **with_claim(third)}
    cluster.create_pod(namespace, "db-2", spec=pinned)
    message = refused_as_unschedulable(cluster, namespace, "db-2")
    assert message.startswith("0/6 nodes are available: 1 node(s) exceed max volume count, ")
