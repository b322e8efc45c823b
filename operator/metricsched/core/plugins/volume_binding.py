"""VolumeBinding and VolumeZone for bound claims; unbound claims are refused, never bound.

kube-scheduler's VolumeBinding places a pod whose PersistentVolumeClaims are bound only on
nodes that match each PersistentVolume's node affinity; an unbound claim of an Immediate
class (or of no class, or of a class that does not exist) makes the pod unschedulable
until the PV controller binds it; an unbound claim of a WaitForFirstConsumer class is
bound or provisioned for the node the scheduler picks. VolumeZone keeps a pod off nodes
outside its volumes' zone and region labels. metricsched does all of that except the
binding and provisioning: a pod with an unbound WaitForFirstConsumer claim is refused with
a message that says so and what to do (and retried when the claim changes), so a claim is
never left behind its pod. Why metricsched does not take part in the selected-node
handshake: README, "Volumes". NodeVolumeLimits is ``core.plugins.node_volume_limits``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Final

from metricsched.core import columns, framework, model, selectors

NAME: Final = "VolumeBinding"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_ZONE_CONFLICT: Final = "node(s) had no available volume zone"  # VolumeZone's
# PreFilter: an unbound claim the PV controller binds (no or an Immediate StorageClass, or
# pre-bound).
REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"

# VolumeZone's topology labels, and the GA label a beta one is also matched against.
_TOPOLOGY_LABELS: Final[Mapping[str, str]] = {
    "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region": "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


class PodVolumes(typing.NamedTuple):
    """What VolumeBinding's (and VolumeZone's) PreFilter found for a pod."""

    volumes: tuple[model.VolumeInfo, ...]  # of its claims, all bound
    refusal: str  # the reason that rules out every node; "" when none


def bound_volumes(pod: model.PodInfo, snapshot: model.ClusterSnapshot) -> PodVolumes:
    """The PersistentVolumes of ``pod``'s claims, or none and the PreFilter reason that rules
    out every node."""
    claims = snapshot.claims or {}
    volumes = snapshot.volumes or {}
    found: list[model.ClaimInfo] = []
    for name in pod.volume_claims:  # VolumeRestrictions' PreFilter looks them all up first
        if name not in pod.ephemeral_claims and f"{pod.namespace}/{name}" not in claims:
            return PodVolumes((), f'persistentvolumeclaim "{name}" not found')
    # kube-scheduler checks every claim for existence and deletion first (podHasPVCs) ...
    for name in pod.volume_claims:
        claim = claims.get(f"{pod.namespace}/{name}")
        ephemeral = name in pod.ephemeral_claims
        if claim is None and ephemeral:  # normal just after the pod is created
            return PodVolumes(
                (),
                "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                f'"{name}"',
            )
        if claim is None:
            return PodVolumes((), f'persistentvolumeclaim "{name}" not found')
        if claim.lost:
            return PodVolumes(
                (),
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"',
            )
        if claim.deleting:
            return PodVolumes((), f'persistentvolumeclaim "{name}" is being deleted')
        if ephemeral and claim.controller_uid != pod.uid:
            return PodVolumes(
                (),
                f"PVC {pod.namespace}/{name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)",
            )
        found.append(claim)
    # ... then sorts them into bound, unbound Immediate and unbound WaitForFirstConsumer.
    unbound = [claim for claim in found if not is_bound(claim)]
    if any(claim.volume_name or not waits_for_consumer(claim, snapshot) for claim in unbound):
        return PodVolumes((), REASON_UNBOUND_IMMEDIATE)  # pre-bound counts as Immediate
    if unbound:
        return PodVolumes((), wait_for_first_consumer_message(unbound[0]))
    bound: list[model.VolumeInfo] = []
    for claim in found:
        volume = volumes.get(claim.volume_name)
        if volume is None:  # VolumeZone's PreFilter says so
            return PodVolumes((), f'persistentvolume "{claim.volume_name}" not found')
        bound.append(volume)
    return PodVolumes(tuple(bound), "")


def is_bound(claim: model.ClaimInfo) -> bool:
    """Bound as kube-scheduler counts it: a volume named and the PV controller done."""
    return bool(claim.volume_name) and claim.bind_completed


def waits_for_consumer(claim: model.ClaimInfo, snapshot: model.ClusterSnapshot) -> bool:
    """Its class is WaitForFirstConsumer (no class, or a class not found: Immediate)."""
    storage_class = (snapshot.storage_classes or {}).get(claim.storage_class)
    return bool(claim.storage_class) and bool(
        storage_class and storage_class.wait_for_first_consumer
    )


def wait_for_first_consumer_message(claim: model.ClaimInfo) -> str:
    """Why a pod with an unbound WaitForFirstConsumer claim is not placed, and what to do."""
    return (
        f'persistentvolumeclaim "{claim.name}" is not bound: metricsched places pods whose '
        "claims are bound and does not bind or provision claims (its StorageClass "
        f'"{claim.storage_class}" is WaitForFirstConsumer: the scheduler that places the pod '
        "must pick the node the volume is provisioned or bound for); bind the claim first "
        "(a PersistentVolume with its claimRef, or a StorageClass with volumeBindingMode "
        "Immediate), or set spec.schedulerName to default-scheduler"
    )


def pod_volumes(cycle: framework.CycleState) -> PodVolumes:
    """``bound_volumes`` for the cycle's pod, found once per cycle (NodeVolumeLimits, which
    runs first, reads them too)."""
    found = cycle.data.get(_VOLUMES)
    if not isinstance(found, PodVolumes):
        found = cycle.data[_VOLUMES] = bound_volumes(cycle.pod, cycle.snapshot)
    return found


_VOLUMES: Final = "PodVolumes"


class VolumeBinding:
    """VolumeRestrictions' and VolumeBinding's PreFilter (claims found, bound), then
    VolumeBinding's and VolumeZone's Filter (the volumes' node affinity and zones)."""

    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        found = pod_volumes(cycle)
        if found.refusal:
            return framework.refuse(found.refusal)
        return framework.PASS if found.volumes else framework.SKIP

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        volumes = pod_volumes(cycle).volumes
        return framework.scalar_filter(
            rows, cycle.table, lambda state: filter_node(volumes, state.node)
        )


def filter_node(volumes: tuple[model.VolumeInfo, ...], node: model.NodeInfo) -> str:
    """Why ``node`` cannot take a pod with ``volumes`` ("" when it can)."""
    for volume in volumes:
        if volume.node_affinity is not None and not selectors.matches_node_selector_terms(
            volume.node_affinity, node.labels
        ):
            return REASON_NODE_CONFLICT
    if not any(label in node.labels for label in _TOPOLOGY_LABELS):
        return ""  # a node without zone labels: a single-zone cluster
    for volume in volumes:
        for key, value in volume.zone_labels.items():
            have = node.labels.get(key, node.labels.get(_TOPOLOGY_LABELS[key]))
            if have is None or have not in value.split("__"):
                return REASON_ZONE_CONFLICT
    return ""


PLUGIN: Final[framework.FilterPlugin] = VolumeBinding()
