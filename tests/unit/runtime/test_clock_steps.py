"""Internal durations (backoff, holds) run on the monotonic clock, so a step of the wall
clock neither stalls a backoff nor releases a hold early; what meets the API server's or
Prometheus's times (bind times, the cycle's ``now``) stays wall time (issue 24, finding 12)."""

from __future__ import annotations

import pytest

from metricsched.core import model
from metricsched.runtime import scheduler as scheduler_mod

from . import test_bind_outcomes as bind_rig

WALL = 1_800_000_000.0  # unix time
MONO = 500.0  # seconds since boot


class Clocks:
    def __init__(self) -> None:
        self.wall = WALL
        self.mono = MONO


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch, clocks: Clocks) -> bind_rig.Rig:
    monkeypatch.setattr(scheduler_mod, "_READ_BACK_S", (0.0, 0.0))
    rig = bind_rig.Rig()
    rig.scheduler._wall = lambda: clocks.wall
    rig.scheduler._monotonic = lambda: clocks.mono
    return rig


def schedule(rig: bind_rig.Rig, clocks: Clocks) -> model.Decision:
    async def go() -> model.Decision:
        decision = rig.scheduler.attempt(rig.pod, now=clocks.wall)
        await rig.scheduler.drain()
        return decision

    return rig.run(go)


class TestABindingWhoseAnswerWasLost:
    """The pod is read back unbound: its node's share is held, the pod backs off."""

    def test_its_backoff_and_hold_are_measured_on_the_monotonic_clock(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        rig.api.binding = lambda: bind_rig.LOST
        decision = schedule(rig, clocks)
        assert rig.queue.next_due() == MONO + 1.0  # the first backoff
        assert rig.cache.holds() == {"uid-web": (decision.node, MONO + scheduler_mod.HOLD_S)}

    def test_a_step_back_of_the_wall_clock_does_not_stall_the_retry(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        rig.api.binding = lambda: bind_rig.LOST
        schedule(rig, clocks)
        clocks.wall -= 3600.0  # NTP steps the clock back an hour
        clocks.mono += 1.0
        assert rig.queue.pop_ready(clocks.mono, 10) == ["uid-web"]

    def test_a_step_forward_does_not_release_the_hold_early(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        rig.api.binding = lambda: bind_rig.LOST
        decision = schedule(rig, clocks)
        node = str(decision.node)
        clocks.wall += 120.0  # past the 90-s hold, by the wall clock only
        clocks.mono += 1.0
        rig.scheduler._wake_on_changes(clocks.mono)
        assert rig.cpu(node) == 1000  # still held: the Binding may yet land
        clocks.mono += scheduler_mod.HOLD_S
        rig.scheduler._wake_on_changes(clocks.mono)
        assert rig.cpu(node) == 0


class TestWhatMeetsTheApiServersTimesStaysWallTime:
    def test_a_bound_pod_counts_from_its_wall_clock_bind_time(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        decision = schedule(rig, clocks)
        state = rig.cache.snapshot(now=clocks.wall).nodes[model.NodeName(str(decision.node))]
        (pod,) = state.pods
        assert pod.bound_at == WALL
        assert state.recent_binds == (WALL,)

    def test_an_unschedulable_pod_backs_off_on_the_monotonic_clock(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        for name in ("node-a", "node-b"):
            rig.cache.remove_node(model.NodeName(name))
        decision = schedule(rig, clocks)
        assert decision.outcome is model.Outcome.UNSCHEDULABLE
        due = rig.queue.next_due()
        assert due is not None and MONO < due < MONO + 3600.0
