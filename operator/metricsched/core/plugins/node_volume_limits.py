"""NodeVolumeLimits for CSI volumes: a node takes no more volumes of a driver than it can attach.

Contract (kube-scheduler's CSILimits): a node whose CSINode gives a driver an attach limit
(``spec.drivers[].allocatable.count``) is infeasible for a pod when the unique volumes of
that driver used by the pods already on the node plus the pod's volumes new to the node
would exceed the limit. A volume is unique by driver and volume handle, so a volume the
node already uses is not counted twice. A node without a CSINode, or without a count for
the driver, has no limit.

The pod's volumes are read once per cycle (``pre_filter``, into ``PodCSIVolumes``); the
volumes of the pods on each node are counted per node (``filter_node``). As in
kube-scheduler, an existing pod's claim that is not bound yet counts as one volume of its
class's provisioner, and a VolumeAttachment of the node for a CSI volume no pod there uses
(a volume still detaching) counts too; such a volume is counted even when the pod brings
it (kube-scheduler subtracts only the volumes of pods from the pod's new ones). Not
counted (kube-scheduler counts them): in-tree volumes translated to CSI (CSI migration).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from typing import Final

from metricsched.core import columns, framework, model
from metricsched.core.plugins import volume_binding

NAME: Final = "NodeVolumeLimits"
REASON_MAX_VOLUME_COUNT: Final = "node(s) exceed max volume count"

# (driver, volume handle) of a bound CSI volume; (provisioner, "namespace/claim") with
# ``provisional`` set for a claim not bound yet (it can never equal a real handle).
_VolumeKey = tuple[str, str, bool]


@dataclasses.dataclass(frozen=True, slots=True)
class PodCSIVolumes:
    """What PreFilter found once per cycle: the pod's CSI volumes (key -> driver)."""

    new_volumes: Mapping[_VolumeKey, str]


def pre_filter(volumes: tuple[model.VolumeInfo, ...]) -> PodCSIVolumes | None:
    """The pod's CSI volumes, from its bound ``volumes`` (VolumeBinding's PreFilter has
    refused every pod with an unbound claim); None: none, the filter is skipped."""
    new = {
        (volume.csi_driver, volume.csi_handle, False): volume.csi_driver
        for volume in volumes
        if volume.csi_driver and volume.csi_handle
    }
    return PodCSIVolumes(new_volumes=new) if new else None


class NodeVolumeLimits:
    """CSI NodeVolumeLimits: the node's CSINode limit per driver is not exceeded."""

    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        # VolumeRestrictions runs before this plugin: its refusal (a claim not found) is
        # given here, where kube-scheduler gives it.
        found = volume_binding.pod_volumes(cycle)
        if found.refusal:
            return framework.refuse(found.refusal)
        state = pre_filter(found.volumes)
        if state is None:
            return framework.SKIP
        cycle.data[NAME] = state
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        state = cycle.data[NAME]
        assert isinstance(state, PodCSIVolumes)
        snapshot = cycle.snapshot
        csi_nodes = snapshot.csi_nodes or {}

        def check(node: model.NodeState) -> str:
            csi_node = csi_nodes.get(node.node.name)
            if csi_node is None or not csi_node.limits:
                return ""  # no CSINode, or no driver with a limit: no limit
            return filter_node(state=state, node=node, limits=csi_node.limits, snapshot=snapshot)

        return framework.scalar_filter(rows, cycle.table, check)


def filter_node(
    *,
    state: PodCSIVolumes,
    node: model.NodeState,
    limits: Mapping[str, int],
    snapshot: model.ClusterSnapshot,
) -> str:
    """Why ``node`` cannot take the pod's volumes ("" when it can)."""
    attached = attached_volumes(node.pods, snapshot)
    new = collections.Counter(
        driver for key, driver in state.new_volumes.items() if key not in attached
    )
    in_use = collections.Counter(attached.values())
    in_use.update(detaching_volumes(node.node.name, attached, snapshot).values())
    for driver, count in new.items():
        limit = limits.get(driver)
        if limit is not None and in_use[driver] + count > limit:
            return REASON_MAX_VOLUME_COUNT
    return ""


def attached_volumes(
    pods: tuple[model.PodInfo, ...], snapshot: model.ClusterSnapshot
) -> dict[_VolumeKey, str]:
    """The unique CSI volumes (key -> driver) the ``pods`` on a node use through their
    claims; a claim or volume that cannot be found is not counted."""
    claims = snapshot.claims or {}
    volumes = snapshot.volumes or {}
    classes = snapshot.storage_classes or {}
    found: dict[_VolumeKey, str] = {}
    for pod in pods:
        for name in pod.volume_claims:
            claim = claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                continue
            volume = volumes.get(claim.volume_name) if claim.volume_name else None
            if volume is not None:
                if volume.csi_driver and volume.csi_handle:
                    found[(volume.csi_driver, volume.csi_handle, False)] = volume.csi_driver
                continue
            # Not bound yet, or its volume not found: one volume of the class's provisioner.
            storage_class = classes.get(claim.storage_class) if claim.storage_class else None
            if storage_class is not None and storage_class.provisioner:
                key = (storage_class.provisioner, f"{claim.namespace}/{claim.name}", True)
                found[key] = storage_class.provisioner
    return found


def detaching_volumes(
    node: str, attached: Mapping[_VolumeKey, str], snapshot: model.ClusterSnapshot
) -> dict[_VolumeKey, str]:
    """The CSI volumes (key -> driver) VolumeAttachments hold on ``node`` that no pod there
    uses (``attached``); one without an attacher, a volume or a CSI volume is not counted."""
    volumes = snapshot.volumes or {}
    found: dict[_VolumeKey, str] = {}
    for attachment in (snapshot.volume_attachments or {}).get(node, ()):
        volume = volumes.get(attachment.volume_name) if attachment.volume_name else None
        if not attachment.attacher or volume is None or not volume.csi_driver:
            continue
        key = (attachment.attacher, volume.csi_handle, False)
        if key not in attached:
            found[key] = attachment.attacher
    return found


PLUGIN: Final[framework.FilterPlugin] = NodeVolumeLimits()
