"""Query slots shared round-robin across namespaces (tenants), not first come first served.

The refresher runs at most a few Prometheus queries at once. With one FIFO semaphore a
namespace with many slow queries kept every slot busy while another namespace's only
query waited behind all of them (40 slow queries of one namespace delayed another's by
5 s; at scale, minutes of fallback). Here, when a slot frees, it goes to the next
namespace in turn that has a query waiting, and within a namespace to its oldest waiter:
a namespace waits for at most one slot's turn per other waiting namespace, however many
queries the others have.

Runs on the event loop only; no I/O. Must not: hold a slot for a waiter that was
cancelled, or let a slot be lost (every acquired slot is released by ``slot``'s exit).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator


class FairSlots:
    """``concurrency`` slots; ``async with slots.slot(tenant):`` holds one."""

    def __init__(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError("need at least one slot")
        self._free = concurrency
        # Tenants with waiters, in turn order (dict order: the first is served next).
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}

    @property
    def free(self) -> int:
        return self._free

    def waiting(self) -> dict[str, int]:
        """Waiters per tenant (for tests and logs)."""
        return {tenant: len(queue) for tenant, queue in self._waiting.items()}

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        await self._acquire(tenant)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, tenant: str) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, collections.deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot, then cancelled before using it
            else:
                self._forget(tenant, waiter)
            raise

    def _release(self) -> None:
        """Hand the slot to the next tenant in turn (its oldest waiter), else free it."""
        while self._waiting:
            tenant = next(iter(self._waiting))
            queue = self._waiting.pop(tenant)
            waiter = queue.popleft()
            if queue:
                self._waiting[tenant] = queue  # to the back of the turn order
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def _forget(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(waiter)
        if not queue:
            del self._waiting[tenant]
