"""Writes to the Kubernetes API: the Binding, Events, and the PodScheduled condition.

Uses the official ``kubernetes`` client (v37, pydantic models). Every call is blocking:
run it in a worker thread. Nothing here raises on API errors; results are returned as
values (``BindResult``, ``StatusWrite``) or counted (``EventRecorder.stats``) and
logged at WARNING, so the caller decides what to retry.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import logging
import math
import re
import socket
import threading
import time
import typing
from collections.abc import Callable, Mapping, Sequence

import kubernetes.client.exceptions

from metricsched.core import cycle, model, parse
from metricsched.edges import kube, observe

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
# A Binding is sent only with at least this much leadership left. The client gives up at
# the fence, but a slow network can still deliver what it sent later: the Lease outlives
# the fence by lease duration - renew deadline (5 s by default), so a request is safe if
# it arrives within that slack plus what was left when it was sent. At 1 s, the fault
# suite's "4 s per chunk" delay (headers and body: 8 s) landed Bindings after the Lease
# ran out (le-inflight, 3 of 250); at 4 s such a request still arrives in time.
MIN_FENCE_S = 4.0
MESSAGE_LIMIT = cycle.MESSAGE_LIMIT  # bytes; the API's limit for event notes

_API_ERRORS = kube.API_ERRORS


# --- binding ---------------------------------------------------------------------------


class BindOutcome(enum.StrEnum):
    BOUND = "Bound"  # 201: the pod is on the node
    ALREADY_BOUND = "AlreadyBound"  # 409 "is already assigned to node": done, by whoever
    GONE = "Gone"  # 404, or 409 "is being deleted": forget the pod
    GATED = "Gated"  # 409 "non-empty .spec.schedulingGates": wait for the gates to go
    CONFLICT = "Conflict"  # other 409, e.g. the uid precondition (a re-created pod)
    FORBIDDEN = "Forbidden"  # 403: RBAC for pods/binding is missing
    REJECTED = "Rejected"  # a definite "no" (4xx other than the above, 429): retry later
    UNKNOWN = "Unknown"  # the answer was lost (transport error, timeout, 5xx): read the pod
    FENCED = "Fenced"  # not sent: this replica may no longer write as leader
    NOT_BOUND = "NotBound"  # read back after a lost answer: the pod is still unbound


@dataclasses.dataclass(frozen=True, slots=True)
class BindResult:
    kind: BindOutcome
    message: str  # the API server's message, or the transport error
    http_status: int | None  # None when no HTTP answer arrived
    node: str = ""  # where the pod is: the target if BOUND, the other node if ALREADY_BOUND


_ASSIGNED_TO = re.compile(r'is already assigned to node "([^"]*)"')


def bind(
    api: kube.Api,
    *,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fence: Callable[[], float] | None = None,
    metrics: observe.Metrics | None = None,
    annotations: Mapping[str, str] | None = None,
) -> BindResult:
    """POST pods/binding for one pod: exactly one API write, or none if fenced.

    ``annotations`` (the decision record, ``metricsched.io/decision``) ride on the
    Binding: kube-apiserver copies a Binding's annotations onto the pod it binds.

    ``fence`` (the leader elector's) is read right before sending: the time this replica
    may still write as leader. Less than ``MIN_FENCE_S`` left: nothing is sent
    (``FENCED``); otherwise the request's timeout is cut to what is left, so no Binding
    of ours is still in flight when a successor may start.

    The Binding carries the pod's uid, which the API server checks as a precondition, so
    a pod deleted and re-created under the same name is never bound by mistake. The
    success answer is a ``Status``, not a ``Binding``: the generated client would fail to
    deserialize it after the POST succeeded (kubernetes-client/python#547), hence a raw
    answer (``kube.write``) and a check of its status code.
    """
    metadata: dict[str, typing.Any] = {"name": name, "namespace": namespace, "uid": uid}
    if annotations:
        metadata["annotations"] = dict(annotations)
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    if fence is not None:
        left = fence()
        if left < MIN_FENCE_S:
            return BindResult(
                kind=BindOutcome.FENCED,
                message=f"not sent: this replica may write as leader for {left:.1f}s more",
                http_status=None,
            )
        timeout_s = min(timeout_s, left)
    if metrics is not None:
        metrics.api_writes.labels(kind="binding").inc()
    try:
        response = kube.write(
            api,
            "POST",
            kube.path("api/v1/namespaces", namespace, "pods", name, "binding"),
            body,
            timeout_s=timeout_s,
        )
        status = int(response.status)
        text = _decode(kube.read_and_release(response))
    except kubernetes.client.exceptions.ApiException as e:
        result = _bind_failure(int(e.status or 0) or None, _status_message(e.body, e.reason))
    except _API_ERRORS as e:
        # Sent, maybe accepted, answer lost: only reading the pod can tell.
        result = BindResult(
            kind=BindOutcome.UNKNOWN, message=_transport_message(e), http_status=None
        )
    else:
        if 200 <= status < 300:
            return BindResult(kind=BindOutcome.BOUND, message="", http_status=status, node=node)
        result = _bind_failure(status, _status_message(text, ""))
    if metrics is not None:
        metrics.binding_errors.labels(result=result.kind.value).inc()
    quiet = (BindOutcome.ALREADY_BOUND, BindOutcome.GONE, BindOutcome.GATED)  # normal in a race
    log = logger.info if result.kind in quiet else logger.warning
    log("binding %s/%s to %s: %s: %s", namespace, name, node, result.kind.value, result.message)
    return result


def read_back(
    api: kube.Api,
    *,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> BindResult:
    """Resolve a Binding whose answer was lost (``UNKNOWN``) by reading the pod.

    Bound to ``node``: ``BOUND``; to another node: ``ALREADY_BOUND`` naming it; gone or
    re-created: ``GONE``; unbound: ``NOT_BOUND``; the read failed too: ``UNKNOWN``.
    """
    try:
        body = kube.read_json(
            api.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=timeout_s
            )
        )
    except kubernetes.client.exceptions.ApiException as e:
        if e.status == 404:
            return BindResult(kind=BindOutcome.GONE, message="pod deleted", http_status=404)
        return BindResult(
            kind=BindOutcome.UNKNOWN, message=kube.describe_error(e), http_status=e.status
        )
    except _API_ERRORS as e:
        return BindResult(kind=BindOutcome.UNKNOWN, message=_transport_message(e), http_status=None)
    meta = body.get("metadata") or {}
    if meta.get("uid") != uid or meta.get("deletionTimestamp"):
        return BindResult(
            kind=BindOutcome.GONE, message="pod deleted or re-created", http_status=200
        )
    bound_to = str((body.get("spec") or {}).get("nodeName") or "")
    if bound_to == node:
        return BindResult(kind=BindOutcome.BOUND, message="", http_status=200, node=node)
    if bound_to:
        return BindResult(
            kind=BindOutcome.ALREADY_BOUND,
            message=f"bound to {bound_to} by another binder",
            http_status=200,
            node=bound_to,
        )
    return BindResult(kind=BindOutcome.NOT_BOUND, message="the pod is not bound", http_status=200)


def _bind_failure(status: int | None, message: str) -> BindResult:
    kind = BindOutcome.REJECTED
    bound_to = ""
    if status is None or status == 0 or status >= 500:
        kind = BindOutcome.UNKNOWN  # a 5xx (e.g. a 504) may come after etcd accepted it
    elif status == 404:
        kind = BindOutcome.GONE
    elif status == 403:
        kind = BindOutcome.FORBIDDEN
    elif status == 409:
        assigned = _ASSIGNED_TO.search(message)
        if assigned is not None:
            kind, bound_to = BindOutcome.ALREADY_BOUND, assigned.group(1)
        elif "is being deleted" in message:
            kind = BindOutcome.GONE
        elif "schedulingGates" in message:
            kind = BindOutcome.GATED
        else:
            kind = BindOutcome.CONFLICT
    return BindResult(kind=kind, message=message, http_status=status, node=bound_to)


def _decode(data: object) -> str:
    if isinstance(data, bytes | bytearray):
        return bytes(data).decode("utf-8", "replace")
    return "" if data is None else str(data)


def _status_message(body: object, fallback: object) -> str:
    """The ``message`` of a metav1.Status body, else the body itself, else ``fallback``."""
    text = _decode(body).strip()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    return text[:MESSAGE_LIMIT] or _decode(fallback)


def _transport_message(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:MESSAGE_LIMIT]


# --- the PodScheduled condition --------------------------------------------------------


class StatusWrite(enum.StrEnum):
    WRITTEN = "Written"
    UNCHANGED = "Unchanged"  # the pod already had exactly this condition: no write
    GONE = "Gone"  # 404
    ERROR = "Error"


def set_pod_scheduled_false(
    api: kube.Api,
    *,
    namespace: str,
    name: str,
    message: str,
    current_conditions: Sequence[Mapping[str, typing.Any]],
    reason: str = "Unschedulable",
    now: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    metrics: observe.Metrics | None = None,
) -> StatusWrite:
    """Set ``PodScheduled=False`` with ``reason`` and ``message``, as kube-scheduler does.

    Cluster autoscalers read this condition. Skips the write when the pod (as last seen
    by the watch: ``current_conditions`` is ``status.conditions``) already carries the
    same status, reason and message, so a pod retried every few seconds costs one write,
    not one per attempt. ``lastTransitionTime`` moves only when the status changes
    (kube-scheduler's ``UpdatePodCondition``). Pod ``status.conditions`` is a strategic
    merge list keyed by ``type``, so the patch leaves the other conditions alone.
    """
    message = truncate_message(message)
    existing = next((c for c in current_conditions if c.get("type") == "PodScheduled"), None)
    if (
        existing is not None
        and existing.get("status") == "False"
        and existing.get("reason") == reason
        and existing.get("message") == message
    ):
        return StatusWrite.UNCHANGED
    if existing is not None and existing.get("status") == "False":
        transition = existing.get("lastTransitionTime") or _rfc3339(now)
    else:
        transition = _rfc3339(now)
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if metrics is not None:
        metrics.api_writes.labels(kind="status").inc()
    try:
        response = kube.write(
            api,
            "PATCH",
            kube.path("api/v1/namespaces", namespace, "pods", name, "status"),
            {"status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
            timeout_s=timeout_s,
        )
        kube.read_and_release(response)
    except kubernetes.client.exceptions.ApiException as e:
        if e.status == 404:
            return StatusWrite.GONE
        logger.warning(
            "cannot set PodScheduled=False on %s/%s: HTTP %s: %s",
            namespace,
            name,
            e.status,
            _status_message(e.body, e.reason),
        )
        return StatusWrite.ERROR
    except _API_ERRORS as e:
        logger.warning(
            "cannot set PodScheduled=False on %s/%s: %s", namespace, name, _transport_message(e)
        )
        return StatusWrite.ERROR
    return StatusWrite.WRITTEN


# --- events ----------------------------------------------------------------------------


def truncate_message(message: str) -> str:
    """Cut to 1024 bytes of UTF-8 with a `` ...`` suffix, as kube-scheduler does (the
    cycle's rule, ``core.cycle.truncate_message``)."""
    return cycle.truncate_message(message, limit=MESSAGE_LIMIT)


def _rfc3339(now: float | None) -> str:
    return parse.rfc3339(time.time() if now is None else now)


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about; ``uid`` makes it show in ``kubectl describe``."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str

    @classmethod
    def pod(cls, *, namespace: str, name: str, uid: str) -> ObjectRef:
        return cls(kind="Pod", namespace=namespace, name=name, uid=uid, api_version="v1")

    @classmethod
    def policy(cls, *, namespace: str, name: str, uid: str) -> ObjectRef:
        return cls(
            kind="SchedulingPolicy",
            namespace=namespace,
            name=name,
            uid=uid,
            api_version="metricsched.io/v1alpha1",
        )


EventType = typing.Literal["Normal", "Warning"]


class Recorded(enum.StrEnum):
    CREATED = "Created"  # a new Event was posted
    MERGED = "Merged"  # an identical recent Event got count+1 by PATCH now
    DEFERRED = "Deferred"  # merged into an identical Event; its PATCH is written later
    DROPPED = "Dropped"  # over the rate limit: not posted
    FAILED = "Failed"  # the API refused or could not be reached (logged)


@dataclasses.dataclass(frozen=True, slots=True)
class RecorderStats:
    created: int
    patched: int
    dropped: int
    failed: int
    pending: int  # merged occurrences not yet written


@dataclasses.dataclass(slots=True)
class _Entry:
    """One posted Event and the identical occurrences merged into it."""

    name: str
    namespace: str
    first_seen: float
    last_seen: float
    count: int  # occurrences so far
    written: int  # count the API has
    last_write: float
    busy: bool  # a write is in flight (outside the lock)


_EventKey = tuple[str, str, str, str, str, str, str]
_PatchOutcome = typing.Literal["ok", "gone", "error"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Patch:
    key: _EventKey
    entry: _Entry
    count: int
    last_seen: float


class EventRecorder:
    """Posts core/v1 Events like a controller's recorder, frugally.

    - "From" in ``kubectl describe`` is ``source.component`` = ``component`` (the
      scheduler name); ``reportingComponent``/``reportingInstance`` are set too.
    - Identical events (same object uid, type, reason and message) within
      ``merge_window_s`` of the first are merged into it: ``count`` and
      ``lastTimestamp`` grow by PATCH, as client-go's EventCorrelator does. PATCHes for
      one event are coalesced to at most one per ``patch_interval_s``; later ones wait
      for the next occurrence or ``flush()`` (``start()`` runs it on a daemon thread).
    - A token bucket (``rate_per_s``, ``burst``) bounds all writes. A new event beyond
      the budget is dropped and counted, never waited for: the scheduler does not block
      on events. A merge beyond the budget is kept and written later.
    - Thread-safe. API calls run outside the lock. API errors are logged and counted,
      never raised.
    """

    def __init__(
        self,
        api: kube.Api,
        *,
        component: str,
        instance: str | None = None,
        rate_per_s: float = 50.0,
        burst: int = 100,
        merge_window_s: float = 600.0,
        patch_interval_s: float = 10.0,
        max_entries: int = 4096,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        metrics: observe.Metrics | None = None,
    ) -> None:
        self._api = api
        self._component = component
        # kube-scheduler's recorder reports "<scheduler name>-<hostname>".
        self._instance = instance or f"{component}-{socket.gethostname()}"[:128]
        self._rate = rate_per_s
        self._burst = float(burst)
        self._merge_window = merge_window_s
        self._patch_interval = patch_interval_s
        self._max_entries = max_entries
        self._timeout = timeout_s
        self._clock = clock
        self._metrics = metrics
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._refilled = clock()
        self._entries: collections.OrderedDict[_EventKey, _Entry] = collections.OrderedDict()
        self._last_suffix = 0
        self._drop_logged = -math.inf
        self._created = self._patched = self._dropped = self._failed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- public --------------------------------------------------------------------

    @property
    def dropped(self) -> int:
        return self._dropped

    def stats(self) -> RecorderStats:
        with self._lock:
            pending = sum(e.count - e.written for e in self._entries.values() if e.written)
            return RecorderStats(
                created=self._created,
                patched=self._patched,
                dropped=self._dropped,
                failed=self._failed,
                pending=pending,
            )

    def record(
        self,
        obj: ObjectRef,
        *,
        event_type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> Recorded:
        """Record one occurrence of an event about ``obj``; see the class docstring."""
        message = truncate_message(message)
        key: _EventKey = (obj.uid, obj.kind, obj.namespace, obj.name, event_type, reason, message)
        with self._lock:
            now = self._clock()
            entry = self._entries.get(key)
            if entry is not None and now - entry.first_seen > self._merge_window:
                del self._entries[key]
                entry = None
            if entry is not None:
                entry.count += 1
                entry.last_seen = now
                self._entries.move_to_end(key)
                patch = self._due_patch(key, entry, now, force=False)
                if patch is None:
                    return Recorded.DEFERRED
            else:
                if not self._take_token(now):
                    self._dropped += 1
                    if self._metrics is not None:
                        self._metrics.events_dropped.inc()
                    if now - self._drop_logged >= 60.0:  # one line a minute, not one per event
                        self._drop_logged = now
                        logger.warning(
                            "event rate limit (%g/s, burst %d) reached: %d events dropped so far",
                            self._rate,
                            int(self._burst),
                            self._dropped,
                        )
                    return Recorded.DROPPED
                entry = _Entry(
                    name=self._event_name(obj.name, now),
                    namespace=obj.namespace,
                    first_seen=now,
                    last_seen=now,
                    count=1,
                    written=0,
                    last_write=now,
                    busy=True,
                )
                self._entries[key] = entry
                while len(self._entries) > self._max_entries:
                    self._entries.popitem(last=False)
                patch = None
        if patch is not None:
            outcome = self._write_patch(patch)
            if outcome == "gone":
                # The event expired (events have a TTL) and its entry is gone: post this
                # occurrence as a new event, as client-go does.
                return self.record(
                    obj, event_type=event_type, reason=reason, message=message, action=action
                )
            return Recorded.MERGED if outcome == "ok" else Recorded.FAILED
        created = self._create(
            obj, entry, event_type=event_type, reason=reason, message=message, action=action
        )
        with self._lock:
            entry.busy = False
            if created:
                entry.written = 1
            elif self._entries.get(key) is entry:
                del self._entries[key]  # the next occurrence tries a fresh create
        return Recorded.CREATED if created else Recorded.FAILED

    def record_pod(
        self,
        *,
        pod: model.PodInfo,
        event_type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> Recorded:
        """``record`` for a pod (kube-scheduler's actions: ``Scheduling``, ``Binding``)."""
        ref = ObjectRef.pod(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        return self.record(
            ref, event_type=event_type, reason=reason, message=message, action=action
        )

    def flush(self, *, force: bool = False) -> int:
        """Write pending merges whose coalescing interval has passed (all if ``force``),
        as far as the rate budget allows; return how many PATCHes were written."""
        with self._lock:
            now = self._clock()
            patches = []
            for key, entry in self._entries.items():
                if entry.count > entry.written:
                    patch = self._due_patch(key, entry, now, force=force)
                    if patch is not None:
                        patches.append(patch)
        return sum(self._write_patch(p) == "ok" for p in patches)

    def start(self, *, interval_s: float = 5.0) -> None:
        """Flush pending merges every ``interval_s`` on a daemon thread until ``close()``."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.flush()
                except Exception:
                    logger.exception("event flush failed")

        self._thread = threading.Thread(target=loop, name="metricsched-events", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the flusher and write what is pending (within the rate budget)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.flush(force=True)

    # --- internals (the lock is held where noted) ----------------------------------

    def _take_token(self, now: float) -> bool:  # lock held
        elapsed = max(now - self._refilled, 0.0)
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
        self._refilled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def _due_patch(
        self, key: _EventKey, entry: _Entry, now: float, *, force: bool
    ) -> _Patch | None:
        # lock held
        if entry.busy or entry.written == 0:
            return None  # being created or patched: the later write will carry the count
        if not force and now - entry.last_write < self._patch_interval:
            return None
        if not self._take_token(now):
            return None
        entry.busy = True
        return _Patch(key=key, entry=entry, count=entry.count, last_seen=entry.last_seen)

    def _event_name(self, object_name: str, now: float) -> str:  # lock held
        # client-go's "<object>.<hex nanoseconds>", made unique within this process.
        self._last_suffix = max(self._last_suffix + 1, int(now * 1e9))
        return f"{object_name[:200]}.{self._last_suffix:x}"

    def _create(
        self,
        obj: ObjectRef,
        entry: _Entry,
        *,
        event_type: EventType,
        reason: str,
        message: str,
        action: str,
    ) -> bool:
        stamp = _rfc3339(int(entry.first_seen))
        event: dict[str, typing.Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": entry.name, "namespace": entry.namespace},
            "involvedObject": {
                "apiVersion": obj.api_version,
                "kind": obj.kind,
                "name": obj.name,
                "namespace": obj.namespace,
                "uid": obj.uid,
            },
            "type": event_type,
            "reason": reason,
            "message": message,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if action:
            event["action"] = action
        try:
            self._count_write()
            response = kube.write(
                self._api,
                "POST",
                kube.path("api/v1/namespaces", entry.namespace, "events"),
                event,
                timeout_s=self._timeout,
            )
            kube.read_and_release(response)
        except _API_ERRORS as e:
            self._failure(
                f"cannot post event {reason} for {obj.kind} {obj.namespace}/{obj.name}", e
            )
            return False
        with self._lock:
            self._created += 1
        return True

    def _write_patch(self, patch: _Patch) -> _PatchOutcome:
        entry = patch.entry
        body = {"count": patch.count, "lastTimestamp": _rfc3339(patch.last_seen)}
        gone = False
        try:
            self._count_write()
            response = kube.write(
                self._api,
                "PATCH",
                kube.path("api/v1/namespaces", entry.namespace, "events", entry.name),
                body,
                content_type="application/strategic-merge-patch+json",
                timeout_s=self._timeout,
            )
            kube.read_and_release(response)
            ok = True
        except _API_ERRORS as e:
            ok = False
            gone = isinstance(e, kubernetes.client.exceptions.ApiException) and e.status == 404
            if not gone:
                self._failure(f"cannot update event {entry.namespace}/{entry.name}", e)
        with self._lock:
            entry.busy = False
            if ok:
                self._patched += 1
                entry.written = max(entry.written, patch.count)
                entry.last_write = self._clock()
            elif gone:
                # Expired (events have a TTL): the next occurrence creates a new one.
                if self._entries.get(patch.key) is entry:
                    del self._entries[patch.key]
            else:
                entry.last_write = self._clock()  # retry after the interval, not at once
        return "ok" if ok else "gone" if gone else "error"

    def _count_write(self) -> None:
        if self._metrics is not None:
            self._metrics.api_writes.labels(kind="event").inc()

    def _failure(self, what: str, e: BaseException) -> None:
        with self._lock:
            self._failed += 1
        if isinstance(e, kubernetes.client.exceptions.ApiException):
            detail = f"HTTP {e.status}: {_status_message(e.body, e.reason)}"
        else:
            detail = _transport_message(e)
        logger.warning("%s: %s", what, detail)
