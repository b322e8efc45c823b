"""NodeVolumeLimits: a node takes no more CSI volumes of a driver than its CSINode allows.

The cluster is fed the way the operator feeds it (raw bodies through the watch handlers into
the cache), and the cycle decides on the cache's snapshot."""

from __future__ import annotations

from typing import Any

from metricsched.core import cycle, model
from metricsched.core.plugins import node_volume_limits
from metricsched.runtime import ingest
from tests.unit.runtime.test_watches_and_relist import _watches

DRIVER = "ebs.csi.aws.com"
EXCEED = node_volume_limits.REASON_MAX_VOLUME_COUNT


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def csi_node(name: str, **counts: int | None) -> dict[str, Any]:
    drivers = [
        {"name": DRIVER if driver == "ebs" else driver, "nodeID": name}
        | ({} if count is None else {"allocatable": {"count": count}})
        for driver, count in counts.items()
    ]
    return {"metadata": {"name": name}, "spec": {"drivers": drivers}}


def pod(name: str, *claims: str, node_name: str = "", priority: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "metricsched",
            "nodeName": node_name,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [
                {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}
                for i, claim in enumerate(claims)
            ],
        },
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def bound_claim(name: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"volumeName": volume, "storageClassName": "ebs"},
        "status": {"phase": "Bound"},
    }


def csi_volume(name: str, handle: str, driver: str = DRIVER) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}


def with_volumes(w: ingest.Ingest, *names: str, driver: str = DRIVER) -> None:
    """A bound claim ``<name>`` on a CSI volume ``pv-<name>`` of ``driver`` for each name."""
    for name in names:
        w.on_volume("ADDED", csi_volume(f"pv-{name}", f"vol-{name}", driver))
        w.on_claim("ADDED", bound_claim(name, f"pv-{name}"))


def decide(w: ingest.Ingest, body: dict[str, Any]) -> model.Decision:
    w.on_pod("ADDED", body)
    pending = next(p for p in w.cache.pending.values() if p.name == body["metadata"]["name"])
    return cycle.schedule_one(
        pod=pending,
        snapshot=w.cache.snapshot(now=0),
        policies=(),
        metrics={},
        default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
        now=0,
        scheduler_names=frozenset({"metricsched"}),
        rr_counter=0,
        seed=0,
    )


def reasons(decision: model.Decision) -> dict[str, str]:
    return {verdict.node: verdict.reason for verdict in decision.verdicts}


def two_nodes(*, small_limit: int = 1) -> ingest.Ingest:
    """node-big (more cpu: LeastAllocated's pick) allows ``small_limit`` volumes; node-small
    has no CSINode."""
    w = _watches()
    w.on_node("ADDED", node("node-big", cpu="32"))
    w.on_node("ADDED", node("node-small", cpu="1"))
    w.on_csi_node("ADDED", csi_node("node-big", ebs=small_limit))
    return w


def test_a_node_at_its_drivers_limit_is_refused_and_another_node_chosen():
    w = two_nodes()
    with_volumes(w, "old", "new")
    w.on_pod("ADDED", pod("db-0", "old", node_name="node-big"))
    decision = decide(w, pod("db-1", "new"))
    assert (decision.outcome, decision.node) == (model.Outcome.BIND, "node-small")
    assert reasons(decision)["node-big"] == EXCEED


def test_a_volume_the_node_already_uses_is_not_counted_twice():
    w = two_nodes()
    with_volumes(w, "shared")
    w.on_pod("ADDED", pod("reader-0", "shared", node_name="node-big"))
    assert decide(w, pod("reader-1", "shared")).node == "node-big"


def test_the_limit_counts_the_pods_new_volumes_together():
    w = two_nodes(small_limit=2)
    with_volumes(w, "a", "b", "c")
    assert decide(w, pod("two", "a", "b")).node == "node-big"
    w = two_nodes(small_limit=2)
    with_volumes(w, "a", "b", "c")
    decision = decide(w, pod("three", "a", "b", "c"))
    assert decision.node == "node-small" and reasons(decision)["node-big"] == EXCEED


def test_limits_are_per_driver_and_a_driver_without_a_count_has_no_limit():
    w = _watches()
    w.on_node("ADDED", node("node-big", cpu="32"))
    w.on_node("ADDED", node("node-small", cpu="1"))
    w.on_csi_node("ADDED", csi_node("node-big", ebs=1, **{"nfs.csi.k8s.io": None}))
    with_volumes(w, "old")
    with_volumes(w, "share-1", "share-2", driver="nfs.csi.k8s.io")
    w.on_pod("ADDED", pod("db-0", "old", "share-1", node_name="node-big"))
    assert decide(w, pod("web", "share-2")).node == "node-big"


def test_a_node_without_a_csi_node_and_non_csi_volumes_have_no_limit():
    w = _watches()
    w.on_node("ADDED", node("node-big", cpu="32"))
    w.on_node("ADDED", node("node-small", cpu="1"))
    with_volumes(w, "old", "new")
    w.on_pod("ADDED", pod("db-0", "old", node_name="node-big"))
    assert decide(w, pod("db-1", "new")).node == "node-big"  # no CSINode yet
    w.on_csi_node("ADDED", csi_node("node-big", ebs=1))
    w.on_volume("MODIFIED", {"metadata": {"name": "pv-new"}, "spec": {"hostPath": {"path": "/x"}}})
    assert decide(w, pod("db-2", "new")).node == "node-big"  # not a CSI volume


def test_an_unbound_claim_of_a_pod_on_the_node_counts_as_one_volume_of_its_provisioner():
    w = two_nodes()
    with_volumes(w, "new")
    w.on_storage_class(
        "ADDED",
        {"metadata": {"name": "ebs"}, "provisioner": DRIVER, "volumeBindingMode": "Immediate"},
    )
    w.on_claim(
        "ADDED",
        {"metadata": {"name": "pending", "namespace": "shop"}, "spec": {"storageClassName": "ebs"}},
    )
    w.on_pod("ADDED", pod("db-0", "pending", node_name="node-big"))
    decision = decide(w, pod("db-1", "new"))
    assert decision.node == "node-small" and reasons(decision)["node-big"] == EXCEED


def test_a_raised_limit_wakes_pending_pods_and_lets_them_fit():
    w = two_nodes()
    with_volumes(w, "old", "new")
    w.on_pod("ADDED", pod("db-0", "old", node_name="node-big"))
    before = w.cache.generation
    w.on_csi_node("MODIFIED", csi_node("node-big", ebs=2))
    assert w.cache.generation > before
    assert decide(w, pod("db-1", "new")).node == "node-big"
    w.on_csi_node("DELETED", csi_node("node-big"))
    assert w.cache.snapshot(now=0).csi_nodes == {}


def test_when_no_node_has_room_the_message_is_kube_schedulers_and_preemption_could_help():
    w = _watches()
    w.on_node("ADDED", node("node-1"))
    w.on_csi_node("ADDED", csi_node("node-1", ebs=1))
    with_volumes(w, "old", "new")
    w.on_pod("ADDED", pod("low", "old", node_name="node-1", priority=0))
    decision = decide(w, pod("high", "new", priority=10))
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    # Unschedulable, not Unresolvable: evicting the lower-priority pod would free the slot.
    assert decision.message == (
        "0/1 nodes are available: 1 node(s) exceed max volume count. "
        "no new claims to deallocate, preemption: 1 node(s) would fit the pod if pods of "
        "lower priority were evicted, but metricsched does not preempt; use a scheduler "
        "that does (default-scheduler) for pods that need preemption."
    )


def test_a_node_ruled_out_by_an_earlier_filter_keeps_that_reason():
    w = _watches()
    w.on_node("ADDED", node("node-1", cpu="1"))
    w.on_csi_node("ADDED", csi_node("node-1", ebs=0))
    with_volumes(w, "new")
    body = pod("big", "new")
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert reasons(decide(w, body))["node-1"] == "Insufficient cpu"


def attachment(name: str, node_name: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "attacher": DRIVER,
            "nodeName": node_name,
            "source": {"persistentVolumeName": volume},
        },
    }


def test_a_volume_still_attached_without_its_pod_takes_a_slot_until_it_is_detached():
    w = two_nodes()
    with_volumes(w, "gone", "new")
    w.on_volume_attachment("ADDED", attachment("csi-gone", "node-big", "pv-gone"))
    decision = decide(w, pod("db-1", "new"))
    assert decision.node == "node-small" and reasons(decision)["node-big"] == EXCEED
    before = w.cache.generation
    w.on_volume_attachment("DELETED", attachment("csi-gone", "node-big", "pv-gone"))
    assert w.cache.generation > before  # detached: pods waiting for a slot are woken
    assert decide(w, pod("db-2", "new")).node == "node-big"


def test_an_attachment_of_a_volume_a_pod_on_the_node_uses_is_not_counted_again():
    w = two_nodes(small_limit=2)
    with_volumes(w, "old", "new")
    w.on_pod("ADDED", pod("db-0", "old", node_name="node-big"))
    w.on_volume_attachment("ADDED", attachment("csi-old", "node-big", "pv-old"))
    assert decide(w, pod("db-1", "new")).node == "node-big"


def test_an_attachment_of_the_pods_own_volume_counts_as_kube_scheduler_counts_it():
    # kube-scheduler v1.35 takes only the volumes of pods on the node out of the pod's new
    # ones, not those of VolumeAttachments: a volume attached without a pod counts twice.
    w = two_nodes()
    with_volumes(w, "new")
    w.on_volume_attachment("ADDED", attachment("csi-new", "node-big", "pv-new"))
    assert reasons(decide(w, pod("db-1", "new")))["node-big"] == EXCEED


def test_attachments_elsewhere_or_without_a_csi_volume_take_no_slot():
    w = two_nodes()
    with_volumes(w, "new", "other")
    w.on_volume_attachment("ADDED", attachment("csi-other", "node-small", "pv-other"))
    w.on_volume_attachment("ADDED", attachment("csi-missing", "node-big", "pv-missing"))
    before = w.cache.generation
    w.on_volume_attachment("MODIFIED", attachment("csi-other", "node-small", "pv-other"))
    assert w.cache.generation == before  # an attachment never makes room
    assert decide(w, pod("db-1", "new")).node == "node-big"
    # An attachment moving nodes leaves the old one.
    w.on_volume_attachment("MODIFIED", attachment("csi-other", "node-big", "pv-other"))
    assert reasons(decide(w, pod("db-2", "new")))["node-big"] == EXCEED
    volume_attachments = w.cache.snapshot(now=0).volume_attachments
    assert volume_attachments is not None and "node-small" not in volume_attachments
