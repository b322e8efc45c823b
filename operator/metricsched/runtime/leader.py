"""Lease-based leader election with fencing: one replica binds at a time, never two.

An asyncio loop on the coordination.k8s.io Lease (kube-scheduler's mechanism and
defaults: lease 15 s, renew deadline 10 s, retry 2 s), over the transport every other
request of the operator uses (``kube_http``: watches, Bindings, Evictions), so that what
the Lease proves (this replica reaches the API server) holds for its writes too: a CA or
client certificate rotated on disk, or credentials refreshed after a 401, reach the Lease
and the Bindings alike; a replica that renews but could not bind would hold its pods for
good (issue 28, N11). Its connection pool is its own, made and closed on the loop that
runs the election (``run_on_own_thread``: aiohttp sessions belong to one loop).

Why not the kubernetes client's ``leaderelection`` package: its thread catches only
``ApiException``, so one transport error kills it silently while the process keeps
binding; its requests have no timeout, so a hung renew is never noticed; and it measures
the lease with the wall clock.

What this loop guarantees, all on the monotonic clock:

- Every API call has a timeout, and every exception is a failed attempt, never the end
  of the loop. The loop itself is supervised by the operator (it ends the process).
- A standby takes the lease only after it has seen the same record for a whole lease
  duration on its own clock (it does not trust the holder's ``renewTime``), counted from
  when the *answer* that showed the record arrived: a slow read that the API server served
  after the holder's renewal must not date that renewal earlier than it was.
- A write whose answer is lost may still have landed. A record that names this replica
  while it is not leading is therefore its own acquisition (identities are unique per
  process), and the next attempt renews it with its resourceVersion and leads, unless this
  replica already gave up a lease it held (then it never resumes; the process exits).
- **Fencing**: :meth:`Elector.fence` is the time left during which this replica may
  still send a write as leader: ``renew_deadline`` after the *sending* of its last
  successful renewal. A standby can take over no earlier than ``lease_duration`` after
  that moment, so every write a leader sends within the fence, with a request timeout
  no longer than the fence, ends ``lease_duration - renew_deadline`` (5 s) before any
  successor can begin. The binder checks the fence right before each Binding, before
  connecting: a request whose bytes leave with ``x`` seconds of fence left lands safely
  if the network delivers it within ``5 + x`` s (9 s on a reused connection at the 4-s
  minimum; a fresh TCP/TLS connect spends part of ``x``, down to 5 s in the worst case).
- A leader that cannot renew within ``renew_deadline`` stops leading: ``on_lost`` is
  called once and the operator exits, as kube-scheduler does, so Kubernetes restarts it
  clean (and a restarted process re-lists instead of trusting a cache that missed events).
- A Lease deleted or edited under a leader (anyone allowed to write Leases in the
  release's namespace can) must not give two binders (issue 28, N14). The leader closes
  its fence at once and steps down when a renewal finds the Lease gone (404), naming
  another holder or none, or changed between its read and its write (409): it never
  re-creates a Lease it held. A replica that finds no Lease (deleted, or never there)
  creates it only after seeing it absent for a whole lease duration, on its own clock
  from the first answer that showed it absent: a deleted Lease's holder may still be
  inside its fence, which cannot be seen, and by then that fence has closed, so no
  Binding of the old holder comes after the new one holds the Lease. A replica that takes
  a Lease naming no holder (released, not seen to expire) holds it but keeps its own fence
  closed (no Binding, no eviction; ``on_started`` not called) for a whole lease duration
  from the answer that showed it free, the same margin a standby keeps when it takes an
  expired Lease. client-go leads at once in both cases; the price here is that the first
  replica of a new install starts scheduling one lease duration (15 s) after it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import random
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from metricsched.edges import errors, kube_http

logger = logging.getLogger("metricsched.leader")


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry period < renew deadline < lease duration")


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What the Lease says, plus its resourceVersion for optimistic concurrency."""

    holder: str
    duration_s: int
    renew_time: str
    acquire_time: str
    transitions: int
    resource_version: str

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> LeaseRecord:
        spec = body.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_s=int(spec.get("leaseDurationSeconds") or 0),
            renew_time=str(spec.get("renewTime") or ""),
            acquire_time=str(spec.get("acquireTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((body.get("metadata") or {}).get("resourceVersion") or ""),
        )


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


# The Lease's connection pool: one request at a time (a read, then a write), and one
# spare for a connection being replaced.
POOL_SIZE = 2
# Connecting (TCP) takes at most this long within an attempt's time limit.
CONNECT_S = 2.0


class Elector:
    """One replica's side of the election, on one event loop (its own thread's in the
    operator: ``run_on_own_thread``).

    ``connect`` makes the transport (``kube_http.AsyncApi``); it is called on the loop
    that runs the election, on its first request, and the transport is closed there
    when ``run`` ends. ``fence()`` may be read from any thread (it reads two floats)."""

    def __init__(
        self,
        connect: Callable[[], kube_http.AsyncApi],
        *,
        namespace: str,
        name: str,
        identity: str,
        timing: Timing = Timing(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._http: kube_http.AsyncApi | None = None
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self._clock = clock
        self._leading = False
        self._lost = False  # led once and stepped down: never lead again (the process exits)
        self._renewed_at = -float("inf")  # monotonic time the last good renewal was sent
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        # Monotonic time before which this replica must not write as leader even while it
        # holds the Lease: it acquired one it did not see expire (see the module docstring).
        self._hold_until = -float("inf")
        # Monotonic time of the first answer, of those since, that showed no Lease at all.
        self._absent_since: float | None = None
        # Why the Lease is no longer ours although a renewal was not due to fail yet ("" if
        # it is): set from the worker thread, read by ``fence`` from any thread.
        self._revoked = ""

    # --- what the rest of the operator reads --------------------------------------------

    @property
    def leading(self) -> bool:
        return self._leading

    def fence(self) -> float:
        """Seconds during which this replica may still send a write as leader (0 if not)."""
        if self._clock() < self._hold_until:
            return 0.0
        return self._renewal_left()

    def _renewal_left(self) -> float:
        """Seconds before the renew deadline passes: how long this replica holds the Lease."""
        if not self._leading or self._revoked:
            return 0.0
        return max(0.0, self._renewed_at + self.timing.renew_deadline_s - self._clock())

    # --- the loop -------------------------------------------------------------------------

    async def run(self, *, on_started: Callable[[], None], on_lost: Callable[[], None]) -> None:
        """Acquire, then renew until the renew deadline passes without success.

        Returns only after leadership was lost (``on_lost`` called) or when cancelled;
        closes the transport either way."""
        try:
            await self._run(on_started=on_started, on_lost=on_lost)
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the transport (on the loop it was made on); the next request makes one."""
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def _run(self, *, on_started: Callable[[], None], on_lost: Callable[[], None]) -> None:
        while True:
            ok = await self.try_acquire_or_renew()
            if ok and self._leading:
                break
            await asyncio.sleep(self.timing.retry_period_s * (1 + 0.2 * random.random()))
        logger.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
        held = self._hold_until - self._clock()
        if held > 0:
            logger.warning(
                "lease %s/%s was deleted or released, not seen to expire: not scheduling for"
                " %.0fs, while a previous holder may still be inside its fence",
                self.namespace,
                self.name,
                held,
            )
        while self._clock() < self._hold_until:
            await asyncio.sleep(min(self.timing.retry_period_s, self._hold_until - self._clock()))
            await self.try_acquire_or_renew()
            if self._renewal_left() <= 0.0:
                self._step_down(on_lost)
                return
        on_started()
        while True:
            await asyncio.sleep(self.timing.retry_period_s)
            await self.try_acquire_or_renew()
            if self._renewal_left() <= 0.0:
                self._step_down(on_lost)
                return

    async def run_on_own_thread(
        self, *, on_started: Callable[[], None], on_lost: Callable[[], None]
    ) -> None:
        """``run`` on a thread and event loop of its own, so that the Lease keeps its
        deadline whatever the scheduling loop is doing (a long cycle, a flood of events):
        renewals are timed and sent there; ``on_started`` and ``on_lost`` are called back
        on the caller's loop. ``fence`` reads two floats and is safe from any thread.
        Cancelling this coroutine stops the thread's loop (within 0.2 s) and waits for it."""
        caller = asyncio.get_running_loop()
        stop = threading.Event()

        def started() -> None:
            caller.call_soon_threadsafe(on_started)

        def lost() -> None:
            caller.call_soon_threadsafe(on_lost)

        async def until_stopped() -> None:
            task = asyncio.ensure_future(self.run(on_started=started, on_lost=lost))
            while not task.done():
                if stop.is_set():
                    task.cancel()
                await asyncio.wait([task], timeout=0.2)
            if not task.cancelled():
                task.result()  # an error of the loop is the caller's to see

        worker = asyncio.ensure_future(
            asyncio.to_thread(asyncio.run, until_stopped())  # the Lease's own loop
        )
        try:
            await asyncio.shield(worker)
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker
            raise

    def _step_down(self, on_lost: Callable[[], None]) -> None:
        self._leading, self._lost = False, True
        if self._revoked:
            logger.error("lease %s/%s %s: stepping down", self.namespace, self.name, self._revoked)
        else:
            logger.error(
                "lease %s/%s not renewed within %gs: stepping down",
                self.namespace,
                self.name,
                self.timing.renew_deadline_s,
            )
        on_lost()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this replica holds the lease afterwards. Never raises."""
        sent_at = self._clock()
        # A renewal answered after the fence closed must not reopen it: the attempt's time
        # limit (its read and its write together) is what is left of the fence (or a retry
        # period when not leading), always shorter than the renew deadline.
        budget = self._renewal_left() if self._leading else self.timing.retry_period_s
        budget = max(0.5, min(budget, self.timing.retry_period_s * 2))
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(budget):
                ok = await self._attempt(deadline=loop.time() + budget)
        except TimeoutError:
            logger.warning("lease request timed out after %.1fs", budget)
            return False
        except Exception as e:  # every failure is one failed attempt, never the loop's end
            logger.warning("lease request failed: %s", errors.describe(e))
            return False
        if ok:
            self._leading = True
            self._renewed_at = sent_at
        return ok

    # --- one attempt ---------------------------------------------------------------------

    def _transport(self) -> kube_http.AsyncApi:
        if self._http is None:
            self._http = self._connect()
        return self._http

    async def _request(
        self, method: str, path: str, *, deadline: float, body: Any = None
    ) -> kube_http.Answer:
        """One request within the attempt's time limit (``deadline``, the loop's clock)."""
        left = max(0.1, deadline - asyncio.get_running_loop().time())
        return await self._transport().request(
            method,
            path,
            body=body,
            timeout=kube_http.timeout(left, connect_s=min(CONNECT_S, left)),
        )

    async def _attempt(self, *, deadline: float) -> bool:
        answer = await self._request("GET", self._path(self.name), deadline=deadline)
        if answer.status == 404:
            if self._leading:
                self._revoke("was deleted")  # never re-created under a standby's feet
                return False
            if self._lost:
                return False
            # Gone, or never there: a holder may have been inside its fence when it was
            # deleted, and it cannot be seen. Create it only after seeing it absent for a
            # whole lease duration (on this replica's clock, from the first answer that
            # showed it absent): by then any previous holder's fence has closed, and no
            # Binding of its can come after this replica holds the Lease.
            absent_at = self._clock()
            if self._absent_since is None:
                self._absent_since = absent_at
            if absent_at - self._absent_since < self.timing.lease_duration_s:
                return False
            body = self._body(None, acquiring=True)
            created = await self._request("POST", self._path(), deadline=deadline, body=body)
            kube_http.json_object(created)  # an error status (409: someone else made it) raises
            return True
        current = kube_http.json_object(answer)
        # The record is as the API server read it somewhere between sending and now: date
        # it by the answer's arrival, so that a slow read never makes it look older.
        received_at = self._clock()
        self._absent_since = None
        record = LeaseRecord.from_body(current)
        if self._leading and record.holder != self.identity:
            self._revoke(f"now names {record.holder!r} as its holder")
            return False
        if record.holder == self.identity:
            if self._lost:
                return False  # our record, but we gave it up: never resume a lost lease
            if not self._leading:
                # Our acquiring write landed but its answer was lost: the lease is ours,
                # and renewing it (with its resourceVersion) is what makes us lead.
                logger.info(
                    "lease %s/%s names us (%s): our acquiring write landed unanswered",
                    self.namespace,
                    self.name,
                    self.identity,
                )
        else:
            if record != self._observed:
                self._observed, self._observed_at = record, received_at
            free = not record.holder
            expired = received_at - self._observed_at >= max(
                record.duration_s, self.timing.lease_duration_s
            )
            if not (free or expired):
                return False
            if free and not expired:
                self._hold(received_at)
        body = self._body(record, acquiring=record.holder != self.identity)
        written = await self._request("PUT", self._path(self.name), deadline=deadline, body=body)
        if written.status == 409:  # someone else wrote first (our resourceVersion is old)
            if self._leading:
                self._revoke("was written by someone else between our read and renewal")
            return False
        kube_http.json_object(written)  # any other error status raises
        return True

    def _path(self, *name: str) -> str:
        segments = ("namespaces", self.namespace, "leases", *name)
        return "/apis/coordination.k8s.io/v1/" + "/".join(
            urllib.parse.quote(s, safe="") for s in segments
        )

    def _revoke(self, why: str) -> None:
        """The Lease is not ours any more: the fence closes now, not at the renew deadline."""
        self._revoked = why
        logger.error("lease %s/%s %s: fence closed", self.namespace, self.name, why)

    def _hold(self, seen_at: float) -> None:
        """Acquiring a Lease not seen to expire: no write as leader for a lease duration
        from ``seen_at`` (when the answer showing it gone or free arrived)."""
        self._hold_until = max(self._hold_until, seen_at + self.timing.lease_duration_s)

    def _body(self, record: LeaseRecord | None, *, acquiring: bool) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.UTC)
        acquired = now if acquiring or record is None else _parse_time(record.acquire_time, now)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record is not None and record.resource_version:
            metadata["resourceVersion"] = record.resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.timing.lease_duration_s),
                "renewTime": _micro_time(now),
                "acquireTime": _micro_time(acquired),
                "leaseTransitions": (
                    (record.transitions + (1 if acquiring else 0)) if record else 0
                ),
            },
        }


def _micro_time(t: datetime.datetime) -> str:
    """A Lease's MicroTime as client-go writes it: RFC 3339, microseconds, UTC."""
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str, default: datetime.datetime) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return default
