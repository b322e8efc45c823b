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


def _pod_level(pod_body, container, *, infeasible: bool = False):
    body = pod_body(containers=[container("app")], node_name="n1")
    body["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    body["status"]["resources"] = {"requests": {"cpu": "2", "memory": "512Mi"}}
    body["status"]["allocatedResources"] = {"cpu": "1500m", "memory": "2Gi"}
    if infeasible:
        body["status"]["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        ]
    return body


def test_pod_level_resize_counts_the_largest_of_spec_actuated_and_allocated_from_v1_36(
    pod_body, container
):
    body = _pod_level(pod_body, container)
    for rules in (versions.V1_36, versions.V1_37):
        pod = parse.pod_from_body(body, rules=rules)
        assert (pod.requests.milli_cpu, pod.requests.memory) == (2000, 2 * GI)
    v135 = parse.pod_from_body(body, rules=versions.V1_35)
    assert (v135.requests.milli_cpu, v135.requests.memory) == (1000, GI)


def test_an_infeasible_pod_level_resize_leaves_the_spec_out(pod_body, container):
    body = _pod_level(pod_body, container, infeasible=True)
    body["spec"]["resources"]["requests"] = {"cpu": "4", "memory": "4Gi"}
    for rules in (versions.V1_36, versions.V1_37):
        pod = parse.pod_from_body(body, rules=rules)
        assert (pod.requests.milli_cpu, pod.requests.memory) == (2000, 2 * GI)


def test_to_v1_36_only_the_resources_the_pod_level_spec_names_are_resized(pod_body, container):
    body = _pod_level(pod_body, container)
    body["spec"]["resources"] = {"requests": {"cpu": "1"}}
    body["spec"]["containers"][0]["resources"] = {"requests": {"memory": "256Mi"}}
    v136 = parse.pod_from_body(body, rules=versions.V1_36)
    assert (v136.requests.milli_cpu, v136.requests.memory) == (2000, 256 * MI)
    v137 = parse.pod_from_body(body, rules=versions.V1_37)
    assert (v137.requests.milli_cpu, v137.requests.memory) == (2000, 2 * GI)
