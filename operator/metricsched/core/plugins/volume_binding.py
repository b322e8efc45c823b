"""VolumeBinding and VolumeZone for bound claims; unbound claims are refused, never bound.

kube-scheduler's VolumeBinding places a pod whose PersistentVolumeClaims are bound only on
nodes that match each PersistentVolume's node affinity, and binds or provisions unbound
claims (WaitForFirstConsumer) for the node it picks; VolumeZone keeps a pod off nodes
outside its volumes' zone and region labels. metricsched does the first and the zones, not
the binding or provisioning: a pod with an unbound claim is refused with a message that
says so (and retried when the claim changes), so a claim is never left behind its pod.
NodeVolumeLimits (CSI attach limits) is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from metricsched.core import filters, model

NAME: Final = "VolumeBinding"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_ZONE_CONFLICT: Final = "node(s) had no available volume zone"  # VolumeZone's
# PreFilter: an unbound claim the PV controller binds (no StorageClass, or pre-bound).
REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"

# VolumeZone's topology labels, and the GA label a beta one is also matched against.
_TOPOLOGY_LABELS: Final[Mapping[str, str]] = {
    "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region": "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


def bound_volumes(
    pod: model.PodInfo, snapshot: model.ClusterSnapshot
) -> tuple[tuple[model.VolumeInfo, ...], str]:
    """The PersistentVolumes of ``pod``'s claims, or "" volumes and the PreFilter reason that
    rules out every node (a claim missing, lost, being deleted or unbound, a volume missing),
    in kube-scheduler's order: every claim is looked up before any is found unbound."""
    claims = snapshot.claims or {}
    volumes = snapshot.volumes or {}
    found: list[model.VolumeInfo] = []
    for name in pod.volume_claims:  # VolumeRestrictions' PreFilter looks them all up first
        if f"{pod.namespace}/{name}" not in claims:
            return (), f'persistentvolumeclaim "{name}" not found'
    for name in pod.volume_claims:
        claim = claims[f"{pod.namespace}/{name}"]
        if claim.lost:
            return (), (
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
        if claim.deleting:
            return (), f'persistentvolumeclaim "{name}" is being deleted'
    unbound = [
        claim
        for claim in (claims[f"{pod.namespace}/{name}"] for name in pod.volume_claims)
        if not claim.volume_name or claim.prebound
    ]
    if any(claim.prebound or not claim.storage_class for claim in unbound):
        return (), REASON_UNBOUND_IMMEDIATE  # the PV controller binds it, not a scheduler
    if unbound:  # a StorageClass's claim, to be bound for the node chosen (WaitForFirstConsumer)
        name = unbound[0].name
        return (), (
            f'persistentvolumeclaim "{name}" is not bound: metricsched places pods whose '
            "claims are bound and does not bind or provision claims (WaitForFirstConsumer); "
            "the pod waits for the claim to be bound, or set spec.schedulerName to "
            "default-scheduler"
        )
    for name in pod.volume_claims:
        claim = claims[f"{pod.namespace}/{name}"]
        volume = volumes.get(claim.volume_name)
        if volume is None:
            return (), f'persistentvolume "{claim.volume_name}" not found'
        found.append(volume)
    return tuple(found), ""


# Filters kube-scheduler runs after VolumeBinding and VolumeZone: a node they reject is
# reported with the volume reason instead when that fails too (the first failure decides).
_LATER_REASONS: Final = frozenset(
    {
        filters.REASON_SPREAD,
        filters.REASON_SPREAD_MISSING_LABEL,
        filters.REASON_POD_AFFINITY,
        filters.REASON_POD_ANTI_AFFINITY,
        filters.REASON_EXISTING_ANTI_AFFINITY,
    }
)


def run_filter(
    *,
    volumes: tuple[model.VolumeInfo, ...],
    snapshot: model.ClusterSnapshot,
    reasons: Mapping[model.NodeName, tuple[str, ...]],
) -> dict[model.NodeName, tuple[str, ...]]:
    """``reasons`` (from ``filters.run_filters``) with the volume filters in their place."""
    merged = dict(reasons)
    for name, state in snapshot.nodes.items():
        found = merged.get(name, ())
        if found and not _LATER_REASONS.issuperset(found):
            continue
        if reason := filter_node(volumes, state.node):
            merged[name] = (reason,)
    return merged


def filter_node(volumes: tuple[model.VolumeInfo, ...], node: model.NodeInfo) -> str:
    """Why ``node`` cannot take a pod with ``volumes`` ("" when it can)."""
    for volume in volumes:
        if volume.node_affinity is not None and not filters.matches_node_selector_terms(
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
