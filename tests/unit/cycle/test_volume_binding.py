"""Pods with bound claims go where their volumes can be used; unbound claims wait, unbound."""

from __future__ import annotations

import dataclasses

from metricsched.core import model

Outcome = model.Outcome
ZONE = "topology.kubernetes.io/zone"
ON_NODE_2 = (
    {
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-2"]}
        ]
    },
)


def claiming(pod: model.PodInfo, *claims: str) -> model.PodInfo:
    return dataclasses.replace(pod, volume_claims=claims)


def with_storage(
    cluster: model.ClusterSnapshot, *claims: model.ClaimInfo, volumes: tuple[model.VolumeInfo, ...]
) -> model.ClusterSnapshot:
    return dataclasses.replace(
        cluster,
        claims={f"{claim.namespace}/{claim.name}": claim for claim in claims},
        volumes={volume.name: volume for volume in volumes},
    )


def claim(
    name: str,
    volume: str = "",
    *,
    deleting: bool = False,
    prebound: bool = False,
    lost: bool = False,
    storage_class: str = "",
) -> model.ClaimInfo:
    """A claim of shop; with ``volume``, bound to it by the PV controller (bind-completed)
    unless ``prebound`` (named, the PV controller not done yet)."""
    return model.ClaimInfo(
        namespace="shop",
        name=name,
        volume_name=volume,
        deleting=deleting,
        storage_class=storage_class,
        bind_completed=bool(volume) and not prebound,
        lost=lost,
    )


WAIT_FOR_FIRST_CONSUMER = model.StorageClassInfo(
    name="local", provisioner="example.com/local", wait_for_first_consumer=True
)


def volume(name: str, *, affinity=None, zones=None) -> model.VolumeInfo:
    return model.VolumeInfo(name=name, node_affinity=affinity, zone_labels=zones or {})


def test_a_pod_goes_only_where_its_bound_volumes_node_affinity_allows(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = with_storage(
        make_cluster(make_node("node-1"), make_node("node-2"), make_node("node-3")),
        claim("data", "pv-1"),
        volumes=(volume("pv-1", affinity=ON_NODE_2),),
    )
    decision = schedule(pod=claiming(make_pod(), "data"), snapshot=cluster)
    assert (decision.outcome, decision.node) == (Outcome.BIND, "node-2")
    reasons = {verdict.node: verdict.reason for verdict in decision.verdicts}
    assert reasons["node-1"] == "node(s) didn't match PersistentVolume's node affinity"


def test_a_volume_without_node_affinity_can_be_used_anywhere(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = with_storage(
        make_cluster(make_node("node-1")), claim("data", "pv-1"), volumes=(volume("pv-1"),)
    )
    assert schedule(pod=claiming(make_pod(), "data"), snapshot=cluster).node == "node-1"


def test_nodes_outside_the_volumes_zone_are_ruled_out_and_nodes_without_zones_are_not(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = with_storage(
        make_cluster(
            make_node("node-1", labels={ZONE: "zone-b"}),
            make_node("node-2", labels={ZONE: "zone-a"}),
        ),
        claim("data", "pv-1"),
        volumes=(volume("pv-1", zones={ZONE: "zone-a__zone-c"}),),
    )
    decision = schedule(pod=claiming(make_pod(), "data"), snapshot=cluster)
    assert decision.node == "node-2"
    reasons = {verdict.node: verdict.reason for verdict in decision.verdicts}
    assert reasons["node-1"] == "node(s) had no available volume zone"
    unzoned = with_storage(
        make_cluster(make_node("node-1")),
        claim("data", "pv-1"),
        volumes=(volume("pv-1", zones={ZONE: "zone-a"}),),
    )
    assert schedule(pod=claiming(make_pod(), "data"), snapshot=unzoned).node == "node-1"


def test_an_unbound_claim_is_refused_on_every_node_and_never_bound(
    *, make_node, make_cluster, make_pod, schedule
):
    # WaitForFirstConsumer: kube-scheduler would bind or provision it; metricsched does not.
    cluster = dataclasses.replace(
        with_storage(
            make_cluster(make_node("node-1")), claim("data", storage_class="local"), volumes=()
        ),
        storage_classes={"local": WAIT_FOR_FIRST_CONSUMER},
    )
    decision = schedule(pod=claiming(make_pod(), "data"), snapshot=cluster)
    assert (decision.outcome, decision.node) == (Outcome.UNSCHEDULABLE, None)
    assert decision.message == (
        '0/1 nodes are available: persistentvolumeclaim "data" is not bound: metricsched '
        "places pods whose claims are bound and does not bind or provision claims "
        '(its StorageClass "local" is WaitForFirstConsumer: the scheduler that places the '
        "pod must pick the node the volume is provisioned or bound for); bind the claim "
        "first (a PersistentVolume with its claimRef, or a StorageClass with "
        "volumeBindingMode Immediate), or set spec.schedulerName to default-scheduler. "
        "no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_missing_and_deleted_claims_and_missing_volumes_are_refused_as_kube_scheduler_says(
    *, make_node, make_cluster, make_pod, schedule
):
    nodes = make_cluster(make_node("node-1"))
    cases = [
        (with_storage(nodes, volumes=()), 'persistentvolumeclaim "data" not found'),
        (
            with_storage(nodes, claim("data", "pv-1", deleting=True), volumes=(volume("pv-1"),)),
            'persistentvolumeclaim "data" is being deleted',
        ),
        (
            with_storage(nodes, claim("data", "pv-9"), volumes=()),
            'persistentvolume "pv-9" not found',
        ),
    ]
    for cluster, reason in cases:
        decision = schedule(pod=claiming(make_pod(), "data"), snapshot=cluster)
        assert decision.outcome is Outcome.UNSCHEDULABLE
        assert decision.message.startswith(f"0/1 nodes are available: {reason}. "), reason


def test_claims_the_pv_controller_binds_are_refused_as_kube_scheduler_says(
    *, make_node, make_cluster, make_pod, schedule
):
    # No StorageClass (immediate binding), or pre-bound to a volume and not yet bound by
    # the PV controller (no pv.kubernetes.io/bind-completed): VolumeBinding's PreFilter.
    nodes = make_cluster(make_node("node-1"))
    for unbound in (
        claim("data"),
        claim("data", "pv-1", prebound=True),
        claim("data", "pv-1", prebound=True, storage_class="wait-for-first-consumer"),
    ):
        cluster = with_storage(nodes, unbound, volumes=(volume("pv-1"),))
        decision = schedule(pod=claiming(make_pod(), "data"), snapshot=cluster)
        assert decision.outcome is Outcome.UNSCHEDULABLE
        assert decision.message.startswith(
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        ), unbound


def test_a_lost_claim_and_a_missing_claim_are_reported_before_other_claims(
    *, make_node, make_cluster, make_pod, schedule
):
    nodes = make_cluster(make_node("node-1"))
    lost = with_storage(nodes, claim("data", "pv-1", lost=True), volumes=())
    decision = schedule(pod=claiming(make_pod(), "data"), snapshot=lost)
    assert decision.message.startswith(
        '0/1 nodes are available: persistentvolumeclaim "data" bound to non-existent '
        'persistentvolume "pv-1". '
    )
    # VolumeRestrictions' PreFilter looks every claim up before VolumeBinding's checks them.
    deleting = with_storage(nodes, claim("data", "pv-1", deleting=True), volumes=(volume("pv-1"),))
    decision = schedule(pod=claiming(make_pod(), "data", "gone"), snapshot=deleting)
    assert decision.message.startswith(
        '0/1 nodes are available: persistentvolumeclaim "gone" not found. '
    )


def test_match_fields_in_a_volumes_node_affinity_do_not_restrict(
    *, make_node, make_cluster, make_pod, schedule
):
    # CheckNodeAffinity matches a node made of the labels alone: it has no name to compare.
    on_other_node = (
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]},
    )
    cluster = with_storage(
        make_cluster(make_node("node-1")),
        claim("data", "pv-1"),
        volumes=(volume("pv-1", affinity=on_other_node),),
    )
    assert schedule(pod=claiming(make_pod(), "data"), snapshot=cluster).node == "node-1"
