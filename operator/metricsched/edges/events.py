"""Events: core/v1 Events posted like a controller's recorder, merged and rate-limited.

``EventRecorder`` is what ``kubectl describe`` shows ("From" = the scheduler name): the
scheduling loop's Scheduled and FailedScheduling events and the policies' events. Thread-
safe; API calls run in the caller's thread (or the flusher's) outside the lock; API
errors are logged and counted (``RecorderStats``), never raised.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import math
import socket
import threading
import time
import typing
from collections.abc import Callable

import kubernetes.client.exceptions

from metricsched.core import model
from metricsched.edges import kube, observe, wire

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = wire.DEFAULT_TIMEOUT_S


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
        message = wire.truncate_message(message)
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
        stamp = wire.rfc3339(int(entry.first_seen))
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
        except wire.API_ERRORS as e:
            self._failure(
                f"cannot post event {reason} for {obj.kind} {obj.namespace}/{obj.name}", e
            )
            return False
        with self._lock:
            self._created += 1
        return True

    def _write_patch(self, patch: _Patch) -> _PatchOutcome:
        entry = patch.entry
        body = {"count": patch.count, "lastTimestamp": wire.rfc3339(patch.last_seen)}
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
        except wire.API_ERRORS as e:
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
        logger.warning("%s: %s", what, wire.failure(e).detail)
