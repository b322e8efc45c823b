"""Events: core/v1 Events posted like a controller's recorder, merged and rate-limited.

``EventRecorder`` is what ``kubectl describe`` shows ("From" = the scheduler name): the
scheduling loop's Scheduled and FailedScheduling events and the policies' events. It
lives on the event loop: the budget and merging are decided at once, before anything is
built, and the writes go through ``edges.kube_http`` (aiohttp) with no thread hop. API
errors are logged and counted (``RecorderStats``), never raised.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import logging
import math
import socket
import time
import typing
from collections.abc import Callable

from metricsched.core import model
from metricsched.edges import kube, kube_http, observe, wire

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = wire.DEFAULT_TIMEOUT_S
# How far back a namespace's spending counts against its share of the event budget.
_SHARE_WINDOW_S = 10.0


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
    SENDING = "Sending"  # ``post``: a write was started; its outcome goes to the stats


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
    busy: bool  # a write is in flight


_EventKey = tuple[str, str, str, str, str, str, str]
_PatchOutcome = typing.Literal["ok", "gone", "error"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Occurrence:
    """One ``record``/``post`` call, as given (the body is built only if it is written)."""

    obj: ObjectRef
    event_type: EventType
    reason: str
    message: str
    action: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Create:
    key: _EventKey
    entry: _Entry
    what: _Occurrence


@dataclasses.dataclass(frozen=True, slots=True)
class _Patch:
    key: _EventKey
    entry: _Entry
    count: int
    last_seen: float
    what: _Occurrence | None  # the occurrence to post anew if the Event expired


_Write = _Create | _Patch


class EventRecorder:
    """Posts core/v1 Events like a controller's recorder, frugally, on the event loop.

    - "From" in ``kubectl describe`` is ``source.component`` = ``component`` (the
      scheduler name); ``reportingComponent``/``reportingInstance`` are set too.
    - Identical events (same object uid, type, reason and message) within
      ``merge_window_s`` of the first are merged into it: ``count`` and
      ``lastTimestamp`` grow by PATCH, as client-go's EventCorrelator does. PATCHes for
      one event are coalesced to at most one per ``patch_interval_s``; later ones wait
      for the next occurrence or ``flush()`` (``start()`` runs it every few seconds).
    - A token bucket (``rate_per_s``, ``burst``) bounds all writes. It is checked first:
      a new event beyond the budget is dropped and counted, with no body built and no
      task made; the scheduler never waits on events. A merge beyond the budget is kept
      and written later.
    - The bucket is shared fairly across namespaces: once it is below half full, a token
      goes only to a namespace that has recently spent no more than the mean of the
      namespaces that posted (spending decays over ``_SHARE_WINDOW_S``), so one
      namespace's flood of FailedScheduling events cannot drop another namespace's
      Scheduled events: the flood gets the upper half of the bucket and what the others
      leave. Alone, a namespace has the whole budget.
    - ``post`` decides at once and leaves the write, if any, to a task of the recorder
      (``aclose`` waits for them); ``record`` waits for the write and says how it went.
      Both run on the event loop; ``post`` from another thread is handed to the loop
      ``start`` ran on. API errors are logged and counted, never raised.
    """

    def __init__(
        self,
        http: kube_http.AsyncApi,
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
        self._http = http
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
        self._tokens = float(burst)
        self._refilled = clock()
        # namespace -> tokens spent recently (decaying with time constant _SHARE_WINDOW_S)
        self._spent: dict[str, float] = {}
        self._entries: collections.OrderedDict[_EventKey, _Entry] = collections.OrderedDict()
        self._last_suffix = 0
        self._drop_logged = -math.inf
        self._created = self._patched = self._dropped = self._failed = 0
        self._writes: set[asyncio.Task[Recorded]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- public --------------------------------------------------------------------

    @property
    def dropped(self) -> int:
        return self._dropped

    def stats(self) -> RecorderStats:
        pending = sum(e.count - e.written for e in self._entries.values() if e.written)
        return RecorderStats(
            created=self._created,
            patched=self._patched,
            dropped=self._dropped,
            failed=self._failed,
            pending=pending,
        )

    def post(
        self,
        obj: ObjectRef,
        *,
        event_type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> Recorded:
        """Record one occurrence without waiting: ``DROPPED`` or ``DEFERRED`` at once,
        else ``SENDING`` (the write runs as a task). Never blocks; callable from another
        thread once ``start`` has run (the call is handed to the loop)."""
        what = _Occurrence(obj, event_type, reason, message, action)
        if not self._on_loop():
            if self._loop is None:
                logger.warning(
                    "event %s for %s/%s lost: no event loop", reason, obj.namespace, obj.name
                )
                return Recorded.FAILED
            self._loop.call_soon_threadsafe(self._post, what)
            return Recorded.SENDING
        return self._post(what)

    async def record(
        self,
        obj: ObjectRef,
        *,
        event_type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> Recorded:
        """Record one occurrence and wait for its write; see the class docstring."""
        write = self._admit(_Occurrence(obj, event_type, reason, message, action))
        if isinstance(write, Recorded):
            return write
        return await self._write(write)

    def post_pod(
        self,
        *,
        pod: model.PodInfo,
        event_type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> Recorded:
        """``post`` for a pod (kube-scheduler's actions: ``Scheduling``, ``Binding``)."""
        ref = ObjectRef.pod(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        return self.post(ref, event_type=event_type, reason=reason, message=message, action=action)

    async def flush(self, *, force: bool = False) -> int:
        """Write pending merges whose coalescing interval has passed (all if ``force``),
        as far as the rate budget allows; return how many PATCHes were written."""
        now = self._clock()
        patches = []
        for key, entry in self._entries.items():
            if entry.count > entry.written:
                patch = self._due_patch(key, entry, now, force=force, what=None)
                if patch is not None:
                    patches.append(patch)
        outcomes = await asyncio.gather(*(self._write(p) for p in patches))
        return sum(outcome is Recorded.MERGED for outcome in outcomes)

    def start(self, *, interval_s: float = 5.0) -> None:
        """Flush pending merges every ``interval_s`` on the running loop until ``aclose``."""
        self._loop = asyncio.get_running_loop()
        if self._flusher is not None:
            return

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    await self.flush()
                except Exception:
                    logger.exception("event flush failed")

        self._flusher = self._loop.create_task(loop(), name="event-flusher")

    async def drain(self, *, timeout_s: float | None = None) -> None:
        """Wait for the writes ``post`` started (at most ``timeout_s``)."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=timeout_s)

    async def aclose(self, *, timeout_s: float = 5.0) -> None:
        """Stop the flusher, wait for the writes in flight (at most ``timeout_s``), and
        write what is pending (within the rate budget)."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        await self.drain(timeout_s=timeout_s)
        await self.flush(force=True)

    # --- internals -----------------------------------------------------------------

    def _on_loop(self) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is None or loop is self._loop

    def _post(self, what: _Occurrence) -> Recorded:
        write = self._admit(what)
        if isinstance(write, Recorded):
            return write
        task = asyncio.get_running_loop().create_task(self._write(write))
        self._writes.add(task)
        task.add_done_callback(self._write_done)
        return Recorded.SENDING

    def _write_done(self, task: asyncio.Task[Recorded]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("event write failed", exc_info=task.exception())

    def _admit(self, what: _Occurrence) -> _Write | Recorded:
        """The budget and the merge, decided before any body is built: the write to make,
        or ``DROPPED``/``DEFERRED``."""
        message = wire.truncate_message(what.message)
        if message is not what.message:
            what = dataclasses.replace(what, message=message)
        obj = what.obj
        key: _EventKey = (
            obj.uid,
            obj.kind,
            obj.namespace,
            obj.name,
            what.event_type,
            what.reason,
            message,
        )
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and now - entry.first_seen > self._merge_window:
            del self._entries[key]
            entry = None
        if entry is not None:
            entry.count += 1
            entry.last_seen = now
            self._entries.move_to_end(key)
            patch = self._due_patch(key, entry, now, force=False, what=what)
            return Recorded.DEFERRED if patch is None else patch
        if not self._take_token(now, obj.namespace):
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
        return _Create(key=key, entry=entry, what=what)

    async def _write(self, write: _Write) -> Recorded:
        if isinstance(write, _Create):
            created = await self._create(write.entry, write.what)
            write.entry.busy = False
            if created:
                write.entry.written = 1
            elif self._entries.get(write.key) is write.entry:
                del self._entries[write.key]  # the next occurrence tries a fresh create
            return Recorded.CREATED if created else Recorded.FAILED
        outcome = await self._write_patch(write)
        if outcome == "gone" and write.what is not None:
            # The event expired (events have a TTL) and its entry is gone: post this
            # occurrence as a new event, as client-go does.
            again = self._admit(write.what)
            return again if isinstance(again, Recorded) else await self._write(again)
        return Recorded.MERGED if outcome == "ok" else Recorded.FAILED

    def _take_token(self, now: float, namespace: str) -> bool:
        elapsed = max(now - self._refilled, 0.0)
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
        self._refilled = now
        if elapsed:
            decay = math.exp(-elapsed / _SHARE_WINDOW_S)
            self._spent = {ns: v * decay for ns, v in self._spent.items() if v * decay >= 0.01}
        if self._tokens < 1.0:
            return False
        spent = self._spent.get(namespace, 0.0)
        if self._tokens < self._burst / 2:
            # Low on tokens: keep them for namespaces that spent less (see the class
            # docstring); a namespace alone is its own mean, never held back.
            active = len(self._spent) + (namespace not in self._spent)
            if spent > sum(self._spent.values()) / active:
                return False
        self._tokens -= 1.0
        self._spent[namespace] = spent + 1.0
        return True

    def _due_patch(
        self, key: _EventKey, entry: _Entry, now: float, *, force: bool, what: _Occurrence | None
    ) -> _Patch | None:
        if entry.busy or entry.written == 0:
            return None  # being created or patched: the later write will carry the count
        if not force and now - entry.last_write < self._patch_interval:
            return None
        if not self._take_token(now, entry.namespace):
            return None
        entry.busy = True
        return _Patch(key=key, entry=entry, count=entry.count, last_seen=entry.last_seen, what=what)

    def _event_name(self, object_name: str, now: float) -> str:
        # client-go's "<object>.<hex nanoseconds>", made unique within this process.
        self._last_suffix = max(self._last_suffix + 1, int(now * 1e9))
        return f"{object_name[:200]}.{self._last_suffix:x}"

    async def _create(self, entry: _Entry, what: _Occurrence) -> bool:
        obj = what.obj
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
            "type": what.event_type,
            "reason": what.reason,
            "message": what.message,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if what.action:
            event["action"] = what.action
        what_failed = f"cannot post event {what.reason} for {obj.kind} {obj.namespace}/{obj.name}"
        answer = await self._send(
            "POST", kube.path("api/v1/namespaces", entry.namespace, "events"), event, what_failed
        )
        if answer is None or not answer.ok:
            if answer is not None:
                self._failure(what_failed, wire.answer_error(answer).detail)
            return False
        self._created += 1
        return True

    async def _write_patch(self, patch: _Patch) -> _PatchOutcome:
        entry = patch.entry
        body = {"count": patch.count, "lastTimestamp": wire.rfc3339(patch.last_seen)}
        what_failed = f"cannot update event {entry.namespace}/{entry.name}"
        answer = await self._send(
            "PATCH",
            kube.path("api/v1/namespaces", entry.namespace, "events", entry.name),
            body,
            what_failed,
            content_type="application/strategic-merge-patch+json",
        )
        ok = answer is not None and answer.ok
        gone = answer is not None and answer.status == 404
        if answer is not None and not ok and not gone:
            self._failure(what_failed, wire.answer_error(answer).detail)
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

    async def _send(
        self,
        method: str,
        path: str,
        body: dict[str, typing.Any],
        what_failed: str,
        *,
        content_type: str = "application/json",
    ) -> kube_http.Answer | None:
        """One write; None (logged and counted) when no answer arrived."""
        if self._metrics is not None:
            self._metrics.api_write_counters["event"].inc()
        try:
            return await self._http.request(
                method,
                path,
                body=body,
                content_type=content_type,
                timeout=kube_http.timeout(self._timeout),
            )
        except kube_http.TRANSPORT_ERRORS as e:
            self._failure(what_failed, wire.transport_message(e))
            return None

    def _failure(self, what: str, detail: str) -> None:
        self._failed += 1
        logger.warning("%s: %s", what, detail)
