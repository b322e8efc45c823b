"""Pod fields read for the parity plugins: resource claims, preemption policy, score requests."""

from __future__ import annotations

from typing import Any

from metricsched.core import parse

MI = 1024**2


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u"},
        "spec": {"schedulerName": "metricsched", **spec},
    }


def container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": resources}


def test_resource_claims_are_read_by_name():
    info = parse.pod_from_body(
        pod(
            containers=[container("app")],
            resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}, {"name": "nic"}],
        )
    )
    assert info.resource_claims == ("gpu", "nic")


def test_preemption_policy_is_read_and_empty_when_unset():
    assert parse.pod_from_body(pod(containers=[], preemptionPolicy="Never")).preemption_policy == (
        "Never"
    )
    assert parse.pod_from_body(pod(containers=[])).preemption_policy == ""


def test_score_requests_count_100m_and_200mi_per_container_that_requests_nothing():
    info = parse.pod_from_body(
        pod(
            containers=[
                container("a", requests={"cpu": "250m"}),  # memory missing: 200Mi
                container("b"),  # both missing: 100m, 200Mi
                container("c", limits={"cpu": "1", "memory": "1Gi"}),  # limits are the requests
            ]
        )
    )
    assert info.requests.milli_cpu == 1250 and info.requests.memory == 1024 * MI
    assert info.nonzero_requests is not None
    assert info.nonzero_requests.milli_cpu == 250 + 100 + 1000
    assert info.nonzero_requests.memory == 200 * MI + 200 * MI + 1024 * MI


def test_an_explicit_zero_request_is_not_replaced_by_the_default():
    info = parse.pod_from_body(pod(containers=[container("a", requests={"cpu": "0"})]))
    assert info.nonzero_requests is not None
    assert (info.nonzero_requests.milli_cpu, info.nonzero_requests.memory) == (0, 200 * MI)


def test_a_claim_is_read_with_its_volume_and_deletion():
    claim = parse.claim_from_body(
        {
            "metadata": {"name": "data", "namespace": "shop", "deletionTimestamp": "x"},
            "spec": {"volumeName": "pv-1", "storageClassName": ""},
        }
    )
    assert (claim.namespace, claim.name, claim.volume_name, claim.deleting) == (
        "shop",
        "data",
        "pv-1",
        True,
    )


def test_a_claim_is_read_with_what_volume_binding_asks_of_it():
    bound = parse.claim_from_body(
        {
            "metadata": {
                "name": "data",
                "namespace": "shop",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
            "status": {"phase": "Bound"},
        }
    )
    assert (bound.bind_completed, bound.lost, bound.storage_class) == (True, False, "fast")
    prebound = parse.claim_from_body(
        {
            "metadata": {
                "name": "data",
                "namespace": "shop",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"},
            },
            "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
            "status": {"phase": "Lost"},
        }
    )
    assert (prebound.bind_completed, prebound.lost, prebound.storage_class) == (False, True, "beta")
    unbound = parse.claim_from_body({"metadata": {"name": "data", "namespace": "shop"}})
    assert (unbound.volume_name, unbound.bind_completed, unbound.storage_class) == ("", False, "")


def test_a_volume_is_read_with_its_node_affinity_and_zone_labels_only():
    terms = [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]
    volume = parse.volume_from_body(
        {
            "metadata": {
                "name": "pv-1",
                "labels": {"topology.kubernetes.io/zone": "a", "team": "x"},
            },
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}},
        }
    )
    assert volume.node_affinity == tuple(terms)
    assert volume.zone_labels == {"topology.kubernetes.io/zone": "a"}
    assert parse.volume_from_body({"metadata": {"name": "pv-2"}}).node_affinity is None


def _with_pod_level(body, **resources):
    body["spec"]["resources"] = resources
    return parse.pod_from_body(body)


def test_pod_level_limits_are_a_placed_pods_score_requests_as_the_api_server_defaults_them():
    # No container requests anything; the API server makes the pod-level limits the
    # pod-level requests, and kube-scheduler's NonZeroRequested takes them (no defaults).
    info = _with_pod_level(pod(containers=[container("a")]), limits={"cpu": "2", "memory": "256Mi"})
    assert (info.requests.milli_cpu, info.requests.memory) == (2000, 256 * MI)
    assert info.nonzero_requests is None  # the same as the requests


def test_with_pod_level_requests_a_resource_some_container_requests_gets_no_default():
    info = _with_pod_level(
        pod(containers=[container("a", requests={"cpu": "500m"}), container("b")]),
        requests={"memory": "1Gi"},
    )
    # cpu: requested by a container, so b counts 0 (not 100m); memory: the pod's own.
    assert info.nonzero_requests is None  # the same as the requests
    assert (info.requests.milli_cpu, info.requests.memory) == (500, 1024 * MI)


def test_with_pod_level_requests_a_resource_nobody_requests_gets_the_default_per_container():
    info = _with_pod_level(pod(containers=[container("a"), container("b")]), requests={"cpu": "1"})
    assert info.nonzero_requests is not None
    assert (info.nonzero_requests.milli_cpu, info.nonzero_requests.memory) == (1000, 400 * MI)


def test_the_pod_being_placed_counts_without_its_pod_level_resources_in_least_allocated():
    # kube-scheduler v1.35 builds NodeResourcesFit's scorer without the PodLevelResources
    # gate: the pending pod counts its containers' requests, defaults included.
    info = _with_pod_level(
        pod(containers=[container("a", requests={"cpu": "250m"})]),
        requests={"cpu": "2", "memory": "256Mi"},
    )
    assert (info.requests.milli_cpu, info.requests.memory) == (2000, 256 * MI)
    assert info.fit_score_requests is not None
    assert (info.fit_score_requests.milli_cpu, info.fit_score_requests.memory) == (250, 200 * MI)
    assert parse.pod_from_body(pod(containers=[container("a")])).fit_score_requests is None


def test_with_pod_level_requests_overhead_counts_as_requested_so_gets_no_default():
    body = pod(containers=[container("a"), container("b")], overhead={"memory": "64Mi"})
    info = _with_pod_level(body, limits={"cpu": "500m"})
    # cpu: the pod's own 500m; memory: the overhead is in the pod's request, so no
    # container gets 200Mi (kube-scheduler's getNonMissingContainerRequests).
    assert info.nonzero_requests is None
    assert (info.requests.milli_cpu, info.requests.memory) == (500, 64 * MI)


def test_with_pod_level_requests_a_resize_status_counts_as_requested():
    body = pod(containers=[container("a")])
    body["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}],
    }
    info = _with_pod_level(body, requests={"memory": "1Gi"})
    assert info.nonzero_requests is None
    assert (info.requests.milli_cpu, info.requests.memory) == (2000, 1024 * MI)
