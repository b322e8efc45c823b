"""kube-scheduler parity at the edges: DRA claims, ±Inf values, namespaceSelector, the
PostFilter suffix and the fallback's request arithmetic, against the real API server."""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import Cluster, pod_body, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.pools import Pool

NOT_HELPFUL_6 = "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."


def no_claims(cluster: Cluster) -> str:
    """What DynamicResources' PostFilter adds before DefaultPreemption's text: to v1.36
    "no new claims to deallocate, " for a pod without claims, from v1.37 nothing."""
    return "no new claims to deallocate, " if cluster.minor < 37 else ""


def pod_scheduled(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The pod's PodScheduled condition (written after the FailedScheduling event)."""

    def condition() -> dict[str, Any] | None:
        conditions = cluster.pod(namespace, name)["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    return dict(wait_for(f"PodScheduled condition on {name}", condition))


def still_pending(cluster: Cluster, namespace: str, name: str, seconds: float = 3.0) -> bool:
    """The pod stays unbound for ``seconds`` more (a bind would have happened by then)."""
    time.sleep(seconds)
    return not cluster.pod(namespace, name)["spec"].get("nodeName")


# --- DynamicResources --------------------------------------------------------------------


def test_a_pod_with_resource_claims_is_never_bound_and_is_told_claims_are_not_allocated(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    body = pod_body("dra", spec=spec)
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    cluster.core.create_namespaced_pod(namespace, body)

    message = wait_event(cluster, namespace, "dra", "FailedScheduling")[0]
    assert message == (
        "0/6 nodes are available: pod has resource claims (gpu), which metricsched does not "
        "allocate; set spec.schedulerName to a scheduler that does (default-scheduler). "
        + NOT_HELPFUL_6
    )
    condition = pod_scheduled(cluster, namespace, "dra")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        message,
    )
    assert still_pending(cluster, namespace, "dra")


# --- ±Inf metric values ------------------------------------------------------------------


def test_a_node_reporting_plus_inf_fails_a_max_threshold_instead_of_counting_as_missing(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    # node-3 reports +Inf (a latency histogram's overflow): the worst value, over max.
    values = {"node-1": 0.9, "node-2": 0.8, "node-3": math.inf, "node-4": 0.7}
    set_and_wait(cluster, metric, values)
    spec_metric = prom_metric(metric) | {"threshold": {"max": 0.5}}
    apply_policy(cluster, namespace, "lat", {"metrics": [spec_metric]})
    wait_policy_refreshed(cluster, namespace, "lat")

    cluster.create_pod(namespace, "p")

    message = wait_event(cluster, namespace, "p", "FailedScheduling")[0]
    assert "4 node(s) exceeded threshold m > 0.5" in message, message
    assert still_pending(cluster, namespace, "p")


# --- namespaceSelector -------------------------------------------------------------------


@pytest.fixture
def db_namespace(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A namespace labelled team=web running an app=db pod on node-1."""
    name = cluster.create_namespace(f"{namespace}-db", labels={"team": "web"})
    body = pod_body("db", labels={"app": "db"}, spec={"nodeName": "node-1"})
    cluster.core.create_namespaced_pod(name, body)
    yield name
    cluster.core.delete_namespace(name)


def avoiding_db_of(team: str) -> dict[str, Any]:
    """node-1 only, away from app=db pods of namespaces labelled team=<team>."""
    return {
        "nodeSelector": {"kubernetes.io/hostname": "node-1"},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "namespaceSelector": {"matchLabels": {"team": team}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
    }


def test_namespace_selector_sees_the_real_namespace_labels_in_both_directions(
    cluster: Cluster, operator: OperatorProcess, namespace: str, db_namespace: str
) -> None:
    # The db pod's namespace is team=web: anti-affinity to team=data pods does not apply.
    cluster.create_pod(namespace, "away-from-data", spec=avoiding_db_of("data"))
    assert wait_bound(cluster, namespace, "away-from-data") == "node-1"

    # ... and anti-affinity to team=web pods does.
    cluster.create_pod(namespace, "away-from-web", spec=avoiding_db_of("web"))
    message = wait_event(cluster, namespace, "away-from-web", "FailedScheduling")[0]
    assert "1 node(s) didn't match pod anti-affinity rules" in message, message

    # Relabelling the namespace is seen: the refused pod now fits.
    cluster.core.patch_namespace(db_namespace, {"metadata": {"labels": {"team": "data"}}})
    assert wait_bound(cluster, namespace, "away-from-web") == "node-1"


# --- PostFilter ----------------------------------------------------------------------------


def test_failed_scheduling_ends_with_kube_schedulers_preemption_message(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    cluster.create_pod(namespace, "huge", cpu="64")  # more than any node has

    message = wait_event(cluster, namespace, "huge", "FailedScheduling")[0]
    assert message.startswith("0/6 nodes are available: "), message
    assert "Insufficient cpu" in message
    assert message.endswith(". " + no_claims(cluster) + NOT_HELPFUL_6), message
    assert pod_scheduled(cluster, namespace, "huge")["message"] == message


@pytest.fixture
def never_preempting(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A PriorityClass with preemptionPolicy: Never (admission copies it onto pods)."""
    api = kubernetes.client.SchedulingV1Api(cluster.api_client)
    name = f"{namespace}-never"
    api.create_priority_class(
        {"metadata": {"name": name}, "value": 1000, "preemptionPolicy": "Never"}
    )
    yield name
    api.delete_priority_class(name)


def test_a_pod_that_never_preempts_says_it_is_not_eligible(
    cluster: Cluster, operator: OperatorProcess, namespace: str, never_preempting: str
) -> None:
    spec = {"priorityClassName": never_preempting}
    cluster.create_pod(namespace, "polite", cpu="64", spec=spec)

    message = wait_event(cluster, namespace, "polite", "FailedScheduling")[0]
    assert message.endswith(
        ". " + no_claims(cluster) + "preemption: not eligible due to preemptionPolicy=Never."
    ), message


# --- fallback request arithmetic ------------------------------------------------------------


@pytest.fixture
def two_nodes(cluster: Cluster) -> Iterator[Pool]:
    pool = Pool(cluster, size=2)
    pool.create()
    yield pool
    pool.delete()


def test_least_allocated_counts_containers_without_requests_as_kube_scheduler_does(
    cluster: Cluster, operator: OperatorProcess, namespace: str, two_nodes: Pool
) -> None:
    crowded, busy = two_nodes.names
    # crowded: ten pods that request nothing (kube-scheduler's scores count 100m / 200Mi
    # each, 1 cpu and 2000Mi in all); busy: one pod asking 500m / 500Mi.
    for number in range(10):
        body = pod_body(f"idle-{number}", spec={"nodeName": crowded, **two_nodes.pod_spec()})
        body["spec"]["containers"][0].pop("resources")
        cluster.core.create_namespaced_pod(namespace, body)
    cluster.create_pod(namespace, "worker", cpu="500m", memory="500Mi", spec={"nodeName": busy})
    # kwok runs them once the watch reports them bound: the operator's watch has them too.
    wait_for(
        "the eleven bound pods Running",
        lambda: sum(p["status"].get("phase") == "Running" for p in cluster.pods(namespace)) == 11,
        timeout=60,
    )

    # No policy in this namespace: the default policy places by LeastAllocated.
    cluster.create_pod(namespace, "next", spec=two_nodes.pod_spec())
    assert wait_bound(cluster, namespace, "next") == busy


# --- VolumeBinding for bound claims ----------------------------------------------------------


@pytest.fixture
def claim_on_node_2(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A claim bound (by the KCM's PV controller) to a volume usable on node-2 only."""
    pv = f"{namespace}-pv"
    cluster.core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": "/tmp/metricsched-e2e"},
                "claimRef": {"namespace": namespace, "name": "data"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["node-2"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    cluster.core.create_namespaced_persistent_volume_claim(namespace, claim_body("data", pv))
    wait_for(
        "claim data Bound",
        lambda: (
            cluster.core.read_namespaced_persistent_volume_claim("data", namespace).status.phase
            == "Bound"
        ),
        timeout=60,
    )
    yield "data"
    cluster.core.delete_persistent_volume(pv)


def claim_body(name: str, volume: str = "", storage_class: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
            **({"volumeName": volume} if volume else {}),
        },
    }


@contextlib.contextmanager
def storage_class(cluster: Cluster, *, mode: str) -> Iterator[str]:
    """A StorageClass of ``mode`` whose provisioner nobody runs: its claims stay Pending."""
    storage = kubernetes.client.StorageV1Api(cluster.api_client)
    name = f"e2e-{mode.lower()}-{uuid.uuid4().hex[:6]}"
    storage.create_storage_class(
        {
            "metadata": {"name": name},
            "provisioner": "example.invalid/nobody",
            "volumeBindingMode": mode,
        }
    )
    try:
        yield name
    finally:
        storage.delete_storage_class(name)


def with_claim(claim: str) -> dict[str, Any]:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}


def test_a_pod_with_a_bound_claim_goes_where_the_volume_can_be_used(
    cluster: Cluster, operator: OperatorProcess, namespace: str, claim_on_node_2: str
) -> None:
    # Without the volume, LeastAllocated would pick the biggest node (node-3).
    cluster.create_pod(namespace, "stateful", spec=with_claim(claim_on_node_2))
    assert wait_bound(cluster, namespace, "stateful") == "node-2"


def test_a_pod_with_an_unbound_claim_waits_and_is_told_why(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    # A WaitForFirstConsumer class: the claim stays Pending until a scheduler picks a node
    # for its pod. (A class that does not exist, as here before, makes the claim Immediate:
    # kube-scheduler's "pod has unbound immediate PersistentVolumeClaims", test_volumes.py.)
    with storage_class(cluster, mode="WaitForFirstConsumer") as name:
        cluster.core.create_namespaced_persistent_volume_claim(
            namespace, claim_body("later", storage_class=name)
        )
        cluster.create_pod(namespace, "stateful", spec=with_claim("later"))
        message = wait_event(cluster, namespace, "stateful", "FailedScheduling")[0]
    assert message.startswith(
        '0/6 nodes are available: persistentvolumeclaim "later" is not bound: metricsched '
        "places pods whose claims are bound and does not bind or provision claims"
    ), message
    assert message.endswith(". " + no_claims(cluster) + NOT_HELPFUL_6), message
    assert still_pending(cluster, namespace, "stateful")
