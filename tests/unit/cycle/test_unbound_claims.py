"""An unbound claim: Immediate ones are refused as kube-scheduler v1.35 refuses them (VolumeBinding
PreFilter, UnschedulableAndUnresolvable); WaitForFirstConsumer ones with what to do instead."""

from __future__ import annotations

import dataclasses

from metricsched.core import model

Outcome = model.Outcome
# kube-scheduler v1.35.4's reason, followed by the PostFilter text it writes when
# DynamicResources' PreFilter has run (itself it ends such an event with " not found": the
# PreFilter refusal stops the cycle before DynamicResources' PreFilter; README, "Where this
# differs from the design contract").
POST_FILTER = (
    " no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not"
    " helpful for scheduling."
)
IMMEDIATE_MESSAGE = (
    "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims." + POST_FILTER
)
CLASSES = {
    "fast": model.StorageClassInfo(
        name="fast", provisioner="ebs.csi.aws.com", wait_for_first_consumer=False
    ),
    "local": model.StorageClassInfo(
        name="local", provisioner="example.com/local", wait_for_first_consumer=True
    ),
}


def claim(
    name: str, *, storage_class: str = "", volume: str = "", bind_completed: bool = False
) -> model.ClaimInfo:
    return model.ClaimInfo(
        namespace="shop",
        name=name,
        volume_name=volume,
        deleting=False,
        storage_class=storage_class,
        bind_completed=bind_completed,
    )


def storage(cluster: model.ClusterSnapshot, *claims: model.ClaimInfo) -> model.ClusterSnapshot:
    return dataclasses.replace(
        cluster,
        claims={f"{c.namespace}/{c.name}": c for c in claims},
        volumes={"pv-1": model.VolumeInfo(name="pv-1", node_affinity=None, zone_labels={})},
        storage_classes=CLASSES,
    )


def decide(schedule, make_pod, cluster, *claims: str) -> model.Decision:
    return schedule(pod=dataclasses.replace(make_pod(), volume_claims=claims), snapshot=cluster)


def test_an_unbound_claim_of_an_immediate_class_gets_kube_schedulers_message(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = storage(
        make_cluster(make_node("node-1"), make_node("node-2")), claim("data", storage_class="fast")
    )
    decision = decide(schedule, make_pod, cluster, "data")
    assert (decision.outcome, decision.node) == (Outcome.UNSCHEDULABLE, None)
    assert decision.message == IMMEDIATE_MESSAGE


def test_a_claim_without_a_class_or_of_a_class_not_found_counts_as_immediate(
    *, make_node, make_cluster, make_pod, schedule
):
    nodes = make_cluster(make_node("node-1"), make_node("node-2"))
    for unbound in (claim("data"), claim("data", storage_class="gone")):
        decision = decide(schedule, make_pod, storage(nodes, unbound), "data")
        assert decision.message == IMMEDIATE_MESSAGE, unbound


def test_a_pre_bound_claim_the_pv_controller_has_not_finished_counts_as_immediate(
    *, make_node, make_cluster, make_pod, schedule
):
    # spec.volumeName set by its author, no pv.kubernetes.io/bind-completed: even of a
    # WaitForFirstConsumer class, kube-scheduler treats it as an unbound Immediate claim.
    nodes = make_cluster(make_node("node-1"), make_node("node-2"))
    prebound = claim("data", storage_class="local", volume="pv-1")
    assert decide(schedule, make_pod, storage(nodes, prebound), "data").message == (
        IMMEDIATE_MESSAGE
    )
    bound = dataclasses.replace(prebound, bind_completed=True)
    assert decide(schedule, make_pod, storage(nodes, bound), "data").outcome is Outcome.BIND


def test_an_unbound_wait_for_first_consumer_claim_is_refused_with_what_to_do(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = storage(
        make_cluster(make_node("node-1"), make_node("node-2")),
        claim("cache", storage_class="local"),
    )
    decision = decide(schedule, make_pod, cluster, "cache")
    assert (decision.outcome, decision.node) == (Outcome.UNSCHEDULABLE, None)
    assert decision.message.startswith(
        '0/2 nodes are available: persistentvolumeclaim "cache" is not bound: metricsched '
        "places pods whose claims are bound and does not bind or provision claims "
        '(its StorageClass "local" is WaitForFirstConsumer'
    ), decision.message
    assert "or set spec.schedulerName to default-scheduler. " in decision.message
    assert decision.message.endswith("2 Preemption is not helpful for scheduling.")


def test_an_immediate_claim_is_reported_before_a_wait_for_first_consumer_one(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = storage(
        make_cluster(make_node("node-1"), make_node("node-2")),
        claim("cache", storage_class="local"),
        claim("data", storage_class="fast"),
    )
    assert decide(schedule, make_pod, cluster, "cache", "data").message == IMMEDIATE_MESSAGE


def test_a_missing_claim_is_reported_before_any_unbound_one(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = storage(
        make_cluster(make_node("node-1"), make_node("node-2")), claim("data", storage_class="fast")
    )
    decision = decide(schedule, make_pod, cluster, "data", "other")
    assert decision.message == (
        '0/2 nodes are available: persistentvolumeclaim "other" not found.' + POST_FILTER
    )


def test_a_lost_claim_names_the_volume_it_lost(*, make_node, make_cluster, make_pod, schedule):
    lost = dataclasses.replace(
        claim("data", volume="pv-9", bind_completed=True, storage_class="fast"), lost=True
    )
    cluster = storage(make_cluster(make_node("node-1"), make_node("node-2")), lost)
    assert decide(schedule, make_pod, cluster, "data").message == (
        "0/2 nodes are available: persistentvolumeclaim "
        '"data" bound to non-existent persistentvolume "pv-9".' + POST_FILTER
    )


def test_a_generic_ephemeral_volumes_claim_is_waited_for_and_must_belong_to_the_pod(
    *, make_node, make_cluster, make_pod, schedule
):
    nodes = make_cluster(make_node("node-1"), make_node("node-2"))
    pod = dataclasses.replace(
        make_pod("web"), volume_claims=("web-scratch",), ephemeral_claims=("web-scratch",)
    )
    decision = schedule(pod=pod, snapshot=storage(nodes))
    assert decision.message == (
        "0/2 nodes are available: waiting for ephemeral volume controller to create the "
        'persistentvolumeclaim "web-scratch".' + POST_FILTER
    )
    scratch = claim("web-scratch", volume="pv-1", bind_completed=True)
    foreign = storage(nodes, dataclasses.replace(scratch, controller_uid="uid-other"))
    assert schedule(pod=pod, snapshot=foreign).message == (
        "0/2 nodes are available: PVC shop/web-scratch was not created for pod shop/web "
        "(pod is not owner)." + POST_FILTER
    )
    owned = storage(nodes, dataclasses.replace(scratch, controller_uid=pod.uid))
    assert schedule(pod=pod, snapshot=owned).outcome is Outcome.BIND
