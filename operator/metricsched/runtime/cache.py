"""The cluster cache: nodes, pods per node, assumed pods, pending pods and policies.

Fed by watch events (already parsed into core.model types), read by the scheduling cycle
as a ``ClusterSnapshot``. Node states are maintained incrementally, so a snapshot costs
nothing per cycle. All methods run on the operator's event loop thread: no locking.

Assumed pods: a pod the cycle placed is counted on its node at once (before the Binding
returns and before the watch reports it bound), so a burst of pods cannot overcommit a
node. The assumption is confirmed by the watch event that shows the pod bound, and
forgotten if the Binding fails.

Holds: when a Binding's answer was lost and the pod reads back unbound, the request may
still be in the API server; the node keeps the pod's resources (a hold) until the watch
shows the pod bound somewhere or deleted, or the hold expires. The pod is double counted
meanwhile: the cache errs on the side of free capacity never counted twice.

Two sources feed pods: kopf (our pending pods) and the informer (every bound pod). A pod
leaving kopf's watch of unassigned pods (``leave_pending``) means it left the pending set,
bound or deleted, never that capacity is free: only the informer's DELETED (or a LIST
that lacks the pod) frees it.

Resource versions: the last one seen per pod and node lets a LIST be applied without
undoing newer watch events. After a LIST, what the cache holds and the LIST lacks is a
ghost (deleted while nobody watched): ``bound_ghosts``, ``pending_ghosts``,
``node_ghosts`` and ``retain`` find and drop them. An assumed pod is a ghost only once the
API has confirmed its Binding (``confirm_bound``) before the LIST was sent: until then an
accepted Binding may hold its capacity.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Mapping

from metricsched.core import (
    columns,
    model,
    node_state,
    parse,
    policy_installs,
    reservation,
    versions,
)


@dataclasses.dataclass(slots=True)
class _Node:
    info: model.NodeInfo
    pods: dict[str, model.PodInfo]  # uid -> pod (bound or assumed)
    recent: collections.deque[float]
    state: model.NodeState | None = None  # rebuilt lazily after a change


class ClusterCache:
    def __init__(self, *, burst_memory_s: float = 600.0) -> None:
        self._nodes: dict[model.NodeName, _Node] = {}
        self._states: dict[model.NodeName, model.NodeState] = {}
        self._dirty: set[model.NodeName] = set()
        self._table = columns.TableKeeper()  # self._states as columns, kept in step
        self._pod_node: dict[str, model.NodeName] = {}  # uid -> node, for bound/assumed pods
        # uid -> pod the API shows bound (or that we assumed, if its Binding may land) to a
        # node we do not know (yet). Never also in _pod_node: see _attach and _detach.
        self._orphans: dict[str, model.PodInfo] = {}
        self._assumed: dict[str, float] = {}  # uid -> time assumed
        # uid -> when (time.monotonic()) the API confirmed our Binding of an assumed pod
        self._confirmed: dict[str, float] = {}
        # assumed pods that left kopf's pending watch (bound, or deleted) meanwhile, and
        # the newest pending copy seen while assumed (what a failed Binding goes back to)
        self._left_pending: set[str] = set()
        self._latest_pending: dict[str, model.PodInfo] = {}
        self.pending: dict[str, model.PodInfo] = {}  # uid -> pending pod that is ours
        # uid -> status.conditions of a pending pod (to skip redundant PodScheduled writes)
        self.pod_conditions: dict[str, tuple[Mapping[str, object], ...]] = {}
        self.policies: dict[model.PolicyKey, model.Policy] = {}
        self.policy_errors: dict[model.PolicyKey, str] = {}
        # Other installs' policies, by namespace then key: only what names them in events.
        self.elsewhere: dict[str, dict[model.PolicyKey, policy_installs.Elsewhere]] = {}
        self.generation = 0  # bumps on any change that can make a pending pod schedulable
        self._burst_memory_s = burst_memory_s
        self._holds: dict[str, tuple[model.NodeName, float]] = {}  # uid -> (node, until)
        self._pod_rv: dict[str, int] = {}  # uid -> last resourceVersion seen
        # uid -> (parse.PodDigest.rest, PodInfo) of the last body parsed of a pod held here:
        # a later body with the same rest is not parsed again (``parsed_pod``)
        self._parsed: dict[str, tuple[int, model.PodInfo]] = {}
        self._node_rv: dict[model.NodeName, int] = {}
        self._tombstones: dict[str, int] = {}  # uid -> resourceVersion of its deletion
        self._node_tombstones: dict[model.NodeName, int] = {}
        self.changed_annotations: set[str] = set()  # drained by the scheduler's queue hints
        # namespace -> labels, from the Namespace watch (None until it first delivers)
        self._namespace_labels: dict[str, Mapping[str, str]] | None = None
        # PersistentVolumeClaims by "namespace/name" and PersistentVolumes by name
        self._claims: dict[str, model.ClaimInfo] = {}
        self._volumes: dict[str, model.VolumeInfo] = {}
        # StorageClasses and CSINodes by name (binding modes; CSI attach limits)
        self._storage_classes: dict[str, model.StorageClassInfo] = {}
        self._csi_nodes: dict[str, model.CSINodeInfo] = {}
        # VolumeAttachments by node and name, and by node as the snapshot hands them out
        self._attachments: dict[str, dict[str, model.VolumeAttachmentInfo]] = {}
        self._attachments_on: dict[str, tuple[model.VolumeAttachmentInfo, ...]] = {}
        self._attachment_node: dict[str, str] = {}  # attachment name -> its node
        # Unbound pods with status.nominatedNodeName (any scheduler's), from their own
        # informer: uid -> pod, and by node as the snapshot hands them to the cycle.
        self._nominated: dict[str, model.PodInfo] = {}
        # kube-scheduler's rules of the API server's version (set at start by the operator)
        self.rules: versions.Rules = versions.DEFAULT
        # DeviceClasses by name (only watched where the rules use them), and the
        # extended resource names they map, worked out once per change
        self._device_classes: dict[str, model.DeviceClassInfo] = {}
        self._device_class_resources: frozenset[str] = frozenset()
        self._nominated_on: dict[model.NodeName, tuple[model.PodInfo, ...]] = {}
        # Rebalancing's target reservations (core.reservation placeholders), by node: kept
        # by runtime.reservations, counted on their node like any pod there.
        self._reserved_on: dict[model.NodeName, tuple[model.PodInfo, ...]] = {}

    # --- nodes -------------------------------------------------------------------------

    def upsert_node(self, info: model.NodeInfo, *, resource_version: str = "") -> bool:
        """Add or update a node; True if the change can make any pending pod schedulable
        (a new node, or new allocatable, labels, taints or cordon: ``generation`` bumps).

        A change of annotations only matters to policies that score by those annotations:
        their keys are gathered in ``changed_annotations`` (the scheduler wakes just those
        policies' pods) and the node's state is rebuilt, but ``generation`` stays. A
        status heartbeat changes none of these: nothing is dirtied or woken."""
        rv = _rv(resource_version)
        if info.name in self._node_tombstones and rv <= self._node_tombstones[info.name]:
            return False  # an old copy (from a LIST) of a node whose deletion we have seen
        self._node_tombstones.pop(info.name, None)
        self._node_rv[info.name] = max(self._node_rv.get(info.name, 0), rv)
        node = self._nodes.get(info.name)
        if node is not None and node.info == info:
            return False
        if (
            node is not None
            and dataclasses.replace(node.info, annotations=info.annotations) == info
        ):
            old, new = node.info.annotations, info.annotations
            self.changed_annotations.update(
                k for k in old.keys() | new.keys() if old.get(k) != new.get(k)
            )
            node.info = info
            self._dirty.add(info.name)
            return False
        if node is None:
            node = _Node(info=info, pods={}, recent=collections.deque())
            self._nodes[info.name] = node
            # Only what is still bound here: an orphan leaves _orphans as soon as its pod
            # is bound elsewhere, forgotten or deleted (_attach, _detach), and a hold is
            # never filed as one, so whatever is left names this node as its nodeName.
            for uid, pod in list(self._orphans.items()):
                if pod.node_name == info.name and uid not in self._pod_node:
                    del self._orphans[uid]
                    node.pods[uid] = pod
                    self._pod_node[uid] = info.name
        else:
            node.info = info
        self._dirty.add(info.name)
        self.generation += 1
        return True

    def remove_node(self, name: model.NodeName, *, resource_version: str = "") -> None:
        if resource_version:
            self._node_tombstones[name] = _rv(resource_version)
        self._node_rv.pop(name, None)
        node = self._nodes.pop(name, None)
        if node is None:
            return
        for uid, (held_on, _) in list(self._holds.items()):
            if held_on == name:  # a hold is room kept on this node: none left to keep
                del self._holds[uid]
        for uid, pod in node.pods.items():
            self._pod_node.pop(uid, None)
            # A pod bound here (or assumed here, its Binding may still land) counts here
            # again if a node of this name comes back; a hold is room on this node only.
            if not uid.endswith(_HOLD_SUFFIX) and not reservation.is_placeholder(uid):
                self._orphans[uid] = pod
        self._reserved_on.pop(name, None)
        self._states.pop(name, None)
        self._table.removed()
        self._dirty.discard(name)
        self.generation += 1

    # --- pods --------------------------------------------------------------------------

    def upsert_pod(
        self,
        pod: model.PodInfo,
        *,
        ours: bool,
        resource_version: str = "",
        digest: int | None = None,
    ) -> None:
        """A pod event. Bound pods count on their node; our unbound pods are pending.
        ``digest``: the ``parse.PodDigest.rest`` of the body ``pod`` was read from."""
        uid = pod.uid
        rv = _rv(resource_version)
        if uid in self._tombstones and rv <= self._tombstones[uid]:
            return  # an old copy (from a LIST) of a pod whose deletion we have seen
        self._pod_rv[uid] = max(self._pod_rv.get(uid, 0), rv)
        if digest is None:
            self._parsed.pop(uid, None)
        else:
            self._parsed[uid] = (digest, pod)
        if pod.node_name and not model.finished(pod.phase):
            if uid in self._nominated:  # bound: counted on its node from now on, once
                self.remove_nominated(uid)
            self.pending.pop(uid, None)
            self.pod_conditions.pop(uid, None)
            self._release_hold(uid)
            previous = self._pod_node.get(uid)
            if previous is not None and previous != pod.node_name:
                self._detach(uid)
                previous = None
            before = self._nodes[previous].pods.get(uid) if previous in self._nodes else None
            if previous is None or (
                before is not None
                and (before.labels != pod.labels or before.requests != pod.requests)
            ):
                # A pod newly on a node (another scheduler's: a pending pod's required
                # affinity may now hold), or one whose labels or requests (an in-place
                # resize) changed, may help a pending pod; our own confirmed Binding not.
                self.generation += 1
            if not pod.bound_at:
                # No PodScheduled time or start yet: keep when we bound it, else now.
                known = before.bound_at if before is not None else 0.0
                pod = dataclasses.replace(pod, bound_at=known or time.time())
            self._settled(uid)  # confirmed (or placed by someone else)
            self._attach(pod, model.NodeName(pod.node_name))
            return
        if pod.node_name:  # terminal: frees its resources
            self.remove_pod(uid)
            return
        if uid in self._assumed:
            # Our Binding is in flight and the watch has not seen it yet: keep the
            # assumption, the pod stays out of the pending set; a failed Binding goes
            # back to this newest copy.
            if ours and not pod.deleting:
                self._latest_pending[uid] = pod
            else:
                self._left_pending.add(uid)
            return
        if ours and not pod.deleting:
            self.pending[uid] = pod
        else:
            self.pending.pop(uid, None)
            self.pod_conditions.pop(uid, None)
            if uid not in self._pod_node and uid not in self._orphans:
                self._parsed.pop(uid, None)  # nothing of it held: nothing to compare with

    def parsed_pod(self, uid: str, digest: int) -> model.PodInfo | None:
        """The pod as parsed from its last body held here, if that body had ``digest``
        (``parse.PodDigest.rest``): a body with the same digest parses the same but for
        the fields ``parse.restamped`` sets."""
        found = self._parsed.get(uid)
        return found[1] if found is not None and found[0] == digest else None

    def keep_bound(self, uid: str, *, node: str, resource_version: str) -> bool:
        """An event of a pod bound to ``node`` that parses as the copy counted there
        already (``parse.stamped_alike``): if the pod is settled there (not assumed,
        held, pending or nominated), only its resourceVersion is recorded (no node state
        rebuilt) and True is returned; else False, and the event takes ``upsert_pod``."""
        if (
            not node
            or self._pod_node.get(uid) != node
            or uid in self._assumed
            or uid in self._holds
            or uid in self.pending
            or uid in self.pod_conditions
            or uid in self._nominated
        ):
            return False
        rv = _rv(resource_version)
        if uid in self._tombstones and rv <= self._tombstones[uid]:
            return True  # an old copy: upsert_pod would ignore it too
        self._pod_rv[uid] = max(self._pod_rv.get(uid, 0), rv)
        return True

    def remove_pod(self, uid: str, *, resource_version: str = "") -> None:
        if resource_version:
            self._tombstones[uid] = _rv(resource_version)
            while len(self._tombstones) > _MAX_TOMBSTONES:
                del self._tombstones[next(iter(self._tombstones))]
        self._pod_rv.pop(uid, None)
        self._parsed.pop(uid, None)
        self._release_hold(uid)
        self.pending.pop(uid, None)
        self.pod_conditions.pop(uid, None)
        self.remove_nominated(uid)
        self._settled(uid)
        self._orphans.pop(uid, None)
        self._detach(uid)

    # --- nominated pods ----------------------------------------------------------------

    def upsert_nominated(self, pod: model.PodInfo) -> None:
        """An unbound pod's nomination (a pod without one, bound, or finished: dropped)."""
        if not pod.nominated_node or pod.node_name or model.finished(pod.phase):
            self.remove_nominated(pod.uid)
            return
        before = self._nominated.get(pod.uid)
        if before is not None and before == pod:
            return
        self.remove_nominated(pod.uid)
        self._nominated[pod.uid] = pod
        node = model.NodeName(pod.nominated_node)
        self._nominated_on[node] = (*self._nominated_on.get(node, ()), pod)

    def remove_nominated(self, uid: str) -> None:
        """A nomination ends: the pod was bound (where it was nominated or elsewhere), its
        nomination cleared, or the pod deleted. The room it held may help a pending pod."""
        pod = self._nominated.pop(uid, None)
        if pod is None:
            return
        node = model.NodeName(pod.nominated_node)
        left = tuple(p for p in self._nominated_on.get(node, ()) if p.uid != uid)
        if left:
            self._nominated_on[node] = left
        else:
            self._nominated_on.pop(node, None)
        self.generation += 1

    @property
    def nominated(self) -> Mapping[model.NodeName, tuple[model.PodInfo, ...]]:
        return self._nominated_on

    def leave_pending(self, uid: str) -> None:
        """The pod left kopf's watch of our unassigned pods: bound (by us or another) or
        deleted. It is no longer pending; whatever it holds on a node stays (the
        informer's events decide that)."""
        self.pending.pop(uid, None)
        self.pod_conditions.pop(uid, None)
        if uid in self._assumed:
            self._left_pending.add(uid)
            self._latest_pending.pop(uid, None)
        elif uid not in self._pod_node and uid not in self._orphans:
            self._pod_rv.pop(uid, None)  # nothing of it held: forget it
            self._parsed.pop(uid, None)

    def confirm_bound(self, uid: str, *, at: float) -> None:
        """The API accepted our Binding of an assumed pod (``at``: ``time.monotonic()``):
        a LIST sent after ``at`` that lacks the pod shows it gone."""
        if uid in self._assumed:
            self._confirmed[uid] = at

    def _settled(self, uid: str) -> None:
        self._assumed.pop(uid, None)
        self._confirmed.pop(uid, None)
        self._left_pending.discard(uid)
        self._latest_pending.pop(uid, None)

    def assume(self, pod: model.PodInfo, node: model.NodeName, *, now: float) -> None:
        self.pending.pop(pod.uid, None)
        self._assumed[pod.uid] = now
        self._attach(dataclasses.replace(pod, node_name=node, bound_at=now), node)
        n = self._nodes.get(node)
        if n is not None:
            n.recent.append(now)
            self._dirty.add(node)

    def forget(self, pod: model.PodInfo) -> None:
        """The Binding failed: release the assumed resources and make the pod pending again,
        as its newest copy (not the one the cycle saw), unless it left the pending watch
        meanwhile (deleted, or bound by someone else: the informer says where)."""
        if pod.uid not in self._assumed:
            return
        left = pod.uid in self._left_pending
        latest = self._latest_pending.get(pod.uid, pod)
        self._settled(pod.uid)
        node = self._pod_node.get(pod.uid)
        self._detach(pod.uid)
        if node is not None and node in self._nodes:
            recent = self._nodes[node].recent
            if recent:
                recent.pop()
        if not left:
            self.pending[pod.uid] = latest

    def hold(self, pod: model.PodInfo, node: model.NodeName, *, until: float) -> None:
        """Keep ``pod``'s resources on ``node`` until ``until`` (a Binding there may still
        land), in addition to wherever the pod goes next."""
        self._release_hold(pod.uid)
        if node not in self._nodes:
            return  # deleted meanwhile: no room left to keep (as remove_node drops holds)
        self._holds[pod.uid] = (node, until)
        # No labels: a hold must not satisfy another pod's affinity to a pod not there.
        placeholder = dataclasses.replace(pod, uid=_hold_uid(pod.uid), node_name=node, labels={})
        self._attach(placeholder, node)

    def correct(self, pod: model.PodInfo, node: model.NodeName, *, now: float) -> None:
        """The API says the pod is bound to ``node`` (a 409, or a read-back): count it
        there until the watch confirms, wherever we had assumed it."""
        if self._pod_node.get(pod.uid) == node and pod.uid not in self._assumed:
            return  # the watch has already shown it there
        self._detach(pod.uid)
        self.pending.pop(pod.uid, None)
        self._assumed[pod.uid] = now
        self._attach(dataclasses.replace(pod, node_name=node, bound_at=pod.bound_at or now), node)

    def reserve(self, placeholder: model.PodInfo) -> bool:
        """Count a reservation's placeholder on its node (``placeholder.node_name``); False
        when the node is not known (nothing to hold)."""
        node = model.NodeName(placeholder.node_name)
        if node not in self._nodes:
            return False
        self.unreserve(placeholder.uid)
        self._attach(placeholder, node)
        self._reserved_on[node] = (*self._reserved_on.get(node, ()), placeholder)
        return True

    def unreserve(self, uid: str) -> None:
        """A reservation ends: its room is free again (pending pods may use it)."""
        node = self._pod_node.get(uid)
        n = self._nodes.get(node) if node is not None else None
        if node is None or n is None or uid not in n.pods:
            return
        self._detach(uid)
        left = tuple(p for p in self._reserved_on.get(node, ()) if p.uid != uid)
        if left:
            self._reserved_on[node] = left
        else:
            self._reserved_on.pop(node, None)
        self.generation += 1

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def holds(self) -> Mapping[str, tuple[model.NodeName, float]]:
        return self._holds

    def _release_hold(self, uid: str) -> None:
        if self._holds.pop(uid, None) is not None:
            self._detach(_hold_uid(uid))

    def expire_holds(self, now: float) -> int:
        expired = [uid for uid, (_, until) in self._holds.items() if until <= now]
        for uid in expired:
            self._release_hold(uid)
        return len(expired)

    def _attach(self, pod: model.PodInfo, node: model.NodeName) -> None:
        n = self._nodes.get(node)
        if n is None:
            self._orphans[pod.uid] = pod
            return
        # Counted on a node we know: any copy kept for a node that was gone is stale.
        self._orphans.pop(pod.uid, None)
        n.pods[pod.uid] = pod
        self._pod_node[pod.uid] = node
        self._dirty.add(node)

    def _detach(self, uid: str) -> None:
        # Wherever the pod was counted, a node we know or one that was gone: no longer.
        self._orphans.pop(uid, None)
        node = self._pod_node.pop(uid, None)
        if node is None:
            return
        n = self._nodes.get(node)
        if n is not None and n.pods.pop(uid, None) is not None:
            self._dirty.add(node)
            self.generation += 1  # freed capacity may help a pending pod

    # --- reconciliation with a LIST ----------------------------------------------------

    def bound_ghosts(self, listed: set[str], *, list_version: str, started: float) -> list[str]:
        """Bound pods the cache holds that a LIST of bound pods taken at ``list_version``
        (sent at ``started``, ``time.monotonic()``) does not have: deleted, or finished,
        while nobody watched. An assumed pod counts only if the API confirmed its Binding
        before the LIST was sent; otherwise no event newer than the LIST may have shown it."""
        version = _rv(list_version)
        known = set(self._pod_node) | set(self._orphans)
        return sorted(
            uid
            for uid in known
            if uid not in listed
            and not uid.endswith(_HOLD_SUFFIX)
            and not reservation.is_placeholder(uid)
            and (
                self._confirmed.get(uid, started) < started
                if uid in self._assumed
                else 0 < self._pod_rv.get(uid, 0) <= version
            )
        )

    def pending_ghosts(self, listed: set[str], *, list_version: str) -> list[str]:
        """``bound_ghosts`` for our pending pods, against a LIST of them."""
        version = _rv(list_version)
        return sorted(
            uid
            for uid in self.pending
            if uid not in listed and 0 < self._pod_rv.get(uid, 0) <= version
        )

    def node_ghosts(
        self, listed: set[model.NodeName], *, list_version: str
    ) -> list[model.NodeName]:
        version = _rv(list_version)
        return sorted(
            name
            for name in self._nodes
            if name not in listed and 0 < self._node_rv.get(name, 0) <= version
        )

    def pod_version(self, uid: str) -> int:
        return self._pod_rv.get(uid, 0)

    def holds_pod_version(self, uid: str, resource_version: str) -> bool:
        """True if the cache holds this pod at ``resource_version`` or later: a copy with
        nothing new (kopf's listing after the operator's own LIST brings every unchanged
        object again). Unknown versions (0) never count as held."""
        rv = _rv(resource_version)
        return 0 < rv <= self._pod_rv.get(uid, 0)

    def holds_node_version(self, name: model.NodeName, resource_version: str) -> bool:
        """``holds_pod_version`` for a node."""
        rv = _rv(resource_version)
        return 0 < rv <= self._node_rv.get(name, 0)

    def node_version(self, name: model.NodeName) -> int:
        return self._node_rv.get(name, 0)

    def retain(self, kind: str, keys: set[str]) -> int:
        """After a LIST of ``kind`` (namespaces, claims, volumes, storage classes, CSI
        nodes, volume attachments): drop what the LIST lacks; how many were dropped."""
        held: dict[str, object]
        remove: Callable[[str], None]
        if kind == "Namespace":
            held, remove = dict(self._namespace_labels or {}), self.remove_namespace
        elif kind == "PersistentVolumeClaim":
            held, remove = dict(self._claims), self._remove_claim_key
        elif kind == "PersistentVolume":
            held, remove = dict(self._volumes), self.remove_volume
        elif kind == "StorageClass":
            held, remove = dict(self._storage_classes), self.remove_storage_class
        elif kind == "CSINode":
            held, remove = dict(self._csi_nodes), self.remove_csi_node
        elif kind == "VolumeAttachment":
            held, remove = dict(self._attachment_node), self.remove_volume_attachment
        elif kind == "DeviceClass":
            held, remove = dict(self._device_classes), self.remove_device_class
        elif kind == "FailedPod":
            return 0  # nothing of them is kept
        elif kind == "NominatedPod":
            held, remove = dict(self._nominated), self.remove_nominated
        else:
            raise ValueError(f"no retain for {kind}")
        gone = [key for key in held if key not in keys]
        for key in gone:
            remove(key)
        if kind == "Namespace" and self._namespace_labels is None:
            self._namespace_labels = {}  # listed: none is a known answer now
        return len(gone)

    # --- policies ----------------------------------------------------------------------

    def upsert_policy(self, policy: model.Policy) -> None:
        self.policies[policy.key] = policy
        self.policy_errors.pop(policy.key, None)
        self.generation += 1

    def reject_policy(self, key: model.PolicyKey, error: str) -> None:
        """An invalid policy: it governs no pod until fixed (its pods get the reason)."""
        self.policies.pop(key, None)
        self.policy_errors[key] = error
        self.generation += 1

    def remove_policy(self, key: model.PolicyKey) -> None:
        self.policies.pop(key, None)
        self.policy_errors.pop(key, None)
        self.generation += 1

    def note_elsewhere(self, key: model.PolicyKey, entry: policy_installs.Elsewhere | None) -> None:
        """Index a policy another install serves (``None``: unreadable, forget it)."""
        self.forget_elsewhere(key)
        if entry is not None:
            self.elsewhere.setdefault(entry.namespace, {})[key] = entry

    def forget_elsewhere(self, key: model.PolicyKey) -> None:
        namespace = key.partition("/")[0]
        entries = self.elsewhere.get(namespace)
        if entries is not None and entries.pop(key, None) is not None and not entries:
            del self.elsewhere[namespace]

    def elsewhere_in(self, namespace: str) -> list[policy_installs.Elsewhere]:
        return list((self.elsewhere.get(namespace) or {}).values())

    # --- namespaces (labels only: namespaceSelector in pod affinity) -------------------

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        if self._namespace_labels is None:
            self._namespace_labels = {}
        if self._namespace_labels.get(name) != labels:
            self._namespace_labels[name] = dict(labels)
            self.generation += 1  # a namespaceSelector may now match

    def remove_namespace(self, name: str) -> None:
        if (
            self._namespace_labels is not None
            and self._namespace_labels.pop(name, None) is not None
        ):
            self.generation += 1

    # --- claims and volumes (VolumeBinding for bound claims) ----------------------------

    def upsert_claim(self, claim: model.ClaimInfo) -> None:
        key = f"{claim.namespace}/{claim.name}"
        if self._claims.get(key) != claim:
            self._claims[key] = claim
            self.generation += 1  # a claim bound: its pods may now be placed

    def remove_claim(self, namespace: str, name: str) -> None:
        self._remove_claim_key(f"{namespace}/{name}")

    def _remove_claim_key(self, key: str) -> None:
        if self._claims.pop(key, None) is not None:
            self.generation += 1

    def upsert_volume(self, volume: model.VolumeInfo) -> None:
        if self._volumes.get(volume.name) != volume:
            self._volumes[volume.name] = volume
            self.generation += 1

    def remove_volume(self, name: str) -> None:
        if self._volumes.pop(name, None) is not None:
            self.generation += 1

    # --- storage classes and CSI nodes (binding modes, NodeVolumeLimits) ----------------

    def upsert_storage_class(self, storage_class: model.StorageClassInfo) -> None:
        if self._storage_classes.get(storage_class.name) != storage_class:
            self._storage_classes[storage_class.name] = storage_class
            self.generation += 1

    def remove_storage_class(self, name: str) -> None:
        if self._storage_classes.pop(name, None) is not None:
            self.generation += 1

    def upsert_csi_node(self, csi_node: model.CSINodeInfo) -> None:
        if self._csi_nodes.get(csi_node.name) != csi_node:
            self._csi_nodes[csi_node.name] = csi_node
            self.generation += 1  # a limit raised: pods over the old one may now fit

    def remove_csi_node(self, name: str) -> None:
        if self._csi_nodes.pop(name, None) is not None:
            self.generation += 1

    def upsert_device_class(self, device_class: model.DeviceClassInfo) -> None:
        if self._device_classes.get(device_class.name) != device_class:
            self._device_classes[device_class.name] = device_class
            self._device_classes_changed()

    def remove_device_class(self, name: str) -> None:
        if self._device_classes.pop(name, None) is not None:
            self._device_classes_changed()

    def _device_classes_changed(self) -> None:
        self._device_class_resources = parse.device_class_resources(self._device_classes.values())
        self.generation += 1  # a mapping gone: a device-plugin node may now be asked

    def upsert_volume_attachment(self, attachment: model.VolumeAttachmentInfo) -> None:
        """A new or changed attachment only takes room: no pending pod is woken."""
        node = self._attachment_node.get(attachment.name)
        if node is not None:
            if self._attachments[node][attachment.name] == attachment:
                return
            self._drop_attachment(node, attachment.name)
        self._attachment_node[attachment.name] = attachment.node_name
        on_node = self._attachments.setdefault(attachment.node_name, {})
        on_node[attachment.name] = attachment
        self._attachments_on[attachment.node_name] = tuple(on_node.values())

    def remove_volume_attachment(self, name: str) -> None:
        node = self._attachment_node.get(name)
        if node is not None:
            self._drop_attachment(node, name)
            self.generation += 1  # a detached volume frees a slot on its node

    def _drop_attachment(self, node: str, name: str) -> None:
        del self._attachment_node[name]
        on_node = self._attachments[node]
        del on_node[name]
        if on_node:
            self._attachments_on[node] = tuple(on_node.values())
        else:
            del self._attachments[node], self._attachments_on[node]

    # --- reading -----------------------------------------------------------------------

    def nodes(self) -> list[model.NodeInfo]:
        return [n.info for n in self._nodes.values()]

    def snapshot(self, *, now: float | None = None) -> model.ClusterSnapshot:
        """The cluster as the cycle sees it; only nodes changed since last time are rebuilt."""
        now = time.time() if now is None else now
        horizon = now - self._burst_memory_s
        for name in self._dirty:
            n = self._nodes.get(name)
            if n is None:
                continue
            while n.recent and n.recent[0] < horizon:
                n.recent.popleft()
            state = self._states[name] = _build_state(n)
            self._table.changed(state)
        self._dirty.clear()
        return model.ClusterSnapshot(
            nodes=self._states,
            namespace_labels=self._namespace_labels,
            claims=self._claims,
            volumes=self._volumes,
            storage_classes=self._storage_classes,
            csi_nodes=self._csi_nodes,
            volume_attachments=self._attachments_on,
            nodes_version=self._table.version,
            nominated=dict(self._nominated_on),
            rules=self.rules,
            device_class_resources=self._device_class_resources,
            reserved=dict(self._reserved_on),
        )

    def table(self, snapshot: model.ClusterSnapshot) -> columns.NodeTable:
        """The node table to hand the cycle beside ``snapshot``: the one kept in step with
        the nodes while ``snapshot`` is their latest state, else one built for it."""
        return columns.table_of(snapshot, self._table.table(self._states))


_HOLD_SUFFIX = "/hold"
_MAX_TOMBSTONES = 100_000


def _hold_uid(uid: str) -> str:
    return uid + _HOLD_SUFFIX


def _rv(resource_version: str) -> int:
    """resourceVersions are opaque strings to clients; kube-apiserver's are etcd revisions,
    which only grow. Anything else compares as 0 (never treated as newer or older)."""
    try:
        return int(resource_version)
    except (TypeError, ValueError):
        return 0


def _build_state(node: _Node) -> model.NodeState:
    return node_state.build(node.info, node.pods.values(), recent_binds=node.recent)


def resource_version(meta: Mapping[str, object]) -> int:
    """An object's metadata.resourceVersion as the cache compares it."""
    return _rv(str(meta.get("resourceVersion") or ""))
