"""Events about SchedulingPolicies, with a budget of their own, re-sent while they last.

The pods' ``events.EventRecorder`` spends its budget on bursts of pods; a policy's warning
must not be lost in one, and one that was dropped must come back. ``PolicyEvents`` owns a
second recorder with a small budget of its own and remembers, per policy and topic (a
metric, the fallback, the spec), which warning holds now. A warning is posted when it
starts and again every ``resend_interval_s`` while it lasts: the same Event's count grows
("x4 over 15m" in ``kubectl describe``), so a reader of the policy sees that it still
holds. A post the API refused is tried again after ``retry_s``. When the condition ends,
one resolving event (``MetricsRecovered``) may be posted.

The budget is shared fairly across namespaces: due posts go round-robin by namespace,
the namespace served least recently first, and a pump stops at the first post the budget
drops (the rest stay due). One namespace with a thousand failing policies therefore
cannot keep another namespace's only warning unposted: it waits one post per other
namespace with something due, not behind all of them.

Non-blocking for callers: ``warn``, ``resolve`` and ``forget`` only change state under a
lock (they may be called from a worker thread too); ``pump`` posts, on the event loop,
from the task ``start`` runs. Must not: post about pods, block a caller on I/O, or keep
state for a policy after ``forget``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from metricsched.edges import events, kube_http, observe

logger = logging.getLogger(__name__)

_POSTED = (events.Recorded.CREATED, events.Recorded.MERGED, events.Recorded.DEFERRED)


@dataclasses.dataclass(slots=True)
class _Pending:
    ref: events.ObjectRef
    event_type: events.EventType
    reason: str
    message: str
    action: str
    due: float  # monotonic time of the next post
    lasting: bool  # a warning re-sent while it holds; False = post once (a resolution)
    attempts: int = 0


class PolicyEvents:
    """Warnings and resolutions on SchedulingPolicies; see the module docstring."""

    def __init__(
        self,
        http: kube_http.AsyncApi,
        *,
        component: str,
        rate_per_s: float = 0.5,
        burst: int = 20,
        resend_interval_s: float = 300.0,
        retry_s: float = 10.0,
        max_attempts: int = 5,  # of a one-shot resolution; a warning is retried while it holds
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        metrics: observe.Metrics | None = None,
    ) -> None:
        self.recorder = events.EventRecorder(
            http,
            component=component,
            rate_per_s=rate_per_s,
            burst=burst,
            # Longer than the re-send interval, so a lasting warning stays one Event whose
            # count grows instead of a new Event per re-send.
            merge_window_s=max(600.0, 2.5 * resend_interval_s),
            patch_interval_s=0.0,
            clock=wall_clock,
            metrics=metrics,
        )
        self._resend = resend_interval_s
        self._retry = retry_s
        self._max_attempts = max_attempts
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], _Pending] = {}  # (policy, topic) -> next post
        self._served: dict[str, int] = {}  # namespace -> sequence number of its last post
        self._sequence = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    # --- what the operator reports ---------------------------------------------------

    def warn(
        self,
        ref: events.ObjectRef,
        *,
        topic: str,
        reason: str,
        message: str,
        action: str = "",
    ) -> None:
        """A warning that holds now (call it at every check; repeats cost nothing).

        A new warning, or a new reason for a topic, is posted at once; the same reason
        with another message is posted with that message at its next re-send.
        """
        key = (_policy(ref), topic)
        with self._lock:
            current = self._pending.get(key)
            if current is not None and current.lasting and current.reason == reason:
                current.ref, current.message, current.action = ref, message, action
                return
            self._pending[key] = _Pending(
                ref=ref,
                event_type="Warning",
                reason=reason,
                message=message,
                action=action,
                due=self._clock(),
                lasting=True,
            )
        self._wake_up()

    def resolve(
        self,
        ref: events.ObjectRef,
        *,
        topic: str,
        reason: str = "",
        message: str = "",
        action: str = "",
    ) -> bool:
        """The topic's warning no longer holds: stop re-sending it, and post one Normal
        event ``reason`` if given. Return whether a warning was held."""
        key = (_policy(ref), topic)
        with self._lock:
            current = self._pending.get(key)
            if current is None or not current.lasting:
                return False
            if reason:
                self._pending[key] = _Pending(
                    ref=ref,
                    event_type="Normal",
                    reason=reason,
                    message=message,
                    action=action,
                    due=self._clock(),
                    lasting=False,
                )
            else:
                del self._pending[key]
        if reason:
            self._wake_up()
        return True

    def forget(self, policy: str, *, topic_prefix: str = "") -> int:
        """Drop everything about a deleted policy (``"namespace/name"``), or only its topics
        starting with ``topic_prefix`` (``"metric/"`` when its metrics were replaced);
        return how much."""
        with self._lock:
            gone = [k for k in self._pending if k[0] == policy and k[1].startswith(topic_prefix)]
            for key in gone:
                del self._pending[key]
        return len(gone)

    def active(self, policy: str) -> dict[str, str]:
        """The warnings holding for a policy, topic -> reason (for status and tests)."""
        with self._lock:
            return {
                topic: p.reason
                for (name, topic), p in self._pending.items()
                if name == policy and p.lasting
            }

    # --- posting ---------------------------------------------------------------------

    async def pump(self) -> int:
        """Post what is due; return how many posts went through."""
        now = self._clock()
        with self._lock:
            due = self._in_turn([(key, p) for key, p in self._pending.items() if p.due <= now])
        posted = 0
        for key, p in due:
            with self._lock:
                if self._pending.get(key) is not p:
                    continue  # replaced or forgotten meanwhile
                p.attempts += 1
                p.due = now + self._retry  # until the post below says otherwise
            outcome = await self.recorder.record(
                p.ref,
                event_type=p.event_type,
                reason=p.reason,
                message=p.message,
                action=p.action,
            )
            if outcome is events.Recorded.DROPPED:
                # The budget is spent: this and the rest stay due, for the next pump to
                # take in turn (not a failed attempt: the API was never asked).
                with self._lock:
                    p.attempts -= 1
                    p.due = now
                break
            ok = outcome in _POSTED
            posted += ok
            with self._lock:
                if ok:
                    self._sequence += 1
                    self._served[p.ref.namespace] = self._sequence
                if self._pending.get(key) is not p:
                    continue  # replaced or forgotten while posting
                if p.lasting:
                    if ok:
                        p.due, p.attempts = now + self._resend, 0
                elif ok or p.attempts >= self._max_attempts:
                    del self._pending[key]
        await self.recorder.flush()  # merges the budget held back earlier
        return posted

    def _in_turn(
        self, due: list[tuple[tuple[str, str], _Pending]]
    ) -> list[tuple[tuple[str, str], _Pending]]:
        """``due`` round-robin by namespace: each namespace's first post, then each one's
        second, ...; namespaces served least recently first. Called under the lock."""
        by_namespace: dict[str, list[tuple[tuple[str, str], _Pending]]] = {}
        for item in due:
            by_namespace.setdefault(item[1].ref.namespace, []).append(item)
        # Forget namespaces with nothing pending (bounded by what is pending now).
        pending = {p.ref.namespace for p in self._pending.values()}
        self._served = {ns: seq for ns, seq in self._served.items() if ns in pending}
        turn = sorted(by_namespace, key=lambda ns: self._served.get(ns, 0))
        ordered: list[tuple[tuple[str, str], _Pending]] = []
        for rank in range(max((len(v) for v in by_namespace.values()), default=0)):
            ordered.extend(by_namespace[ns][rank] for ns in turn if rank < len(by_namespace[ns]))
        return ordered

    def start(self, *, interval_s: float = 1.0) -> None:
        """Post due events from a task on the running loop (at once when a new one
        arrives) until ``aclose``."""
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()

        async def loop() -> None:
            while True:
                try:
                    await self.pump()
                except Exception:  # a post must never end the task
                    logger.exception("posting policy events failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=interval_s)
                self._wake.clear()

        self._task = self._loop.create_task(loop(), name="policy-events")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        await self.recorder.aclose()

    def _wake_up(self) -> None:
        """Wake the posting task, from the loop or from a worker thread."""
        loop = self._loop
        if loop is None:
            return  # not started: ``pump`` is called directly
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)


def _policy(ref: events.ObjectRef) -> str:
    return f"{ref.namespace}/{ref.name}"
