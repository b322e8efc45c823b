"""A pod this scheduler bound that the kubelet then rejects at admission (the capacity
race beside another scheduler) is counted by node and reason, and its Event names the
race; other failures, other schedulers' pods and standbys' copies are not."""

from __future__ import annotations

import asyncio
from typing import Any

from metricsched.core import decision_record
from metricsched.edges import probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers, ingest
from tests.unit.runtime.test_watches_and_relist import _watches

Recorded = list[tuple[Any, dict[str, Any]]]


def _bound_pod(
    name: str,
    *,
    phase: str = "Running",
    reason: str = "",
    scheduler: str = "metricsched",
    ours: bool = True,
    node: str = "node-3",
) -> dict[str, Any]:
    annotations = {decision_record.ANNOTATION: '{"policy":""}'} if ours else {}
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
        status["message"] = "Pod was rejected: Node didn't have enough resource: cpu"
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": status,
    }


def _count(w: ingest.Ingest, *, node: str, reason: str) -> float:
    value = w.metrics.registry.get_sample_value(
        "metricsched_kubelet_rejections_total", {"node": node, "reason": reason}
    )
    return value or 0.0


def test_an_out_of_cpu_rejection_of_our_bind_is_counted_by_node_and_reason() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    w.on_bound_pod("ADDED", _bound_pod("web"))
    # Failed enters the watch of failed pods (and leaves the bound pods' watch).
    w.on_failed_pod("ADDED", _bound_pod("web", phase="Failed", reason="OutOfcpu"))
    assert _count(w, node="node-3", reason="OutOfcpu") == 1


def test_the_rejections_event_names_the_race_and_what_to_do() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    w.on_failed_pod("ADDED", _bound_pod("web", phase="Failed", reason="OutOfmemory"))
    ((ref, event),) = recorded
    assert (ref.kind, ref.namespace, ref.name, ref.uid) == ("Pod", "shop", "web", "uid-web")
    assert event["event_type"] == "Warning"
    assert event["reason"] == "RejectedByKubelet"
    message = event["message"]
    assert "kubelet on node-3 rejected this pod" in message
    assert "OutOfmemory" in message
    assert "another scheduler" in message
    assert "docs/operating.md#metricschedkubeletrejections" in message


def test_every_out_of_resource_and_admission_error_counts() -> None:
    w = _watches(recorded=[])
    reasons = ["OutOfpods", "OutOfephemeral-storage", "OutOfexample.com/gpu",
               "UnexpectedAdmissionError", "NodeAffinity"]  # fmt: skip
    for i, reason in enumerate(reasons):
        w.on_failed_pod("ADDED", _bound_pod(f"p{i}", phase="Failed", reason=reason))
    for reason in reasons:
        assert _count(w, node="node-3", reason=reason) == 1, reason


def test_a_node_affinity_rejection_is_not_blamed_on_another_scheduler() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    w.on_failed_pod("ADDED", _bound_pod("web", phase="Failed", reason="NodeAffinity"))
    ((_, event),) = recorded
    assert "another scheduler" not in event["message"]
    assert "no longer matched" in event["message"]


def test_failures_that_are_not_admission_are_not_counted() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    for i, reason in enumerate(["Evicted", "DeadlineExceeded", "", "OutOf"]):
        w.on_failed_pod("ADDED", _bound_pod(f"p{i}", phase="Failed", reason=reason))
    w.on_failed_pod("ADDED", _bound_pod("done", phase="Succeeded"))
    assert recorded == []
    samples = [
        s
        for m in w.metrics.registry.collect()
        if m.name == "metricsched_kubelet_rejections"
        for s in m.samples
    ]
    assert samples == []


def test_another_schedulers_pods_and_pods_created_on_a_node_are_not_ours_to_report() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    w.on_failed_pod(
        "ADDED",
        _bound_pod("kube", phase="Failed", reason="OutOfcpu", scheduler="default-scheduler"),
    )
    # Our scheduler name, but no decision record: its nodeName was set at creation.
    w.on_failed_pod("ADDED", _bound_pod("direct", phase="Failed", reason="OutOfcpu", ours=False))
    assert recorded == []
    assert _count(w, node="node-3", reason="OutOfcpu") == 0


def test_a_rejection_is_reported_once_whatever_copies_arrive() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    failed = _bound_pod("web", phase="Failed", reason="OutOfpods")
    w.on_failed_pod("ADDED", failed)
    w.on_failed_pod("ADDED", failed)  # a watch resumed from an older version
    assert len(recorded) == 1
    assert _count(w, node="node-3", reason="OutOfpods") == 1


def test_a_standby_neither_counts_nor_posts_what_the_leader_reports() -> None:
    recorded: Recorded = []
    leading = asyncio.Event()
    w = _watches(recorded=recorded, leading=leading)
    w.on_failed_pod("ADDED", _bound_pod("web", phase="Failed", reason="OutOfcpu"))
    assert recorded == []
    assert _count(w, node="node-3", reason="OutOfcpu") == 0
    leading.set()
    w.on_failed_pod("ADDED", _bound_pod("api", phase="Failed", reason="OutOfcpu"))
    assert len(recorded) == 1
    assert _count(w, node="node-3", reason="OutOfcpu") == 1


def test_an_unreadable_failed_pod_is_skipped_and_counted_never_raised() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    body = _bound_pod("web", phase="Failed", reason="OutOfcpu")
    body["status"]["message"] = {"not": "a string"}
    w.on_failed_pod("ADDED", body)
    assert recorded == []
    skipped = w.metrics.registry.get_sample_value(
        "metricsched_objects_skipped_total", {"kind": "Pod"}
    )
    assert skipped == 1


def test_pods_that_had_failed_before_the_watch_are_not_reported() -> None:
    recorded: Recorded = []
    w = _watches(recorded=recorded)
    state = informers.ClusterState(
        api=None,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
    )
    failed = _bound_pod("old", phase="Failed", reason="OutOfcpu")
    state.event("FailedPod", "LISTED", failed)  # the start's LIST, or a re-list's
    w.on_failed_pod("MODIFIED", failed)  # a change to it later (its deletion, ...)
    assert recorded == []
    state.event("FailedPod", "ADDED", _bound_pod("new", phase="Failed", reason="OutOfcpu"))
    assert len(recorded) == 1


def test_the_informer_watches_bound_pods_that_failed() -> None:
    (resource,) = [r for r in informers.RESOURCES if r.kind == "FailedPod"]
    assert resource.path == "/api/v1/pods"
    assert resource.field_selector == "spec.nodeName!=,status.phase=Failed"
