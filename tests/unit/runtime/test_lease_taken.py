"""A Lease deleted or edited under its leader never gives two binders (issue 28, N14):
the leader closes its fence at once, and a replica that takes a Lease it did not see
expire waits a lease duration: before it creates a deleted Lease, or, taking a released
one, before it writes as leader."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from metricsched.runtime import leader

from .test_leader_fencing import Clock, FakeLeases, _attempt, _elector, _lead


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _edit(leases: FakeLeases, **spec: Any) -> None:
    """Someone with write access to Leases edits it (a new resourceVersion)."""
    assert leases.lease is not None
    leases.version += 1
    leases.lease = {
        "metadata": {**leases.lease["metadata"], "resourceVersion": str(leases.version)},
        "spec": {**leases.lease["spec"], **spec},
    }


class TestALeaderWhoseLeaseIsTakenClosesItsFenceAtOnce:
    def test_a_deleted_lease_closes_the_fence_and_is_not_created_again(
        self, leases: FakeLeases, clock: Clock
    ) -> None:
        a = _elector(leases, clock, "a")
        _lead(a, clock)
        leases.lease = None  # kubectl delete lease
        clock.now += 2.0
        assert not _attempt(a)
        assert a.fence() == 0.0  # not at the renew deadline, 8 s later
        clock.now += 30.0
        assert not _attempt(a)  # a lease it gave up is never resumed, nor re-created
        assert leases.lease is None
        assert leases.writes == ["a"]

    @pytest.mark.parametrize("holder", ["intruder", ""], ids=["another-holder", "no-holder"])
    def test_a_lease_that_names_someone_else_or_no_one_closes_the_fence(
        self, leases: FakeLeases, clock: Clock, holder: str
    ) -> None:
        a = _elector(leases, clock, "a")
        _lead(a, clock)
        _edit(leases, holderIdentity=holder)
        clock.now += 2.0
        assert not _attempt(a)
        assert a.fence() == 0.0
        assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == holder

    def test_a_conflicting_write_between_read_and_renewal_closes_the_fence(
        self, leases: FakeLeases, clock: Clock
    ) -> None:
        a = _elector(leases, clock, "a")
        _lead(a, clock)

        def someone_writes() -> None:
            leases.while_reading = None
            _edit(leases, holderIdentity="b")

        leases.while_reading = someone_writes
        clock.now += 2.0
        assert not _attempt(a)  # read before the edit, renewal refused with 409
        assert a.fence() == 0.0

    def test_the_election_loop_steps_down_when_its_lease_is_deleted(
        self, leases: FakeLeases
    ) -> None:
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
            leases.lease = None

        async def run() -> None:
            await asyncio.wait_for(
                a.run(on_started=started, on_lost=lambda: calls.append("lost")), 10
            )

        asyncio.run(run())
        assert calls == ["started", "lost"]
        assert leases.lease is None
        assert a.fence() == 0.0


class TestAReplicaThatTakesALeaseItDidNotSeeExpireWaitsALeaseDuration:
    @pytest.mark.parametrize("how", ["deleted", "released"])
    def test_never_two_fences_open_when_the_lease_is_deleted_or_freed_under_a_leader(
        self, leases: FakeLeases, clock: Clock, how: str
    ) -> None:
        a, b = _elector(leases, clock, "a"), _elector(leases, clock, "b")
        _lead(a, clock)
        assert not _attempt(b)  # b watches a's record
        if how == "deleted":
            leases.lease = None
        else:
            _edit(leases, holderIdentity="")
        clock.now += 0.5
        if how == "deleted":
            assert not _attempt(b)  # b does not create it yet: a may still be binding
            assert leases.lease is None and not b.leading
        else:
            assert _attempt(b)  # b holds the released Lease at once ...
            assert b.leading and b.fence() == 0.0  # ... but may not write as leader yet
        assert a.fence() > 0  # a has not renewed since: its fence still runs
        while b.fence() == 0.0:
            assert not (a.fence() > 0 and b.fence() > 0)
            if how == "deleted" and b.leading:
                # Created only once a's fence had closed: the Lease never named b while
                # a could still bind (the fault suite's audit: no Binding by a non-holder).
                assert a.fence() == 0.0
            clock.now += 0.5
            _attempt(a)
            _attempt(b)
        assert a.fence() == 0.0
        assert b.fence() == pytest.approx(10.0, abs=0.5)

    def test_the_election_loop_starts_scheduling_only_after_the_lease_was_absent_a_lease_duration(
        self, leases: FakeLeases, clock: Clock
    ) -> None:
        b = leader.Elector(
            lambda: leases,  # type: ignore[arg-type,return-value]
            namespace="ms",
            name="metricsched",
            identity="b",
            timing=leader.Timing(lease_duration_s=15.0, renew_deadline_s=10.0, retry_period_s=0.01),
            clock=clock,
        )
        calls: list[str] = []

        async def run() -> None:
            task = asyncio.create_task(
                b.run(on_started=lambda: calls.append("started"), on_lost=lambda: None)
            )
            for _ in range(20):  # no Lease: not created before it was absent 15 s
                await asyncio.sleep(0.01)
            assert calls == [] and leases.writes == [] and not b.leading
            clock.now += 15.0
            while not calls:
                await asyncio.sleep(0.01)
            task.cancel()

        asyncio.run(asyncio.wait_for(run(), 10))
        assert calls == ["started"]
        assert b.fence() > 0
