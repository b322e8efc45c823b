"""Watch events → cluster cache and queue (thin): the translation of every kind, no kopf.

kopf (``runtime.kopf_source``) hands it our unassigned pods (``on_pending_pod``) and the
SchedulingPolicies (``on_policy``). The rest of the cluster's state (bound pods, nodes,
namespaces, claims, volumes, storage classes, CSI nodes, volume attachments) comes from
the lean informer (``runtime.informers``), through the same translation here:
``on_bound_pod``, ``on_node`` and the others.

A pod that leaves kopf's filtered watch arrives as DELETED, carrying the unbound object at
the bind's resourceVersion: it left the pending set (``on_pending_pod``), which never
frees capacity; only the informer's DELETED of a bound pod does.

After kopf (re-)lists (at start, after a 410 Gone, after a restart), pending pods and
policies deleted while nobody watched got no DELETED event: ``relisted`` tells the
reconciler, which compares them with its own LIST. ``consistent`` is the informer's: clear
until every kind has been listed, and from a re-list until it is applied; the scheduler
decides nothing meanwhile (a node deleted in the gap must not receive a Binding).

A policy event goes to its lifecycle's owner (``runtime.policies``), and so does a gap:
the policies then wait for a LIST sent after it (``Policies.confirmed``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from metricsched.config import Config
from metricsched.core import kubelet_rejection, model, parse
from metricsched.edges import events, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import policies as policies_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import status as status_mod

_Parsed = TypeVar("_Parsed")

logger = logging.getLogger("metricsched.watches")  # the name its lines have always had

GROUP, VERSION, PLURAL = status_mod.GROUP, status_mod.VERSION, status_mod.PLURAL
# Unfinished pods only (model.TERMINAL_PHASES): a pod that finishes leaves the watch as
# DELETED, which frees what it held.
POD_FIELD_SELECTOR = ",".join(f"status.phase!={phase}" for phase in model.TERMINAL_PHASES)
PENDING_FIELD_SELECTOR = "spec.nodeName=," + POD_FIELD_SELECTOR
BOUND_FIELD_SELECTOR = "spec.nodeName!=," + POD_FIELD_SELECTOR
NOMINATED_FIELD_SELECTOR = "spec.nodeName=,status.nominatedNodeName!=," + POD_FIELD_SELECTOR
# Bound pods that failed: where a kubelet's admission rejection shows. (A pod leaving the
# bound-pod watch arrives there as DELETED with its last matching copy, still Running.)
FAILED_FIELD_SELECTOR = "spec.nodeName!=,status.phase=Failed"


def pending_selector(scheduler_names: frozenset[str]) -> str:
    """kopf's field selector of our unassigned pods: by scheduler name too when there is
    one (field selectors cannot say "one of"; with several, ``on_pending_pod`` filters)."""
    if len(scheduler_names) == 1:
        return f"{PENDING_FIELD_SELECTOR},spec.schedulerName={next(iter(scheduler_names))}"
    return PENDING_FIELD_SELECTOR


_MAX_REJECTIONS_REMEMBERED = 10_000  # pod uids already reported (a copy may come twice)


class Ingest:
    """The one sink of every watch event, kopf's and the informers': one handler per kind
    translates its object into the cache and the queue (see the module docstring)."""

    def __init__(
        self,
        *,
        config: Config,
        cache: cache_mod.ClusterCache,
        queue: queue_mod.SchedulingQueue,
        policies: policies_mod.Policies,
        metrics: observe.Metrics,
        record: Callable[..., None],
        on_pod_seen: Callable[[model.PodInfo, Mapping[str, Any]], None] | None = None,
        gates: gates_mod.Gates | None = None,
    ) -> None:
        self.config = config
        self.cache = cache
        self.queue = queue
        self.policies = policies  # the policies' lifecycle (runtime.policies)
        self.metrics = metrics
        self._record = record
        self._on_pod_seen = on_pod_seen  # shadow mode's hook (runtime/shadow.py)
        # Kubelet rejections are reported by the replica that leads (no gates: always),
        # so that standbys neither count them again nor post the Event again.
        self._gates = gates
        self._rejections_seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        # --namespace narrows which pods are scheduled and which policies apply; pods of
        # all namespaces are still watched: they all take capacity on the same nodes.
        self._namespaces = frozenset(config.namespaces)
        self.relisted = asyncio.Event()  # kopf listed pending pods or policies (again)
        self.clock: Callable[[], float] = time.monotonic  # when a LIST was sent (reconcile)
        # An event was handled since kopf (re)started (runtime.kopf_source clears it).
        self.delivering = asyncio.Event()

    # --- watch events ------------------------------------------------------------------

    def on_pending_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """kopf's watch of our unassigned pods. DELETED: the pod left it (bound, or
        deleted); what it holds on a node is the informer's to say."""
        self._seen(event_type)
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self.cache.leave_pending(uid)
            self.queue.done(uid)
            return
        if (body.get("spec") or {}).get("nodeName"):
            return  # not kopf's any more (a pod that was bound is the informer's)
        self._on_pod(body)

    def on_bound_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """The informer's watch of bound, unfinished pods: DELETED (deleted, finished, or
        listed no more) frees what the pod held."""
        self.delivering.set()
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self.cache.remove_pod(uid, resource_version=str(meta.get("resourceVersion") or ""))
            self.queue.done(uid)
            return
        self._on_pod(body)

    def on_failed_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """The informer's watch of bound pods that failed: a pod entering it (ADDED, as it
        goes Failed) may be one of ours that the kubelet rejected. What a LIST finds
        failed already is not reported (the informer passes no LIST to this handler), nor
        a change to a pod that had failed before (MODIFIED: a deletion under way...)."""
        self.delivering.set()
        if event_type == "ADDED":
            self._kubelet_rejection(body)

    def _kubelet_rejection(self, body: Mapping[str, Any]) -> None:
        """A pod this scheduler bound that the kubelet refused at admission: counted by
        node and reason, and a Warning Event on the pod names the likely race."""
        spec = body.get("spec") or {}
        meta = body.get("metadata") or {}
        scheduler = spec.get("schedulerName")
        if scheduler not in self.config.scheduler_names or not parse.placed_by_us(body):
            return  # another scheduler's bind, or a pod created with its nodeName set
        if self._namespaces and meta.get("namespace") not in self._namespaces:
            return
        if self._gates is not None and not self._gates.leading.is_set():
            return
        try:
            rejection = parse.kubelet_rejection_from_body(body)
        except parse.ParseError as e:
            self.skipped("Pod", f"{meta.get('namespace', '')}/{meta.get('name', '')}", str(e))
            return
        if rejection is None or rejection.uid in self._rejections_seen:
            return
        self._rejections_seen[rejection.uid] = None
        if len(self._rejections_seen) > _MAX_REJECTIONS_REMEMBERED:
            self._rejections_seen.popitem(last=False)
        self.metrics.kubelet_rejections.labels(
            node=rejection.node, reason=kubelet_rejection.metric_reason(rejection.reason)
        ).inc()
        logger.warning(
            "the kubelet on %s rejected %s/%s, which this scheduler bound: %s",
            rejection.node,
            rejection.namespace,
            rejection.name,
            rejection.reason,
        )
        self._record(
            events.ObjectRef.pod(
                namespace=rejection.namespace, name=rejection.name, uid=rejection.uid
            ),
            event_type="Warning",
            reason="RejectedByKubelet",
            action="Binding",
            message=kubelet_rejection.event_message(rejection, scheduler=str(scheduler)),
        )

    def on_nominated_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """The informer's watch of unbound pods with a nominated node (any scheduler's):
        DELETED (bound, nomination cleared, finished or deleted) ends the nomination."""
        self.delivering.set()
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self.cache.remove_nominated(uid)
            return
        try:
            pod = parse.pod_from_body(body, rules=self.cache.rules)
        except parse.ParseError as e:
            self.skipped("Pod", f"{meta.get('namespace', '')}/{meta.get('name', '')}", str(e))
            self.cache.remove_nominated(uid)
            return
        self.cache.upsert_nominated(pod)

    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A pod event from either watch, routed by whether the pod is bound (tests and
        tools that replay a single stream)."""
        if (body.get("spec") or {}).get("nodeName"):
            self.on_bound_pod(event_type, body)
        else:
            self.on_pending_pod(event_type, body)

    def _on_pod(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        version = str(meta.get("resourceVersion") or "")
        if self.cache.holds_pod_version(uid, version):
            return  # a copy the cache already holds, or an older one (kopf's listing)
        spec = body.get("spec") or {}
        ours = spec.get("schedulerName") in self.config.scheduler_names and (
            not self._namespaces or meta.get("namespace") in self._namespaces
        )
        # Nothing new the cycle reads (a status-only update, a resourceVersion bump, our
        # own bind): not parsed again, and a pod counted on its node already is left as
        # it is, with only its resourceVersion recorded.
        digest = parse.pod_digest(body)
        known = self.cache.parsed_pod(uid, digest.rest) if digest is not None else None
        if known is not None and digest is not None:
            if parse.stamped_alike(known, digest) and self.cache.keep_bound(
                uid, node=digest.node_name, resource_version=version
            ):
                if self._on_pod_seen is not None and not ours:
                    self._on_pod_seen(known, body)
                self.queue.done(uid)
                return
            self._upsert_pod(body, parse.restamped(known, digest), ours=ours, digest=digest)
            return
        try:
            pod = parse.pod_from_body(body, rules=self.cache.rules)
        except parse.ParseError as e:
            self.skipped("Pod", f"{meta.get('namespace', '')}/{meta.get('name', '')}", str(e))
            if ours and not spec.get("nodeName"):
                # A pod we cannot read is reported, not dropped: it stays Pending with a reason.
                self._record(
                    events.ObjectRef.pod(
                        namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid
                    ),
                    event_type="Warning",
                    reason="FailedScheduling",
                    action="Scheduling",
                    message=f"metricsched cannot read this pod's spec: {e}",
                )
            return
        self._upsert_pod(body, pod, ours=ours, digest=digest)

    def _upsert_pod(
        self,
        body: Mapping[str, Any],
        pod: model.PodInfo,
        *,
        ours: bool,
        digest: parse.PodDigest | None,
    ) -> None:
        uid = pod.uid
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if self._on_pod_seen is not None and not ours:
            self._on_pod_seen(pod, body)
        before = self.cache.pending.get(uid)
        self.cache.upsert_pod(
            pod,
            ours=ours,
            resource_version=version,
            digest=digest.rest if digest is not None else None,
        )
        if uid in self.cache.pending:
            self.cache.pod_conditions[uid] = tuple(
                (body.get("status") or {}).get("conditions") or ()
            )
            if before is not None and before != pod:
                self.queue.update(uid, now=time.monotonic())  # e.g. a toleration added
            else:
                self.queue.add(uid)
        else:
            self.queue.done(uid)

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.delivering.set()
        meta = body.get("metadata") or {}
        name = model.NodeName(str(meta.get("name", "")))
        version = str(meta.get("resourceVersion") or "")
        if event_type == "DELETED":
            self.cache.remove_node(name, resource_version=version)
            return
        if self.cache.holds_node_version(name, version):
            return  # a copy the cache already holds, or an older one (kopf's listing)
        try:
            self.cache.upsert_node(parse.node_from_body(body), resource_version=version)
        except parse.ParseError as e:
            self.skipped("Node", name, str(e))

    def on_namespace(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Namespace labels only, for namespaceSelector in pod (anti-)affinity."""
        self.delivering.set()
        meta = body.get("metadata") or {}
        name = str(meta.get("name", ""))
        if event_type == "DELETED":
            self.cache.remove_namespace(name)
            return
        labels = meta.get("labels") or {}
        if isinstance(labels, Mapping):
            self.cache.upsert_namespace(name, {str(k): str(v) for k, v in labels.items()})

    def on_claim(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """PersistentVolumeClaims: which volume each is bound to (VolumeBinding)."""
        self._on_object(
            "PersistentVolumeClaim",
            event_type,
            body,
            read=parse.claim_from_body,
            upsert=self.cache.upsert_claim,
            remove=lambda meta: self.cache.remove_claim(
                str(meta.get("namespace", "")), str(meta.get("name", ""))
            ),
        )

    def on_volume(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """PersistentVolumes: node affinity and zone labels (VolumeBinding, VolumeZone)."""
        self._on_object(
            "PersistentVolume",
            event_type,
            body,
            read=parse.volume_from_body,
            upsert=self.cache.upsert_volume,
            remove=lambda meta: self.cache.remove_volume(str(meta.get("name", ""))),
        )

    def on_storage_class(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """StorageClasses: binding mode (VolumeBinding) and provisioner (NodeVolumeLimits)."""
        self._on_object(
            "StorageClass",
            event_type,
            body,
            read=parse.storage_class_from_body,
            upsert=self.cache.upsert_storage_class,
            remove=lambda meta: self.cache.remove_storage_class(str(meta.get("name", ""))),
        )

    def on_csi_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """CSINodes: each driver's attach limit on the node (NodeVolumeLimits)."""
        self._on_object(
            "CSINode",
            event_type,
            body,
            read=parse.csi_node_from_body,
            upsert=self.cache.upsert_csi_node,
            remove=lambda meta: self.cache.remove_csi_node(str(meta.get("name", ""))),
        )

    def on_volume_attachment(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """VolumeAttachments: volumes attached to each node (NodeVolumeLimits)."""
        self._on_object(
            "VolumeAttachment",
            event_type,
            body,
            read=parse.volume_attachment_from_body,
            upsert=self.cache.upsert_volume_attachment,
            remove=lambda meta: self.cache.remove_volume_attachment(str(meta.get("name", ""))),
        )

    def on_device_class(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """DeviceClasses: the extended resources DRA serves (NodeResourcesFit, v1.36+)."""
        self._on_object(
            "DeviceClass",
            event_type,
            body,
            read=parse.device_class_from_body,
            upsert=self.cache.upsert_device_class,
            remove=lambda meta: self.cache.remove_device_class(str(meta.get("name", ""))),
        )

    # --- LISTs: what the cache holds and a LIST lacks ---------------------------------------

    def listed(self, kind: str, keys: set[str], *, version: str, started: float) -> int:
        """An informer's LIST of ``kind`` (``keys``, at ``version``, sent at monotonic
        ``started``): what the cache holds of that kind and the LIST lacks was deleted
        while nobody watched and is removed. Returns how many."""
        cache = self.cache
        if kind == "Node":
            names = {model.NodeName(k) for k in keys}
            ghosts = cache.node_ghosts(names, list_version=version)
            for name in ghosts:
                cache.remove_node(name, resource_version=version)
            return len(ghosts)
        if kind == "Pod":
            uids = cache.bound_ghosts(keys, list_version=version, started=started)
            for uid in uids:
                cache.remove_pod(uid, resource_version=version)
            return len(uids)
        return cache.retain(kind, keys)

    def pending_listed(self, uids: set[str], *, version: str) -> int:
        """A LIST of our unassigned pods (``uids``, at ``version``): a pod pending here
        that the LIST lacks left the pending set while kopf did not watch. Returns how
        many."""
        ghosts = self.cache.pending_ghosts(uids, list_version=version)
        for uid in ghosts:
            self.cache.leave_pending(uid)
            self.queue.done(uid)
        return len(ghosts)

    def _on_object(
        self,
        kind: str,
        event_type: str | None,
        body: Mapping[str, Any],
        *,
        read: Callable[[Mapping[str, Any]], _Parsed],
        upsert: Callable[[_Parsed], None],
        remove: Callable[[Mapping[str, Any]], None],
    ) -> None:
        """One event of an object the filters read: cached as parsed, or removed; an object
        that cannot be read is logged and left out (it never stops the watch)."""
        self.delivering.set()
        meta = body.get("metadata") or {}
        if event_type == "DELETED":
            remove(meta)
            return
        try:
            upsert(read(body))
        except parse.ParseError as e:
            self.skipped(kind, str(meta.get("name", "")), str(e))

    def skipped(self, kind: str, name: str, reason: str) -> None:
        """An object the operator cannot read is left out, logged and counted: one
        object (written by any user) never stops the watch that reads its kind."""
        self.metrics.objects_skipped.labels(kind=kind).inc()
        logger.warning("ignoring %s %s: %s", kind, name[:300], reason[:500])

    def on_policy(
        self,
        event_type: str | None,
        body: Mapping[str, Any],
        *,
        listed_since: int | None = None,
    ) -> None:
        """A policy event from kopf, or (``listed_since``) a copy from the reconciler's
        LIST: its lifecycle is ``runtime.policies``'."""
        if not self.policies.applies(body):
            return
        self._seen(event_type)
        self.policies.on_event(event_type, body, listed_since=listed_since)

    def policy_gap(self, reason: str) -> None:
        """A gap in what kopf (or the API path) delivered: the reconciler compares kopf's
        kinds with a LIST, and the policies wait for it (``Policies.gap``)."""
        self.relisted.set()
        self.policies.gap(reason)

    def _seen(self, event_type: str | None) -> None:
        self.delivering.set()
        if event_type is None:  # kopf's (re-)listing: what it lost meanwhile is unknown
            # Either kind: with no policy to list (or none left), kopf's listing of the
            # policies sends nothing at all, and its pods share the gap.
            self.policy_gap("kopf listed again")
