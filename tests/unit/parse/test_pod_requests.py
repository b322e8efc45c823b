"""A pod's effective request, computed as kube-scheduler computes it."""

from __future__ import annotations

import pytest

from metricsched.core import parse, pod_resources

MI = 2**20
GI = 2**30


def test_regular_containers_requests_are_summed(pod, container):
    web = pod(
        containers=[
            container("a", cpu="500m", memory="1Gi"),
            container("b", cpu="250m", memory="512Mi"),
        ]
    )
    assert web.requests.milli_cpu == 750
    assert web.requests.memory == GI + 512 * MI


def test_every_pod_takes_one_pod_slot(pod):
    assert pod(cpu="100m").requests.pods == 1


def test_init_container_larger_than_the_sum_sets_the_request(pod, container):
    # kube-scheduler's own example: init 2 cpu / 1G and 2 cpu / 3G; app 2 cpu / 1G, 1 cpu / 1G.
    web = pod(
        init_containers=[
            container("i1", cpu="2", memory="1G"),
            container("i2", cpu="2", memory="3G"),
        ],
        containers=[container("c1", cpu="2", memory="1G"), container("c2", cpu="1", memory="1G")],
    )
    assert web.requests.milli_cpu == 3000
    assert web.requests.memory == 3 * 10**9


def test_init_containers_are_combined_with_max_not_sum(pod, container):
    web = pod(
        init_containers=[container("i1", cpu="1"), container("i2", cpu="1")],
        containers=[container("c", cpu="100m")],
    )
    assert web.requests.milli_cpu == 1000


def test_sidecar_adds_to_the_running_sum(pod, container):
    web = pod(
        init_containers=[container("proxy", cpu="200m", restart_policy="Always")],
        containers=[container("app", cpu="500m")],
    )
    assert web.requests.milli_cpu == 700


def test_regular_init_after_a_sidecar_runs_beside_it(pod, container):
    # init "migrate" needs 1 cpu while "proxy" (200m) already runs: peak 1200m > 700m.
    web = pod(
        init_containers=[
            container("proxy", cpu="200m", restart_policy="Always"),
            container("migrate", cpu="1"),
        ],
        containers=[container("app", cpu="500m")],
    )
    assert web.requests.milli_cpu == 1200


def test_regular_init_before_a_sidecar_does_not_run_beside_it(pod, container):
    web = pod(
        init_containers=[
            container("migrate", cpu="1"),
            container("proxy", cpu="200m", restart_policy="Always"),
        ],
        containers=[container("app", cpu="500m")],
    )
    assert web.requests.milli_cpu == 1000


def test_init_container_with_restart_policy_never_is_a_regular_init(pod, container):
    web = pod(
        init_containers=[container("setup", cpu="300m", restart_policy="Never")],
        containers=[container("app", cpu="500m")],
    )
    assert web.requests.milli_cpu == 500


def test_overhead_is_added_after_everything_else(pod, container):
    web = pod(
        init_containers=[container("i", cpu="2")],
        containers=[container("app", cpu="500m")],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    assert web.requests.milli_cpu == 2250
    assert web.requests.memory == 120 * MI


def test_limits_stand_in_for_missing_requests(pod, container):
    web = pod(containers=[container("app", memory="1Gi", limits={"cpu": "2", "memory": "4Gi"})])
    assert web.requests.milli_cpu == 2000
    assert web.requests.memory == GI  # an explicit request wins over the limit


def test_container_without_requests_or_limits_requests_nothing(pod, container):
    web = pod(containers=[container("app")])
    assert (web.requests.milli_cpu, web.requests.memory, web.requests.ephemeral_storage) == (
        0,
        0,
        0,
    )


def test_quantities_are_summed_exactly_and_rounded_once(pod, container):
    # Two 0.5m requests are 1m together; rounding each first would give 2m.
    web = pod(containers=[container("a", cpu="0.5m"), container("b", cpu="0.5m")])
    assert web.requests.milli_cpu == 1


def test_ephemeral_storage_is_counted(pod):
    assert pod(ephemeral="2Gi").requests.ephemeral_storage == 2 * GI


def test_extended_resources_and_hugepages_are_scalar(pod):
    web = pod(
        requests={
            "cpu": "1",
            "nvidia.com/gpu": "2",
            "hugepages-2Mi": "64Mi",
            "example.com/foo": "0",
        }
    )
    assert web.requests.scalar == {"nvidia.com/gpu": 2, "hugepages-2Mi": 64 * MI}


def test_unknown_resources_without_a_domain_are_ignored(pod):
    web = pod(requests={"cpu": "1", "storage": "10Gi", "pods": "3"})
    assert web.requests.scalar == {}
    assert web.requests.pods == 1


def test_scalar_resources_follow_the_same_init_and_sidecar_rules(pod, container):
    web = pod(
        init_containers=[container("i", requests={"example.com/dongle": "3"})],
        containers=[container("app", requests={"example.com/dongle": "1"})],
    )
    assert web.requests.scalar == {"example.com/dongle": 3}


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("nvidia.com/gpu", True),
        ("kubernetes.io/batch-cpu", True),
        ("hugepages-1Gi", True),
        ("attachable-volumes-aws-ebs", True),
        ("requests.nvidia.com/gpu", False),
        ("cpu", False),
        ("memory", False),
        ("pods", False),
        ("storage", False),
    ],
)
def test_scalar_resource_names_follow_kube_scheduler(name, scalar):
    assert pod_resources.is_scalar_resource(name) is scalar


def test_pod_level_requests_replace_the_container_total_for_cpu_and_memory(pod_body, container):
    body = pod_body(containers=[container("app", cpu="100m", memory="64Mi")])
    body["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "1Gi"}}
    web = parse.pod_from_body(body)
    assert web.requests.milli_cpu == 2000
    assert web.requests.memory == GI


def test_pod_level_limit_becomes_the_request_when_no_container_asks(pod_body, container):
    body = pod_body(containers=[container("app", memory="64Mi")])
    body["spec"]["resources"] = {"limits": {"cpu": "3", "memory": "2Gi"}}
    web = parse.pod_from_body(body)
    assert web.requests.milli_cpu == 3000  # no container asks for cpu
    assert web.requests.memory == 64 * MI  # a container asks for memory: its sum stands


def test_pod_level_requests_do_not_replace_ephemeral_storage(pod_body, container):
    body = pod_body(containers=[container("app", ephemeral="1Gi")])
    body["spec"]["resources"] = {"requests": {"ephemeral-storage": "5Gi"}}
    assert parse.pod_from_body(body).requests.ephemeral_storage == GI


# In-place resize: the cases below were found by the differential oracle (tests/parity).


def test_container_status_without_resources_leaves_the_spec_request(pod_body, container):
    # kube-scheduler reads allocatedResources only for a status that reports resources.
    body = pod_body(containers=[container("app", cpu="500m", memory="1Gi")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {"name": "app", "allocatedResources": {"cpu": "2", "memory": "512Mi"}}
    ]
    web = parse.pod_from_body(body)
    assert (web.requests.milli_cpu, web.requests.memory) == (500, GI)


def test_resized_container_counts_the_largest_of_spec_actuated_and_allocated(pod_body, container):
    body = pod_body(containers=[container("app", cpu="500m", memory="1Gi")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {
            "name": "app",
            "allocatedResources": {"cpu": "2", "memory": "512Mi"},
            "resources": {"requests": {"cpu": "750m"}},
        }
    ]
    web = parse.pod_from_body(body)
    assert (web.requests.milli_cpu, web.requests.memory) == (2000, GI)


def test_each_resized_container_takes_its_own_maximum_before_the_sum(pod_body, container):
    body = pod_body(containers=[container("a", cpu="1500m"), container("b")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {"name": "a", "resources": {"requests": {"memory": "1Gi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "2"}}},
    ]
    web = parse.pod_from_body(body)
    assert (web.requests.milli_cpu, web.requests.memory) == (3500, GI)


def test_infeasible_resize_counts_actuated_and_allocated_but_not_the_spec(pod_body, container):
    body = pod_body(containers=[container("app", cpu="4")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {
            "name": "app",
            "allocatedResources": {"cpu": "1"},
            "resources": {"requests": {"cpu": "500m"}},
        }
    ]
    body["status"]["conditions"] = [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    ]
    assert parse.pod_from_body(body).requests.milli_cpu == 1000
    body["status"]["conditions"][0]["reason"] = "Deferred"
    assert parse.pod_from_body(body).requests.milli_cpu == 4000


def test_regular_init_container_status_is_ignored_and_sidecar_status_counts(pod_body, container):
    init = container("init", cpu="100m")
    sidecar = container("proxy", cpu="100m", restart_policy="Always")
    body = pod_body(containers=[container("app", cpu="100m")], node_name="n1")
    body["spec"]["initContainers"] = [init, sidecar]
    body["status"]["initContainerStatuses"] = [
        {"name": "init", "resources": {"requests": {"cpu": "8"}}},
        {"name": "proxy", "resources": {"requests": {"cpu": "1"}}},
    ]
    assert parse.pod_from_body(body).requests.milli_cpu == 1100


def test_bound_pod_counts_actuated_requests_reported_in_status(pod_body, container):
    body = pod_body(containers=[container("app", cpu="500m")], node_name="n1")
    body["status"]["containerStatuses"] = [
        {"name": "app", "resources": {"requests": {"cpu": "750m"}}}
    ]
    assert parse.pod_from_body(body).requests.milli_cpu == 750


def test_pending_pod_ignores_container_status(pod_body, container):
    body = pod_body(containers=[container("app", cpu="500m")])
    body["status"]["containerStatuses"] = [{"name": "app", "allocatedResources": {"cpu": "2"}}]
    assert parse.pod_from_body(body).requests.milli_cpu == 500


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ({"cpu": "lots"}, "spec.containers[0].resources.requests.cpu"),
        ({"memory": "-1Gi"}, "spec.containers[0].resources.requests.memory"),
        ({"cpu": None}, "spec.containers[0].resources.requests.cpu"),
    ],
)
def test_bad_request_is_a_parse_error_naming_the_field(pod_body, requests, field):
    with pytest.raises(parse.ParseError) as caught:
        parse.pod_from_body(pod_body(requests=requests))
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_bad_overhead_is_a_parse_error_naming_the_field(pod_body):
    with pytest.raises(parse.ParseError, match=r"^spec\.overhead\.cpu: "):
        parse.pod_from_body(pod_body(cpu="1", overhead={"cpu": "one"}))


def test_resources_that_are_not_an_object_are_a_parse_error(pod_body):
    body = pod_body()
    body["spec"]["containers"][0]["resources"] = ["cpu"]
    with pytest.raises(parse.ParseError, match=r"^spec\.containers\[0\]\.resources: "):
        parse.pod_from_body(body)
