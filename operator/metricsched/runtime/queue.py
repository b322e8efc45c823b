"""The scheduling queue: which pending pod to try next, and when to try again.

Modelled on kube-scheduler's queue:

- **PrioritySort**: the active queue pops the highest ``spec.priority`` first, then the
  oldest pod (creation time), then the order of arrival.
- **Backoff**: a pod that could not be placed waits 1 s doubling to 10 s.
- **Queueing hints**: a waiting pod returns early only on an event that could make it
  schedulable: ``on_cluster_change`` (a node added or changed in what the filters read,
  capacity freed by a pod leaving a node, a policy added, changed or deleted) moves
  every waiting pod; ``on_metrics_change(policies)`` moves only the pods last decided by
  one of those policies. A node heartbeat is not such an event (the cache tells).

Entries are pod UIDs; the pod lives in the cluster cache, so an entry never holds stale
data, and a pod is never lost: ``sync`` re-adds any pending pod of the cache that is
neither active nor waiting (after a restart or a missed event). Runs on the event loop:
no locking, one asyncio.Event to wake the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable

# (-priority, creation time, arrival sequence)
_Order = tuple[int, float, int]


@dataclasses.dataclass(frozen=True, slots=True)
class Ordering:
    """What PrioritySort reads of a pod."""

    priority: int = 0
    created: float = 0.0


class SchedulingQueue:
    def __init__(
        self,
        *,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 10.0,
        ordering: Callable[[str], Ordering] | None = None,
    ) -> None:
        self._active: dict[str, _Order] = {}
        self._heap: list[tuple[_Order, str]] = []
        self._waiting: dict[str, float] = {}  # uid -> due time of its next attempt
        self._due: list[tuple[float, str]] = []
        self._policy: dict[str, str] = {}  # uid -> policy that last decided it
        self._attempts: dict[str, int] = {}  # failed attempts so far, kept across moves
        self._seq = itertools.count()
        self._ordering = ordering or (lambda _uid: Ordering())
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
        self._activate(uid)

    def done(self, uid: str) -> None:
        """The pod is bound or gone: forget it (heap entries go stale and are skipped)."""
        self._active.pop(uid, None)
        self._waiting.pop(uid, None)
        self._attempts.pop(uid, None)
        self._policy.pop(uid, None)

    def attempts(self, uid: str) -> int:
        return self._attempts.get(uid, 0)

    def retry_later(self, uid: str, *, now: float, policy: str = "") -> float:
        """The attempt failed: back off (1s, 2s, 4s ... max). Returns the delay chosen.

        ``policy`` (the policy that decided) lets a change of its metrics move it back."""
        self._active.pop(uid, None)
        n = self._attempts.get(uid, 0)
        self._attempts[uid] = n + 1
        delay: float = min(self._max, self._initial * float(2 ** min(n, 30)))
        due = now + delay
        self._waiting[uid] = due
        self._policy[uid] = policy
        heapq.heappush(self._due, (due, uid))
        return delay

    # --- queueing hints ------------------------------------------------------------------

    def on_cluster_change(self) -> int:
        """Nodes, capacity or policies changed in a way that may help any waiting pod."""
        return self._move(list(self._waiting))

    def on_metrics_change(self, policies: Iterable[str]) -> int:
        """New metric values for ``policies``: retry the pods they last decided."""
        keys = set(policies)
        return self._move([uid for uid in self._waiting if self._policy.get(uid) in keys])

    def _move(self, uids: list[str]) -> int:
        for uid in uids:
            del self._waiting[uid]
            self._activate(uid)
        return len(uids)

    def sync(self, pending: Iterable[str]) -> int:
        """Re-add every pending pod that is neither queued nor backing off; returns how many."""
        added = 0
        for uid in pending:
            if uid not in self:
                self.add(uid)
                added += 1
        return added

    # --- popping -------------------------------------------------------------------------

    def _activate(self, uid: str) -> None:
        o = self._ordering(uid)
        order: _Order = (-o.priority, o.created, next(self._seq))
        self._active[uid] = order
        heapq.heappush(self._heap, (order, uid))
        self._wake.set()

    def _promote_due(self, now: float) -> None:
        while self._due and self._due[0][0] <= now:
            due, uid = heapq.heappop(self._due)
            if self._waiting.get(uid) != due:
                continue  # stale entry
            del self._waiting[uid]
            self._activate(uid)

    def next_due(self) -> float | None:
        while self._due:
            due, uid = self._due[0]
            if self._waiting.get(uid) == due:
                return due
            heapq.heappop(self._due)
        return None

    def pop_ready(self, now: float, limit: int) -> list[str]:
        """Up to ``limit`` pods to try now: highest priority, then oldest, first."""
        self._promote_due(now)
        out: list[str] = []
        while self._heap and len(out) < limit:
            order, uid = heapq.heappop(self._heap)
            if self._active.get(uid) != order:
                continue  # stale: done, moved or re-added since
            del self._active[uid]
            out.append(uid)
        if not self._active:
            self._wake.clear()
            self._heap.clear()
        return out

    async def wait(self, *, now: float, max_wait: float) -> None:
        """Sleep until a pod is added or moved, a backoff ends, or max_wait passes."""
        if self._active:
            return
        due = self.next_due()
        timeout = max_wait if due is None else max(0.0, min(max_wait, due - now))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)
