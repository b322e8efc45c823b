"""The informers the rules of v1.35-v1.37 add. Nominated pods feed the snapshot's
``nominated``: a nomination is counted until the pod binds, its nomination is cleared, or
it is deleted; a LIST drops what it lacks; a bound pod is never counted twice.
DeviceClasses feed ``device_class_resources`` and are watched only from v1.36 on."""

from __future__ import annotations

from typing import Any

from metricsched.core import parse, profile
from metricsched.edges import probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers, ingest
from tests.unit.conftest import build_node_body, build_pod_body
from tests.unit.runtime.test_watches_and_relist import _watches


def _nominated(name: str = "preemptor", *, node: str = "node-a", rv: str = "5") -> dict[str, Any]:
    body = build_pod_body(name, cpu="1500m", scheduler="default-scheduler")
    body["metadata"]["resourceVersion"] = rv
    body["status"]["nominatedNodeName"] = node
    return body


def _nominated_names(w: ingest.Ingest) -> dict[str, list[str]]:
    return {node: [p.name for p in pods] for node, pods in w.cache.snapshot().nominated.items()}


def test_the_informer_watches_unbound_pods_with_a_nomination() -> None:
    (resource,) = [r for r in informers.RESOURCES if r.kind == "NominatedPod"]
    assert resource.path == "/api/v1/pods"
    assert "spec.nodeName=," in resource.field_selector
    assert "status.nominatedNodeName!=" in resource.field_selector
    assert resource.key({"metadata": {"uid": "u-1", "namespace": "ns", "name": "p"}}) == "u-1"


def test_a_nomination_counts_in_the_cycles_snapshot() -> None:
    w = _watches()
    w.on_node("ADDED", build_node_body("node-a", cpu="2"))
    w.on_nominated_pod("ADDED", _nominated())
    assert _nominated_names(w) == {"node-a": ["preemptor"]}
    web = parse.pod_from_body(build_pod_body("web", cpu="1"))
    reasons = profile.node_reasons(web, w.cache.snapshot())
    assert reasons == {"node-a": ("Insufficient cpu",)}


def test_a_nomination_moved_to_another_node_follows_it() -> None:
    w = _watches()
    w.on_nominated_pod("ADDED", _nominated(node="node-a"))
    w.on_nominated_pod("MODIFIED", _nominated(node="node-b", rv="6"))
    assert _nominated_names(w) == {"node-b": ["preemptor"]}


def test_leaving_the_watch_ends_the_nomination_and_requeues() -> None:
    w = _watches()
    w.on_nominated_pod("ADDED", _nominated())
    before = w.cache.generation
    w.on_nominated_pod("DELETED", _nominated(rv="7"))
    assert _nominated_names(w) == {}
    assert w.cache.generation > before  # the room it held may help a pending pod


def test_a_pod_seen_bound_is_counted_on_its_node_not_as_nominated() -> None:
    w = _watches()
    w.on_node("ADDED", build_node_body("node-a", cpu="2"))
    w.on_nominated_pod("ADDED", _nominated())
    bound = _nominated(rv="8")
    bound["spec"]["nodeName"] = "node-a"
    bound["status"] = {"phase": "Running", "nominatedNodeName": "node-a"}
    w.on_bound_pod("ADDED", bound)
    assert _nominated_names(w) == {}
    state = w.cache.snapshot().nodes["node-a"]
    assert [p.name for p in state.pods] == ["preemptor"]


def test_a_list_drops_nominations_it_lacks() -> None:
    w = _watches()
    w.on_nominated_pod("ADDED", _nominated("a"))
    w.on_nominated_pod("ADDED", _nominated("b", node="node-b"))
    assert w.cache.retain("NominatedPod", {"uid-shop-b"}) == 1
    assert _nominated_names(w) == {"node-b": ["b"]}


def test_an_unreadable_nominated_pod_is_skipped_and_counted() -> None:
    w = _watches()
    w.on_nominated_pod("ADDED", _nominated())
    broken = _nominated(rv="9")
    broken["spec"]["priority"] = "high"
    w.on_nominated_pod("MODIFIED", broken)
    assert _nominated_names(w) == {}
    skipped = w.metrics.registry.get_sample_value(
        "metricsched_objects_skipped_total", {"kind": "Pod"}
    )
    assert skipped == 1


# --- DeviceClasses (watched from v1.36 on) -----------------------------------------------


def test_device_classes_reach_the_snapshot_and_a_list_drops_the_gone() -> None:
    w = _watches()
    w.on_device_class(
        "ADDED", {"metadata": {"name": "gpu.example.com"}, "spec": {"extendedResourceName": "e/g"}}
    )
    w.on_device_class("ADDED", {"metadata": {"name": "fpga"}, "spec": {}})
    assert w.cache.snapshot().device_class_resources == {
        "e/g",
        "deviceclass.resource.kubernetes.io/gpu.example.com",
        "deviceclass.resource.kubernetes.io/fpga",
    }
    assert w.cache.retain("DeviceClass", {"fpga"}) == 1
    assert w.cache.snapshot().device_class_resources == {"deviceclass.resource.kubernetes.io/fpga"}
    w.on_device_class("DELETED", {"metadata": {"name": "fpga"}})
    assert w.cache.snapshot().device_class_resources == frozenset()


def test_device_classes_are_watched_only_where_the_rules_read_them() -> None:
    assert "DeviceClass" not in {r.kind for r in informers.RESOURCES}
    w = _watches()
    state = informers.ClusterState(
        api=None,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
    )
    state.include(informers.DEVICE_CLASSES)
    state.include(informers.DEVICE_CLASSES)  # once
    kinds = [r.resource.kind for r in state.reflectors]
    assert kinds.count("DeviceClass") == 1
    assert "DeviceClass" in state.waiting_for()  # decisions wait for its first LIST
