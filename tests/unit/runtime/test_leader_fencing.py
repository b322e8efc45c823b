"""Leader election: one holder, a standby that waits a whole lease, and a fence that
closes before any successor can start."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from metricsched.edges import kube_http
from metricsched.runtime import leader

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ms/leases"


def _answer(status: int, body: dict[str, Any]) -> kube_http.Answer:
    return kube_http.Answer(status=status, data=orjson.dumps(body))


def _status(code: int, reason: str) -> kube_http.Answer:
    return _answer(code, {"kind": "Status", "code": code, "reason": reason, "message": reason})


class FakeLeases:
    """The coordination API's Lease verbs on one in-memory Lease, as the elector's
    transport (``kube_http.AsyncApi.request``) sees them: optimistic concurrency by
    resourceVersion, as the API server does, and error statuses answered, not raised.
    ``fail`` makes every request raise (a transport error) or answer it (a status)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.fail: BaseException | kube_http.Answer | None = None
        # Each write lands, then raises this instead of answering (the answer is lost).
        self.lose_answers: BaseException | None = None
        # Runs (awaited if it is a coroutine) while a read is on the wire, before the API
        # server serves it.
        self.while_reading: Callable[[], Awaitable[None] | None] | None = None
        self.writes: list[str] = []
        self.timeouts: list[float] = []  # each request's total time limit
        self.closed = 0

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        timeout: aiohttp.ClientTimeout | None = None,
        **_: Any,
    ) -> kube_http.Answer:
        assert timeout is not None and timeout.total is not None
        self.timeouts.append(timeout.total)
        if isinstance(self.fail, BaseException):
            raise self.fail
        if self.fail is not None:
            return self.fail
        if (method, path) == ("GET", f"{LEASES}/metricsched"):
            if self.while_reading is not None:
                meanwhile = self.while_reading()
                if meanwhile is not None:
                    await meanwhile
            if self.lease is None:
                return _status(404, "NotFound")
            return _answer(200, self.lease)
        if (method, path) == ("POST", LEASES):
            if self.lease is not None:
                return _status(409, "AlreadyExists")
            return self._store(body)
        assert (method, path) == ("PUT", f"{LEASES}/metricsched"), (method, path)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            return _status(409, "Conflict")
        return self._store(body)

    async def close(self) -> None:
        self.closed += 1

    def _store(self, body: Any) -> kube_http.Answer:
        # The wire form the API server takes (the elector sends no generated models).
        assert body["apiVersion"] == "coordination.k8s.io/v1" and body["kind"] == "Lease"
        self.version += 1
        spec = body["spec"]
        self.lease = {
            "metadata": {"name": body["metadata"]["name"], "resourceVersion": str(self.version)},
            "spec": dict(spec),
        }
        self.writes.append(spec["holderIdentity"])
        if self.lose_answers is not None:
            raise self.lose_answers
        return _answer(200, self.lease)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _elector(leases: FakeLeases, clock: Clock, identity: str) -> leader.Elector:
    return leader.Elector(
        lambda: leases,  # type: ignore[arg-type,return-value]
        namespace="ms",
        name="metricsched",
        identity=identity,
        clock=clock,
    )


def _attempt(e: leader.Elector) -> bool:
    return asyncio.run(e.try_acquire_or_renew())


def _lead(e: leader.Elector, clock: Clock) -> None:
    """``e`` finds no Lease, creates it once it has seen it absent for a lease duration (a
    holder may have deleted it and still be inside its fence: tests/unit/runtime/
    test_lease_taken.py), and leads at once."""
    assert not _attempt(e)
    clock.now += e.timing.lease_duration_s
    assert _attempt(e)
    assert e.fence() == pytest.approx(10.0)


def test_the_first_replica_creates_the_lease_and_leads(leases: FakeLeases, clock: Clock) -> None:
    a = _elector(leases, clock, "a")
    assert not _attempt(a)  # no Lease: absent for a lease duration before it is created
    assert leases.writes == []
    clock.now += 14.9
    assert not _attempt(a)
    clock.now += 0.1
    assert _attempt(a)
    assert a.leading
    assert leases.writes == ["a"]
    assert a.fence() == pytest.approx(10.0)


def test_a_standby_takes_over_only_after_seeing_the_same_record_for_a_whole_lease(
    leases: FakeLeases, clock: Clock
) -> None:
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    _lead(a, clock)
    assert not _attempt(b)  # b starts watching the record now
    clock.now += 14.9
    assert not _attempt(b)
    clock.now += 0.2
    assert _attempt(b)
    assert leases.writes == ["a", "b"]
    assert leases.lease is not None
    assert leases.lease["spec"]["leaseTransitions"] == 1


def test_renewals_keep_a_standby_out(leases: FakeLeases, clock: Clock) -> None:
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    _lead(a, clock)
    for _ in range(20):
        assert not _attempt(b)
        clock.now += 2.0
        assert _attempt(a)
    assert a.leading and not b.leading


@pytest.mark.parametrize(
    "error",
    [
        aiohttp.ClientConnectionError("connection refused"),
        aiohttp.ServerDisconnectedError(),
        _status(500, "etcd timeout"),
        ssl.SSLCertVerificationError("certificate verify failed: a rotated CA"),
        OSError("network unreachable"),
        TimeoutError(),
    ],
)
def test_a_failed_renewal_is_one_failed_attempt_and_the_fence_closes_on_time(
    leases: FakeLeases, clock: Clock, error: BaseException | kube_http.Answer
) -> None:
    """Regression: the client's elector died on the first transport error and the
    leader went on binding without renewing."""
    a = _elector(leases, clock, "a")
    _lead(a, clock)
    leases.fail = error
    clock.now += 9.0
    assert not _attempt(a)
    assert a.fence() == pytest.approx(1.0)
    clock.now += 1.0
    assert a.fence() == 0.0


def test_the_fence_closes_before_any_successor_can_take_the_lease(
    leases: FakeLeases, clock: Clock
) -> None:
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    _lead(a, clock)
    assert not _attempt(b)
    leases.fail = OSError("partition: a cannot renew")
    while a.fence() > 0:
        clock.now += 0.5
        _attempt(a)
    closed_at = clock.now
    leases.fail = None
    while not _attempt(b):
        clock.now += 0.5
    assert clock.now - closed_at >= 5.0 - 0.5  # lease 15 s - renew deadline 10 s


def test_a_lost_lease_is_never_resumed(leases: FakeLeases) -> None:
    a = leader.Elector(
        lambda: leases,  # type: ignore[arg-type,return-value]
        namespace="ms",
        name="metricsched",
        identity="a",
        timing=leader.Timing(lease_duration_s=0.6, renew_deadline_s=0.4, retry_period_s=0.05),
    )
    calls: list[str] = []

    def started() -> None:
        calls.append("started")
        leases.fail = OSError("down")  # every renewal from now on fails

    async def run() -> None:
        await asyncio.wait_for(a.run(on_started=started, on_lost=lambda: calls.append("lost")), 10)

    asyncio.run(run())
    assert calls == ["started", "lost"]
    assert not a.leading
    assert a.fence() == 0.0
    leases.fail = None
    assert not _attempt(a)  # our identity is still on the record, but we gave it up


@pytest.mark.parametrize("lease_exists", [False, True], ids=["create", "replace"])
def test_an_acquiring_write_whose_answer_was_lost_leads_at_the_next_attempt(
    leases: FakeLeases, clock: Clock, lease_exists: bool
) -> None:
    """Regression: the write landed, its answer timed out, and the replica read its own
    record as "a lease we gave up": it never led, and stayed Ready (one replica: an
    outage)."""
    if lease_exists:  # a free Lease (a holder that released it): taken with a PUT
        leases.lease = {"metadata": {"resourceVersion": "7"}, "spec": {"holderIdentity": ""}}
    a = _elector(leases, clock, "a")
    if not lease_exists:  # no Lease: created once seen absent for a lease duration
        assert not _attempt(a)
        clock.now += a.timing.lease_duration_s
    leases.lose_answers = aiohttp.ServerDisconnectedError()  # the write landed, no answer
    assert not _attempt(a)
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "a"
    assert not a.leading and a.fence() == 0.0  # no answer: not leading yet
    leases.lose_answers = None
    clock.now += 2.0
    assert _attempt(a)
    assert a.leading
    assert leases.writes == ["a", "a"]  # renewed with the resourceVersion it read
    if lease_exists:
        assert a.fence() == 0.0  # free, not seen to expire: held a lease duration
        clock.now += 13.0
        assert _attempt(a)
    assert a.fence() == pytest.approx(10.0)


def test_the_election_loop_leads_after_a_lost_acquire_answer(leases: FakeLeases) -> None:
    a = leader.Elector(
        lambda: leases,  # type: ignore[arg-type,return-value]
        namespace="ms",
        name="metricsched",
        identity="a",
        timing=leader.Timing(lease_duration_s=0.6, renew_deadline_s=0.4, retry_period_s=0.05),
    )
    leases.lose_answers = TimeoutError("answer lost")
    started = asyncio.Event()

    def on_started() -> None:
        started.set()

    async def run() -> None:
        task = asyncio.create_task(a.run(on_started=on_started, on_lost=lambda: None))
        await asyncio.sleep(0.2)
        leases.lose_answers = None  # the network is back; the Lease already names us
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()

    asyncio.run(run())
    assert a.leading


def test_a_slow_read_dates_the_record_by_its_answer_not_its_sending(
    leases: FakeLeases, clock: Clock
) -> None:
    """The standby's read is sent, the leader renews, then the read is served and its
    answer arrives 3 s after it was sent. Dated by sending, that renewal would look 3 s
    older than it is and the standby would take over 2 s after the leader's fence closed,
    not the documented lease duration - renew deadline (5 s)."""
    a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
    _lead(a, clock)
    assert not _attempt(b)
    clock.now += 1.0

    async def leader_renews_meanwhile() -> None:
        leases.while_reading = None
        clock.now += 1.0
        assert await a.try_acquire_or_renew()  # a renews while b's read is in flight
        clock.now += 2.0  # b's answer arrives

    leases.while_reading = leader_renews_meanwhile
    assert not _attempt(b)
    leases.fail = OSError("partition: a cannot renew")
    while a.fence() > 0:
        clock.now += 0.25
        _attempt(a)
    closed_at = clock.now
    leases.fail = None
    while not _attempt(b):
        clock.now += 0.25
    assert clock.now - closed_at >= 5.0 - 0.25


def test_timing_must_leave_a_margin() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        leader.Timing(lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)


# --- the Lease's own deadline (issue 28, item 4) ------------------------------------------


def test_the_lease_renews_on_its_own_thread_while_the_scheduling_loop_is_blocked(
    leases: FakeLeases,
) -> None:
    e = leader.Elector(
        lambda: leases,  # type: ignore[arg-type,return-value]
        namespace="ms",
        name="metricsched",
        identity="a",
        timing=leader.Timing(lease_duration_s=0.6, renew_deadline_s=0.4, retry_period_s=0.05),
    )
    started = threading.Event()
    lost: list[str] = []

    async def go() -> None:
        task = asyncio.create_task(
            e.run_on_own_thread(on_started=started.set, on_lost=lambda: lost.append("lost"))
        )
        for _ in range(200):
            await asyncio.sleep(0.02)
            if started.is_set():
                break
        assert started.is_set()
        before = len(leases.writes)
        time.sleep(1.5)  # the scheduling loop blocked for longer than the lease
        assert len(leases.writes) > before + 5  # renewed meanwhile, off this loop
        assert e.fence() > 0.0 and e.leading
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert lost == []
