"""Everything else a pod body carries into PodInfo, and how bad bodies fail."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import model, parse, profile


def test_identity_labels_and_scheduler_are_read(pod):
    web = pod("web-7d4", namespace="shop", labels={"app": "web"}, scheduler="metricsched")
    assert (web.namespace, web.name, web.uid) == ("shop", "web-7d4", "uid-shop-web-7d4")
    assert web.key == "shop/web-7d4"
    assert web.labels == {"app": "web"}
    assert web.scheduler_name == "metricsched"


def test_minimal_body_gets_api_server_defaults():
    bare = parse.pod_from_body({"metadata": {"name": "bare"}, "spec": {"containers": []}})
    assert bare.namespace == "default"
    assert bare.scheduler_name == "default-scheduler"
    assert bare.node_name == ""
    assert bare.phase == "Pending"
    assert bare.creation_timestamp == 0.0
    assert bare.labels == {}
    assert bare.requests == model.Resources(pods=1)
    assert not bare.deleting


def test_empty_body_parses_to_an_unnamed_pod():
    assert parse.pod_from_body({}).name == ""


def test_host_ports_come_from_containers_and_sidecars_only(pod, container):
    web = pod(
        init_containers=[
            container("setup", ports=[{"containerPort": 9000, "hostPort": 9000}]),
            container(
                "proxy",
                restart_policy="Always",
                ports=[{"containerPort": 15001, "hostPort": 15001, "protocol": "UDP"}],
            ),
        ],
        containers=[
            container(
                "app",
                ports=[
                    {"containerPort": 8080, "hostPort": 80, "hostIP": "10.0.0.5"},
                    {"containerPort": 9090},  # no host port: not a node resource
                ],
            )
        ],
    )
    assert set(web.host_ports) == {
        model.HostPort(protocol="UDP", host_ip="0.0.0.0", port=15001),
        model.HostPort(protocol="TCP", host_ip="10.0.0.5", port=80),
    }


def test_host_port_defaults_are_tcp_on_all_addresses(pod):
    web = pod(host_ports=[{"containerPort": 80, "hostPort": 8080}])
    assert web.host_ports == (model.HostPort(protocol="TCP", host_ip="0.0.0.0", port=8080),)


def test_host_port_that_is_not_a_number_is_a_parse_error(pod_body):
    body = pod_body(host_ports=[{"containerPort": 80, "hostPort": "80"}])
    with pytest.raises(parse.ParseError, match=r"spec\.containers\[0\]\.ports\[0\]\.hostPort"):
        parse.pod_from_body(body)


def test_tolerations_are_read_with_equal_as_the_default_operator(pod):
    web = pod(
        tolerations=[
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ]
    )
    assert web.tolerations == (
        model.Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"),
        model.Toleration(key="", operator="Exists", value="", effect=""),
        model.Toleration(key="spot", operator="Exists", value="", effect="NoExecute"),
    )


def test_tolerations_with_unknown_operators_are_dropped_as_they_tolerate_nothing(pod):
    web = pod(tolerations=[{"key": "gen", "operator": "Gt", "value": "3"}])
    assert web.tolerations == ()


def test_scheduling_gates_are_read_in_order(pod):
    assert pod(gates=["example.com/quota", "example.com/approval"]).scheduling_gates == (
        "example.com/quota",
        "example.com/approval",
    )


def test_node_selector_and_required_node_affinity_terms_are_read(pod):
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    web = pod(node_selector={"disk": "ssd"}, node_affinity=[term])
    assert web.node_selector == {"disk": "ssd"}
    assert web.required_node_affinity == (term,)


def test_raw_terms_are_copied_so_later_changes_to_the_body_do_not_leak(pod_body):
    body = pod_body(node_affinity=[{"matchExpressions": []}])
    web = parse.pod_from_body(body)
    body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"].append({"key": "x", "operator": "Exists"})
    assert web.required_node_affinity == ({"matchExpressions": []},)


def test_required_pod_affinity_and_anti_affinity_terms_are_read(pod_body):
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    body = pod_body(pod_affinity=[term], pod_anti_affinity=[term])
    body["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 10, "podAffinityTerm": term}
    ]
    web = parse.pod_from_body(body)
    assert web.pod_affinity == (term,)
    assert web.pod_anti_affinity == (term,)


def test_all_topology_spread_constraints_are_kept_raw(pod):
    hard = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    soft = {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    assert pod(spread=[hard, soft]).topology_spread == (hard, soft)


def test_claim_backed_volumes_name_their_claims_for_volume_binding(pod):
    web = pod(
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "tmp", "emptyDir": {}},
        ]
    )
    assert web.unsupported == ()
    assert web.volume_claims == ("web-data", f"{web.name}-scratch")


def test_node_local_volumes_are_supported(pod):
    web = pod(
        volumes=[{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]
    )
    assert web.unsupported == ()


def test_creation_timestamp_is_read_as_unix_seconds(pod):
    web = pod(created="2024-05-01T10:00:00Z")
    expected = datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC).timestamp()
    assert web.creation_timestamp == expected


def test_fractional_and_offset_timestamps_are_understood(pod):
    assert pod(created="2024-05-01T12:00:00.5+02:00").creation_timestamp == (
        datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC).timestamp() + 0.5
    )


def test_bad_timestamp_is_a_parse_error(pod_body):
    with pytest.raises(parse.ParseError, match=r"^metadata\.creationTimestamp: "):
        parse.pod_from_body(pod_body(created="yesterday"))


def test_deletion_timestamp_marks_the_pod_deleting(pod):
    assert pod(deleting=True).deleting
    assert not pod().deleting


def test_phase_is_read(pod):
    assert pod(phase="Running").phase == "Running"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("metadata",), "pod", "metadata"),
        (("metadata", "labels"), ["app"], "metadata.labels"),
        (("metadata", "labels"), {"app": 1}, "metadata.labels"),
        (("metadata", "name"), 42, "metadata.name"),
        (("spec", "containers"), {"name": "app"}, "spec.containers"),
        (("spec", "containers"), "app", "spec.containers"),
        (("spec", "tolerations"), [["dedicated"]], "spec.tolerations[0]"),
        (("spec", "nodeSelector"), "ssd", "spec.nodeSelector"),
        (("spec", "schedulingGates"), ["gate"], "spec.schedulingGates[0]"),
        (("spec", "topologySpreadConstraints"), ["zone"], "spec.topologySpreadConstraints[0]"),
        (("spec", "volumes"), [None], "spec.volumes[0]"),
        (("status", "phase"), 3, "status.phase"),
    ],
)
def test_wrongly_typed_fields_are_parse_errors_naming_the_field(pod_body, path, value, field):
    body = pod_body()
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(parse.ParseError) as caught:
        parse.pod_from_body(body)
    assert caught.value.field == field


def test_body_that_is_not_an_object_is_a_parse_error():
    with pytest.raises(parse.ParseError):
        parse.pod_from_body(["not", "a", "pod"])  # type: ignore[arg-type]


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
pod_keys = st.sampled_from(
    [
        "metadata",
        "spec",
        "status",
        "labels",
        "containers",
        "initContainers",
        "resources",
        "requests",
        "cpu",
        "ports",
        "hostPort",
        "tolerations",
        "affinity",
        "nodeAffinity",
        "volumes",
        "overhead",
    ]
)
pod_like = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(pod_keys, inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(body=st.dictionaries(pod_keys, pod_like, max_size=3))
def test_malformed_pod_bodies_raise_only_parse_errors(body):
    try:
        parsed = parse.pod_from_body(body)
    except parse.ParseError as error:
        assert error.field
    else:
        assert isinstance(parsed, model.PodInfo)


def _paths(value, prefix=()):
    """Every path into a JSON document, parents before children."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


replacements = st.one_of(
    json_scalars,
    st.lists(json_scalars, max_size=2),
    st.dictionaries(st.text(max_size=4), json_scalars, max_size=2),
)


@settings(max_examples=200)
@given(data=st.data())
def test_corrupting_any_field_of_a_full_pod_raises_only_parse_errors(pod_body, container, data):
    body = pod_body(
        labels={"app": "web"},
        containers=[
            container(
                "app",
                cpu="500m",
                limits={"memory": "1Gi"},
                ports=[{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}],
            )
        ],
        init_containers=[container("proxy", cpu="100m", restart_policy="Always")],
        node_name="n1",
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        node_selector={"disk": "ssd"},
        node_affinity=[{"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}],
        pod_anti_affinity=[{"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "z"}],
        spread=[{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}],
        gates=["g"],
        overhead={"cpu": "10m"},
        volumes=[{"name": "v", "emptyDir": {}}],
        deleting=True,
    )
    body["status"]["containerStatuses"] = [{"name": "app", "allocatedResources": {"cpu": "1"}}]
    path = data.draw(st.sampled_from(list(_paths(body))))
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = data.draw(replacements)
    try:
        parsed = parse.pod_from_body(body)
    except parse.ParseError as error:
        assert error.field
    else:
        assert isinstance(parsed, model.PodInfo)


def test_a_pod_of_a_gang_is_refused_not_placed_alone(pod_body):
    # KEP-4671 (spec.workloadRef, 1.35) and KEP-5832 (spec.schedulingGroup, 1.36): a pod
    # group is placed all or nothing; one pod at a time would break that
    for field, value in (
        ("workloadRef", {"name": "training", "podGroup": "workers"}),
        ("schedulingGroup", {"podGroupName": "workers"}),
    ):
        body = pod_body("worker-0")
        body["spec"][field] = value
        found = parse.pod_from_body(body)
        assert found.unsupported == (f"pod groups placed all or nothing (spec.{field})",)
        assert "metricsched does not support pod groups placed all or nothing" in (
            profile.unsupported_reason(found)
        )
