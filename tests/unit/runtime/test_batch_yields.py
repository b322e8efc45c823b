"""A batch of pods lets the rest of the event loop (the Lease loop, the heartbeat, the
watches) run between attempts that take long (issue 24, finding 2: a batch of up to 64
pods ran without yielding, so a few expensive pods starved the Lease loop)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

import pytest

from metricsched.core import model
from metricsched.runtime import scheduler as scheduler_mod

from . import test_bind_outcomes as bind_rig


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_800_000_000.0
        self.mono = 500.0


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


class TestABatchOfSlowAttemptsLetsTheLoopRun:
    def test_others_run_between_attempts_that_take_long(
        self, rig: bind_rig.Rig, clocks: Clocks
    ) -> None:
        for i in range(5):
            pod = dataclasses.replace(rig.pod, uid=f"uid-{i}", name=f"web-{i}")
            rig.cache.upsert_pod(pod, ours=True)
        for uid in rig.cache.pending:
            rig.queue.add(uid)
        ticks = 0
        seen: list[int] = []
        real = rig.scheduler.attempt

        def slow_attempt(pod: model.PodInfo, *, now: float) -> model.Decision:
            seen.append(ticks)
            clocks.mono += 0.05  # this attempt took 50 ms of the loop
            if len(seen) == 6:
                stop.set()
            return real(pod, now=now)

        async def go() -> None:
            nonlocal ticks

            async def ticker() -> None:
                nonlocal ticks
                while not stop.is_set():
                    ticks += 1
                    await asyncio.sleep(0)

            rig.scheduler.attempt = slow_attempt  # type: ignore[method-assign]
            rig.scheduler.gates.leading.set()
            other = asyncio.create_task(ticker())
            await rig.scheduler.run(stop)
            await other
            await rig.scheduler.drain()

        stop = asyncio.Event()
        rig.run(go)
        assert len(seen) == 6
        assert all(later > earlier for earlier, later in itertools.pairwise(seen))


class TestDecisionsWaitForTheFirstMetrics:
    def test_no_pod_is_decided_before_the_first_refresh_round(self, rig: bind_rig.Rig) -> None:
        rig.cache.upsert_pod(rig.pod, ours=True)
        rig.queue.add(rig.pod.uid)
        decided: list[str] = []
        real = rig.scheduler.attempt

        def attempt(pod: model.PodInfo, *, now: float) -> model.Decision:
            decided.append(pod.uid)
            stop.set()
            return real(pod, now=now)

        async def go() -> None:
            rig.scheduler.attempt = attempt  # type: ignore[method-assign]
            rig.scheduler.gates.metrics_ready.clear()  # the refresher's first round
            rig.scheduler.gates.leading.set()
            task = asyncio.create_task(rig.scheduler.run(stop))
            await asyncio.sleep(0.2)
            assert decided == []  # leading, consistent, a pod ready: still waiting
            rig.scheduler.gates.metrics_ready.set()
            await asyncio.wait_for(task, 5)
            await rig.scheduler.drain()

        stop = asyncio.Event()
        rig.run(go)
        assert decided == [rig.pod.uid]
