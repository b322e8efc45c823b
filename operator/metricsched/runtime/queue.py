"""The scheduling queue: which pending pod to try next, and when to try again.

Modelled on kube-scheduler's queue:

- **PrioritySort**: the active queue pops the highest ``spec.priority`` first, then the
  oldest pod (creation time), then the order of arrival.
- **Backoff**: a failed attempt earns a backoff of 1 s doubling to 10 s.
- **Unschedulable pods wait for an event**, as in kube-scheduler's unschedulable pool: a
  pod no node could take (or a policy's ``Wait``) is tried again only when an event could
  make it schedulable, once its backoff has ended, or after ``max_unschedulable_s``
  (5 min, kube-scheduler's podMaxInUnschedulablePodsDuration) without one. A pod whose
  attempt failed for another reason (a Binding error, a bug) is retried when its backoff
  ends. So a backlog that fits nowhere costs no cycles until something changes.
- **Queueing hints**: the events that move waiting pods: ``on_cluster_change`` (a node
  added or changed in what the filters read, capacity freed by a pod leaving a node, a
  bound pod's labels or requests changed, a policy added, changed or deleted) moves
  every waiting pod; ``on_metrics_change(policies)`` moves only the pods last decided by
  one of those policies; ``update(uid)`` moves a pod whose own spec changed. A node
  heartbeat is not such an event (the cache tells). A moved pod still in backoff waits
  for its backoff to end.

Every ``now`` given to the queue is ``time.monotonic()``: backoffs are durations, and a
step of the wall clock must neither stall them nor end them early.

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
        max_unschedulable_s: float = 300.0,
        ordering: Callable[[str], Ordering] | None = None,
    ) -> None:
        self._active: dict[str, _Order] = {}
        self._heap: list[tuple[_Order, str]] = []
        self._waiting: dict[str, float] = {}  # uid -> due time of its next attempt
        self._due: list[tuple[float, str]] = []
        self._policy: dict[str, str] = {}  # uid -> policy that last decided it
        self._attempts: dict[str, int] = {}  # failed attempts so far, kept across moves
        self._backoff_until: dict[str, float] = {}  # uid -> end of its current backoff
        self._seq = itertools.count()
        self._ordering = ordering or (lambda _uid: Ordering())
        self._initial = initial_backoff_s
        self._max = max_backoff_s
        self._max_unschedulable = max_unschedulable_s
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
        self._backoff_until.pop(uid, None)

    def attempts(self, uid: str) -> int:
        return self._attempts.get(uid, 0)

    def retry_later(
        self, uid: str, *, now: float, policy: str = "", unschedulable: bool = False
    ) -> float:
        """The attempt failed: back off (1s, 2s, 4s ... max). Returns the backoff chosen.

        ``unschedulable``: no node could take the pod; it is tried again on an event that
        may help it (after its backoff), or after ``max_unschedulable_s``. Otherwise it is
        tried again when the backoff ends. ``policy`` (the policy that decided) lets a
        change of its metrics move it back."""
        self._active.pop(uid, None)
        n = self._attempts.get(uid, 0)
        self._attempts[uid] = n + 1
        delay: float = min(self._max, self._initial * float(2 ** min(n, 30)))
        self._backoff_until[uid] = now + delay
        self._policy[uid] = policy
        self._wait_until(
            uid, now + (max(delay, self._max_unschedulable) if unschedulable else delay)
        )
        return delay

    def _wait_until(self, uid: str, due: float) -> None:
        self._waiting[uid] = due
        heapq.heappush(self._due, (due, uid))

    # --- queueing hints ------------------------------------------------------------------

    def on_cluster_change(self, *, now: float) -> int:
        """Nodes, capacity or policies changed in a way that may help any waiting pod."""
        return self._move(list(self._waiting), now=now)

    def on_metrics_change(self, policies: Iterable[str], *, now: float) -> int:
        """New metric values for ``policies``: retry the pods they last decided."""
        keys = set(policies)
        return self._move([uid for uid in self._waiting if self._policy.get(uid) in keys], now=now)

    def update(self, uid: str, *, now: float) -> None:
        """The pending pod's own spec changed: try it again (after its backoff)."""
        if uid in self._waiting:
            self._move([uid], now=now)
        else:
            self.add(uid)

    def _move(self, uids: list[str], *, now: float) -> int:
        """Activate ``uids`` (waiting pods), or, while backing off, try them when the
        backoff ends. Returns how many were activated or brought forward."""
        moved = 0
        for uid in uids:
            backoff = self._backoff_until.get(uid, 0.0)
            if backoff <= now:
                del self._waiting[uid]
                self._activate(uid)
                moved += 1
            elif backoff < self._waiting[uid]:
                self._wait_until(uid, backoff)
                moved += 1
        return moved

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
