"""The cluster's state, off kopf: one lean informer per kind, into the cluster cache.

kopf carries only our unassigned pods and the policies (``runtime.ingest``). Everything
else the cycle reads comes from ``edges.informer.Reflector``s run here, on the event loop:
bound (unfinished) pods, unbound pods nominated to a node (any scheduler's), bound pods
that failed (for the kubelet's rejections of our binds), nodes,
namespaces, PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and
VolumeAttachments. Their events go through the same translation as kopf's
(``Ingest.on_bound_pod``, ``on_nominated_pod``, ``on_node``, ...): the informers hand
every event, every LIST's keys and every gap to that one sink (``Sink``) and write no
cache themselves.

Every kind is reconciled after every LIST, the first one and each re-list alike: what the
cache holds and the LIST lacks was deleted while nobody watched and is dropped by the
sink (``Ingest.listed``: a bound pod that finished in the gap frees its node's room; a
deleted VolumeAttachment frees its attach slot). An assumed pod is dropped only once the
API confirmed its Binding before the LIST was sent (``ClusterCache.bound_ghosts``).

``consistent`` (the scheduler's and the rebalancer's gate, ``runtime.gates``: written here
alone) is set once every kind has
been listed, and clear from the start of a re-list until it has been applied; a state
not whole for ``SYNC_BOUND_S`` makes ``/readyz`` false with the kinds missing and why.
One object that cannot be read or handled is logged, counted
(``metricsched_objects_skipped_total``) and left out: it never ends a reflector. A re-list
here also asks the reconciler to compare kopf's kinds (the policies, our pending pods)
with a fresh LIST: the gap was kopf's too, whatever kopf made of it; until that LIST has
confirmed the policies, no pod is placed (``Policies.confirmed``). A kind whose
LIST or WATCH keeps failing makes ``/readyz`` false with the reason until it delivers
again (an event, a bookmark, or a watch's end at the server's timeout); each kind is its
own readiness subsystem.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from metricsched.edges import informer, kube_http, observe, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import ingest, supervise

logger = logging.getLogger("metricsched.informers")

Handler = Callable[[str | None, Mapping[str, Any]], None]

SUSPECT_S = 65.0
"""A Pod or Node watch that delivers nothing for this long, not even the end the API
server owes it after 30-40 s (``informer.LIVENESS_WATCH_S``), is suspect: no decision until
it delivers again or its kind is re-listed (at ``informer.IDLE_TIMEOUT_S``); kopf's own pod
watch reconnects at 70 s. Bookmarks are no clock here: a watch of a kind that does not
change (nodes of a quiet cluster) may get none for minutes."""

SYNC_BOUND_S = 60.0
"""How long the cluster state may stay unlisted (at start, or re-listing) before /readyz
turns false with the reason: a LIST that cannot complete is said, not waited on silently."""

RESOURCES = (
    # The kinds that say what a node holds: a stall of theirs is detected and re-listed
    # (and silence holds decisions), so that another scheduler's binds are never missed.
    informer.Resource("Node", "/api/v1/nodes", stall_relist=True),
    informer.Resource("Pod", "/api/v1/pods", ingest.BOUND_FIELD_SELECTOR, stall_relist=True),
    # Unbound pods a scheduler nominated a node for (kube-scheduler's preemption, or its
    # binding cycle waiting on volumes or claims): they occupy that node in Filter.
    informer.Resource("NominatedPod", "/api/v1/pods", ingest.NOMINATED_FIELD_SELECTOR),
    # Bound pods that failed, for the kubelet's rejections of our binds (none is listed
    # into the state: only what turns Failed while watched is reported).
    informer.Resource("FailedPod", "/api/v1/pods", ingest.FAILED_FIELD_SELECTOR),
    informer.Resource("Namespace", "/api/v1/namespaces"),
    informer.Resource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims"),
    informer.Resource("PersistentVolume", "/api/v1/persistentvolumes"),
    informer.Resource("StorageClass", "/apis/storage.k8s.io/v1/storageclasses"),
    informer.Resource("CSINode", "/apis/storage.k8s.io/v1/csinodes"),
    informer.Resource("VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments"),
)


DEVICE_CLASSES = informer.Resource("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses")
"""Watched only where the rules read DeviceClasses (DRA-backed extended resources, v1.36
and later): an older API server may not serve resource.k8s.io/v1, and a kind that cannot
be listed holds every decision."""


class Sink(Protocol):
    """What the informers feed: the translation into the cache and the queue
    (``runtime.ingest.Ingest``), one handler per kind."""

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_bound_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_nominated_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_failed_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_namespace(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_claim(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_volume(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_storage_class(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_csi_node(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_volume_attachment(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_device_class(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...
    def on_pending_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...

    def listed(self, kind: str, keys: set[str], *, version: str, started: float) -> int:
        """A LIST of ``kind`` applied: what the cache holds and it lacks, removed."""
        ...

    def pending_listed(self, uids: set[str], *, version: str) -> int:
        """A LIST of our unassigned pods applied: the pending pods it lacks, dropped."""
        ...

    def skipped(self, kind: str, name: str, reason: str) -> None:
        """One object that could not be handled: logged and counted, left out."""
        ...

    def policy_gap(self, reason: str) -> None:
        """A re-list here is a gap for kopf's kinds too."""
        ...


class ClusterState:
    """The informers: events and LISTs to the sink (the translation), sync and failures
    to ``gates.consistent`` and ``/readyz``."""

    def __init__(
        self,
        *,
        api: kube_http.AsyncApi,
        sink: Sink,
        gates: gates_mod.Gates,
        metrics: observe.Metrics,
        health: probes.HealthState,
        resources: tuple[informer.Resource, ...] = RESOURCES,
        sync_bound_s: float = SYNC_BOUND_S,
        clock: Callable[[], float] = time.monotonic,
        page: int = informer.PAGE,
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self.health = health
        self._handlers: dict[str, Handler] = {
            "Node": sink.on_node,
            "Pod": sink.on_bound_pod,
            "NominatedPod": sink.on_nominated_pod,
            "FailedPod": sink.on_failed_pod,
            "Namespace": sink.on_namespace,
            "PersistentVolumeClaim": sink.on_claim,
            "PersistentVolume": sink.on_volume,
            "StorageClass": sink.on_storage_class,
            "CSINode": sink.on_csi_node,
            "VolumeAttachment": sink.on_volume_attachment,
            "DeviceClass": sink.on_device_class,
        }
        self._api = api
        self._page = page
        # One LIST at a time across kinds (at start every kind lists at once otherwise):
        # the decoded pages of several kinds are never held together.
        self._list_gate = asyncio.Lock()
        self.reflectors = [
            informer.Reflector(api, r, self, page=page, list_gate=self._list_gate)
            for r in resources
        ]
        self._unlisted = {r.kind for r in resources}  # not listed yet, or re-listing
        self._failing: dict[str, str] = {}
        # Set while the state is whole (every kind listed, no re-list under way, no
        # suspect silence): the scheduler and the rebalancer decide nothing meanwhile.
        self.consistent = gates.consistent
        self._clock = clock
        self._sync_bound_s = sync_bound_s
        self._inconsistent_since: float | None = clock()
        self._heard: dict[str, float] = {}  # kind -> when its LIST or watch last delivered
        self._silent: set[str] = set()  # kinds whose watch is past SUSPECT_S without a line
        # What silence is judged for: the kinds whose stall is re-listed (Pod, Node), whose
        # watches the API server ends every 30-40 s; another kind's watch may be quiet
        # for its whole life, and its silence says nothing.
        self._watched = {r.kind for r in resources if r.stall_relist}

    def include(self, resource: informer.Resource) -> None:
        """Watch one more kind (before ``run``): the rules of the API server's version
        read it. Decisions wait for its first LIST as for the others."""
        if any(r.resource.kind == resource.kind for r in self.reflectors):
            return
        self.reflectors.append(
            informer.Reflector(
                self._api, resource, self, page=self._page, list_gate=self._list_gate
            )
        )
        self._unlisted.add(resource.kind)
        self.consistent.clear()

    async def run(self, stop: asyncio.Event) -> None:
        """Every reflector until ``stop`` (each retries its own failures), and the sync
        watchdog. One task group: if this run ends (cancelled by a supervisor, or a
        reflector raised past its own guard), every reflector of it ends with it, so a
        restarted run never runs beside its predecessor (the reflectors refuse a second
        concurrent run besides)."""
        async with asyncio.TaskGroup() as group:
            for reflector in self.reflectors:
                group.create_task(reflector.run(stop), name=f"informer-{reflector.resource.kind}")
            group.create_task(self._watch_sync(stop), name="informer-sync-watchdog")

    async def synced(self) -> None:
        """Until every kind has been listed once."""
        await asyncio.gather(*(r.synced.wait() for r in self.reflectors))

    def waiting_for(self) -> str:
        """Why the cluster state is not consistent: the kinds not listed (yet, or again)
        and the last failure of each; "" when it is."""
        if not self._unlisted:
            return ""
        parts = [
            f"{kind} ({self._failing[kind]})" if kind in self._failing else kind
            for kind in sorted(self._unlisted)
        ]
        return "not listed: " + ", ".join(parts)

    async def _watch_sync(self, stop: asyncio.Event) -> None:
        """Scheduling waits for a consistent cluster state, but never silently: past
        ``sync_bound_s`` without one, /readyz is false with what is missing and why, an
        ERROR is logged (again each bound), until the state is whole again."""
        reported = 0.0
        while not stop.is_set():
            await supervise.pause(min(1.0, self._sync_bound_s / 4), stop)
            self.check_silence()
            since = self._inconsistent_since
            if since is None or self.consistent.is_set():
                if reported:
                    self.health.set_ready(True, "cluster state listed", subsystem="sync")
                    reported = 0.0
                continue
            waited = self._clock() - since
            if waited >= self._sync_bound_s and self._clock() - reported >= self._sync_bound_s:
                reason = f"cluster state not synced for {waited:.0f}s: {self.waiting_for()}"
                logger.error("%s; not scheduling until it is", reason)
                self.health.set_ready(False, reason, subsystem="sync")
                reported = self._clock()

    def check_silence(self) -> None:
        """No decision on a kind whose watch has been silent past ``SUSPECT_S``: the API
        server ends each of these watches within 40 s, so such a watch is probably stalled
        (the informer re-lists it at ``informer.IDLE_TIMEOUT_S``), and a pod decided
        meanwhile could go where another scheduler's pods already are (kopf's own watch
        of our pending pods reconnects at 70 s, before that re-list). Decisions resume
        once the kind delivers (an event, a bookmark, the watch's end) or is listed."""
        now = self._clock()
        silent = {
            kind
            for kind, heard in self._heard.items()
            if kind in self._watched and kind not in self._unlisted and now - heard > SUSPECT_S
        }
        if silent and not self._silent:
            logger.warning(
                "no event, bookmark or end from the %s watch for %gs: not scheduling until it "
                "delivers or is listed again",
                ", ".join(sorted(silent)),
                SUSPECT_S,
            )
            self.consistent.clear()
            if self._inconsistent_since is None:
                self._inconsistent_since = now
        self._silent = silent
        if not silent and not self._unlisted and not self.consistent.is_set():
            logger.info("every watch delivering: scheduling")
            self.consistent.set()
            self._inconsistent_since = None

    # --- informer.Sink -------------------------------------------------------------------

    def event(self, kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        self._delivered(kind)
        if kind == "FailedPod" and event_type == "LISTED":
            return  # failed before this watch began (or in a gap): not reported
        try:
            self._handlers[kind]("ADDED" if event_type == "LISTED" else event_type, body)
        except Exception as e:  # one object never ends the informer
            meta = body.get("metadata") if isinstance(body, Mapping) else None
            name = (
                f"{meta.get('namespace', '')}/{meta.get('name', '')}"
                if isinstance(meta, Mapping)
                else "<unnamed>"
            )
            logger.error("%s %s: handling it failed; left out", kind, name, exc_info=e)
            self._sink.skipped(kind, name, f"{type(e).__name__}: {e}")

    def alive(self, kind: str) -> None:
        self._delivered(kind)

    def listed(self, kind: str, keys: set[str], version: str, started: float) -> None:
        removed = self._sink.listed(kind, keys, version=version, started=started)
        self._metrics.informer_lists.labels(kind=kind).inc()
        if removed:
            self._metrics.relists.labels(kind=kind.lower()).inc(removed)
            logger.warning("%s re-list: removed %d deleted while unwatched", kind, removed)
        self._unlisted.discard(kind)
        self._delivered(kind)
        if not self._unlisted and not self._silent and not self.consistent.is_set():
            logger.info("cluster state listed: scheduling")
            self.consistent.set()
            self._inconsistent_since = None

    def relisting(self, kind: str) -> None:
        self._unlisted.add(kind)
        self.consistent.clear()
        if self._inconsistent_since is None:
            self._inconsistent_since = self._clock()
        # A gap the informer had to re-list after is a gap for kopf's watches too (the
        # same API server): whether or not kopf re-lists (it may resume its watch and
        # still miss a deletion), its kinds (policies, our pending pods) are reconciled,
        # and no pod is placed under a policy until that LIST confirms them.
        self._sink.policy_gap(f"{kind} listed again")

    def failing(self, kind: str, reason: str) -> None:
        self._failing[kind] = reason
        self._metrics.watch_restarts.inc()
        self.health.set_ready(False, f"{kind} watch failing: {reason}", subsystem=kind)

    def _delivered(self, kind: str) -> None:
        self._heard[kind] = self._clock()
        if kind in self._silent:
            self._silent.discard(kind)
            if not self._silent and not self._unlisted and not self.consistent.is_set():
                logger.info("the %s watch delivers again: scheduling", kind)
                self.consistent.set()
                self._inconsistent_since = None
        if self._failing.pop(kind, None) is not None:
            self.health.set_ready(True, "watches delivering again", subsystem=kind)


async def list_pending(
    api: kube_http.AsyncApi,
    sink: Sink,
    scheduler_names: frozenset[str],
    *,
    page: int = informer.PAGE,
) -> int:
    """LIST our unassigned pods into the cache and queue (at start, and to reconcile
    kopf's pending set after it re-lists); what the cache has pending and the LIST lacks
    is dropped. Returns how many were dropped."""
    listing = _OneShot(lambda _type, body: sink.on_pending_pod("ADDED", body))
    resource = informer.Resource("Pod", "/api/v1/pods", ingest.pending_selector(scheduler_names))
    await informer.Reflector(api, resource, listing, page=page).list_once()
    return sink.pending_listed(listing.keys, version=listing.version)


async def list_policies(api: kube_http.AsyncApi, watches: ingest.Ingest) -> int:
    """LIST the SchedulingPolicies (at start, and to reconcile kopf's after it re-lists):
    a policy deleted while kopf did not watch stops governing pods and being queried.
    A listed copy older than what kopf delivered meanwhile (an edit, a deletion) is not
    applied. Once applied, the policies are confirmed if no gap began since the LIST was
    sent (``Policies.listed``). Returns how many were dropped."""
    policies = watches.policies
    gaps, deletions = policies.gaps, policies.deletions
    sink = _OneShot(lambda _type, body: watches.on_policy("ADDED", body, listed_since=deletions))
    path = f"/apis/{ingest.GROUP}/{ingest.VERSION}/{ingest.PLURAL}"
    await informer.Reflector(api, informer.Resource("SchedulingPolicy", path), sink).list_once()
    ghosts = policies.ghosts(sink.keys, list_version=sink.version)
    for key in ghosts:
        watches.on_policy("DELETED", policies.ghost_deleted(key, list_version=sink.version))
    policies.listed(gaps_before=gaps)
    return len(ghosts)


class _OneShot:
    """A sink for one LIST: each object to ``handle``, the keys and version kept."""

    def __init__(self, handle: Handler) -> None:
        self._handle = handle
        self.keys: set[str] = set()
        self.version = ""
        self.started = time.monotonic()

    def event(self, kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        self._handle(event_type, body)

    def listed(self, kind: str, keys: set[str], version: str, started: float) -> None:
        self.keys, self.version, self.started = keys, version, started

    def relisting(self, kind: str) -> None:
        pass

    def failing(self, kind: str, reason: str) -> None:
        pass

    def alive(self, kind: str) -> None:
        pass
