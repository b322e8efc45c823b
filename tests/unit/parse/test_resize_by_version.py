"""In-place resize from v1.37 (kube-scheduler v1.37.2's resource.PodRequests): the pod's
spec, actuated and allocated requests are each summed over its containers and the pod
counts the largest sum per resource; to v1.36, each container counts its own largest.
A container's actuated requests fall back to its allocated ones, those to its spec (to
nothing while the resize is Infeasible)."""

from __future__ import annotations

from metricsched.core import parse, versions

GI = 1024**3
MI = 1024**2


def test_the_largest_sum_not_the_sum_of_the_largest(pod_body, container):
    body = pod_body(containers=[container("a", cpu="1500m"), container("b")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {"name": "a", "resources": {"requests": {"memory": "1Gi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "2"}}},
    ]
    # actuated: a {memory 1Gi}, b {cpu 2}: cpu 2, memory 1Gi; spec: cpu 1.5 -> cpu 2.
    v137 = parse.pod_from_body(body, rules=versions.V1_37)
    assert (v137.requests.milli_cpu, v137.requests.memory) == (2000, GI)
    for rules in (versions.V1_35, versions.V1_36):
        older = parse.pod_from_body(body, rules=rules)
        assert (older.requests.milli_cpu, older.requests.memory) == (3500, GI)


def test_an_infeasible_resize_without_status_counts_nothing_but_the_score_defaults(
    pod_body, container
):
    body = pod_body(containers=[container("c0", cpu="250m", memory="512Mi")], node_name="n1")
    body["status"]["conditions"] = [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    ]
    v137 = parse.pod_from_body(body, rules=versions.V1_37)
    assert (v137.requests.milli_cpu, v137.requests.memory) == (0, 0)
    assert v137.nonzero_requests is not None
    assert (v137.nonzero_requests.milli_cpu, v137.nonzero_requests.memory) == (100, 200 * MI)
    v135 = parse.pod_from_body(body, rules=versions.V1_35)
    assert (v135.requests.milli_cpu, v135.requests.memory) == (250, 512 * MI)


def test_allocated_resources_count_without_a_resources_status(pod_body, container):
    body = pod_body(containers=[container("app", cpu="500m")], node_name="n1")
    body["status"]["containerStatuses"] = [{"name": "app", "allocatedResources": {"cpu": "2"}}]
    assert parse.pod_from_body(body, rules=versions.V1_37).requests.milli_cpu == 2000
    assert parse.pod_from_body(body, rules=versions.V1_35).requests.milli_cpu == 500
