"""The scheduling queue: which pending pod to try next, and when to try again.

Like kube-scheduler's queue in spirit: new pods are tried first-in first-out; a pod that
could not be placed backs off exponentially (1s doubling to 10s) and is moved back early
when something changes that may help it (a node, a bound pod, a policy, the metrics).
Entries are pod UIDs; the pod itself lives in the cluster cache, so an entry can never
hold stale data, and a pod is never lost: every pending pod of the cache is either queued
or backing off, and ``sync`` re-adds any that is neither (after a restart or a missed
event). Runs on the event loop: no locking, one asyncio.Event to wake the worker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
from collections.abc import Iterable


class SchedulingQueue:
    def __init__(self, *, initial_backoff_s: float = 1.0, max_backoff_s: float = 10.0) -> None:
        self._active: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._waiting: dict[str, float] = {}  # uid -> due time of its next attempt
        self._attempts: dict[str, int] = {}  # failed attempts so far, kept across moves
        self._heap: list[tuple[float, str]] = []
        self._initial = initial_backoff_s
        self._max = max_backoff_s
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._active) + len(self._waiting)

    def __contains__(self, uid: object) -> bool:
        return uid in self._active or uid in self._waiting

    def add(self, uid: str) -> None:
        """A new or updated pending pod: try it soon unless it is backing off."""
        if uid in self._waiting or uid in self._active:
            return
        self._active[uid] = None
        self._wake.set()

    def done(self, uid: str) -> None:
        """The pod is bound or gone: forget it."""
        self._active.pop(uid, None)
        self._waiting.pop(uid, None)
        self._attempts.pop(uid, None)

    def attempts(self, uid: str) -> int:
        return self._attempts.get(uid, 0)

    def retry_later(self, uid: str, *, now: float) -> float:
        """The attempt failed: back off (1s, 2s, 4s ... max). Returns the delay chosen."""
        self._active.pop(uid, None)
        n = self._attempts.get(uid, 0)
        self._attempts[uid] = n + 1
        delay: float = min(self._max, self._initial * float(2 ** min(n, 30)))
        due = now + delay
        self._waiting[uid] = due
        heapq.heappush(self._heap, (due, uid))
        return delay

    def move_all_to_active(self) -> None:
        """Something changed that may make waiting pods schedulable: retry them now.

        Attempt counts are kept, so a pod that keeps failing still backs off longer."""
        if not self._waiting:
            return
        for uid in sorted(self._waiting, key=self._waiting.__getitem__):
            self._active[uid] = None
        self._waiting.clear()
        self._heap.clear()
        self._wake.set()

    def sync(self, pending: Iterable[str]) -> int:
        """Re-add every pending pod that is neither queued nor backing off; returns how many."""
        added = 0
        for uid in pending:
            if uid not in self:
                self.add(uid)
                added += 1
        return added

    def _promote_due(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            due, uid = heapq.heappop(self._heap)
            if self._waiting.get(uid) != due:
                continue  # stale heap entry
            del self._waiting[uid]
            self._active[uid] = None

    def next_due(self) -> float | None:
        while self._heap:
            due, uid = self._heap[0]
            if self._waiting.get(uid) == due:
                return due
            heapq.heappop(self._heap)
        return None

    def pop_ready(self, now: float, limit: int) -> list[str]:
        """Up to `limit` pods to try now, oldest first."""
        self._promote_due(now)
        out: list[str] = []
        while self._active and len(out) < limit:
            uid, _ = self._active.popitem(last=False)
            out.append(uid)
        if not self._active:
            self._wake.clear()
        return out

    async def wait(self, *, now: float, max_wait: float) -> None:
        """Sleep until a pod is added or moved, a backoff ends, or max_wait passes."""
        if self._active:
            return
        due = self.next_due()
        timeout = max_wait if due is None else max(0.0, min(max_wait, due - now))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)
