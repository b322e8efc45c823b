"""DRA-backed extended resources (KEP-5004, the rules of v1.36 and later): an extended
resource a DeviceClass maps, on a node that does not list it in allocatable, is DRA's in
kube-scheduler; metricsched does not allocate claims, so it refuses such nodes with a
reason that says what to do, never ``Insufficient`` and never a bind without a device.
Nodes that list the resource (a device plugin) are checked as before; v1.35 is unchanged."""

from __future__ import annotations

import dataclasses
from typing import Any

from metricsched.core import cycle, model, parse, profile, versions
from metricsched.core.plugins import node_resources_fit
from tests.unit.conftest import build_cluster, build_node_body, build_pod_body

GPU = "example.com/gpu"
DRA_REASON = node_resources_fit.filtering.dra_backed_reason(GPU)


def _scene(
    *, rules: versions.Rules, classes: tuple[model.DeviceClassInfo, ...]
) -> model.ClusterSnapshot:
    nodes = [
        parse.node_from_body(build_node_body("dra-node")),  # no GPU in allocatable
        parse.node_from_body(build_node_body("plugin-node", extended={GPU: "2"})),
    ]
    return dataclasses.replace(
        build_cluster(nodes=nodes),
        rules=rules,
        device_class_resources=parse.device_class_resources(classes),
    )


def _gpu_pod(resource: str = GPU, amount: str = "1") -> model.PodInfo:
    return parse.pod_from_body(build_pod_body("trainer", requests={resource: amount}))


GPU_CLASS = model.DeviceClassInfo(name="gpu.example.com", extended_resource_name=GPU)


def test_a_mapped_resource_on_a_node_without_it_is_refused_as_dras_with_what_to_do() -> None:
    reasons = profile.node_reasons(_gpu_pod(), _scene(rules=versions.V1_36, classes=(GPU_CLASS,)))
    assert reasons == {"dra-node": (DRA_REASON,), "plugin-node": ()}
    assert "metricsched does not allocate" in DRA_REASON
    assert "default-scheduler" in DRA_REASON


def test_a_device_plugin_node_is_checked_as_before() -> None:
    scene = _scene(rules=versions.V1_37, classes=(GPU_CLASS,))
    reasons = profile.node_reasons(_gpu_pod(amount="3"), scene)
    assert reasons == {"dra-node": (DRA_REASON,), "plugin-node": (f"Insufficient {GPU}",)}


def test_v1_35_says_insufficient_as_kube_scheduler_v1_35_does() -> None:
    reasons = profile.node_reasons(_gpu_pod(), _scene(rules=versions.V1_35, classes=(GPU_CLASS,)))
    assert reasons == {"dra-node": (f"Insufficient {GPU}",), "plugin-node": ()}


def test_a_resource_no_device_class_maps_stays_insufficient() -> None:
    other = model.DeviceClassInfo(
        name="fpga.example.com", extended_resource_name="example.com/fpga"
    )
    reasons = profile.node_reasons(_gpu_pod(), _scene(rules=versions.V1_36, classes=(other,)))
    assert reasons["dra-node"] == (f"Insufficient {GPU}",)


def test_every_class_serves_its_implicit_resource_name() -> None:
    unnamed = model.DeviceClassInfo(name="gpu.example.com")
    implicit = "deviceclass.resource.kubernetes.io/gpu.example.com"
    reasons = profile.node_reasons(
        _gpu_pod(implicit), _scene(rules=versions.V1_36, classes=(unnamed,))
    )
    # No node lists the implicit name in allocatable: every node would serve it by DRA.
    assert set(reasons.values()) == {(node_resources_fit.filtering.dra_backed_reason(implicit),)}


def test_the_failed_scheduling_message_says_why_and_what_to_do() -> None:
    scene = _scene(rules=versions.V1_36, classes=(GPU_CLASS,))
    scene = dataclasses.replace(scene, nodes={"dra-node": scene.nodes["dra-node"]})
    decision = cycle.schedule_one(
        pod=_gpu_pod(),
        snapshot=scene,
        policies=(),
        metrics={},
        default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
        now=0.0,
        scheduler_names=frozenset({"metricsched"}),
        rr_counter=0,
        seed=0,
    )
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert decision.message.startswith(f"0/1 nodes are available: 1 {DRA_REASON}.")


def test_a_device_class_body_is_read_at_the_parse_boundary() -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "gpu.example.com"},
        "spec": {"extendedResourceName": GPU, "selectors": []},
    }
    assert parse.device_class_from_body(body) == GPU_CLASS
    assert parse.device_class_from_body({"metadata": {"name": "x"}}).extended_resource_name == ""
