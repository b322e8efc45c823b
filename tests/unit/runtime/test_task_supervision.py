"""No long-lived task of the operator ends silently: one that ends while the operator runs
is logged at ERROR and restarted with backoff, or ends the process with status 1 and the
reason (issue 24, finding 11: the refresher's task ended cancelled after an API outage
and the operator exited 0 without an error line)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from metricsched import cli
from metricsched.runtime import operator as operator_mod
from metricsched.runtime import supervise


def in_a_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test in its own event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Pauses:
    """Records the backoff pauses instead of sleeping (and advances the fake clock)."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.delays: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float, stop: asyncio.Event) -> None:
        self.delays.append(seconds)
        if self.clock is not None:
            self.clock.now += seconds
        await asyncio.sleep(0)


class RefresherLike:
    """A loop awaiting ``wait_for`` as the refresher does; kopf, when its operator exits,
    cancels every task created since it started, including wait_for's inner task."""

    def __init__(self) -> None:
        self.starts = 0
        self.inner: asyncio.Task[bool] | None = None
        self.waiting = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        self.starts += 1
        while not stop.is_set():
            self.inner = asyncio.ensure_future(asyncio.Event().wait())
            self.waiting.set()
            await asyncio.wait_for(self.inner, timeout=3600)


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


class TestATaskThatEndsIsRestarted:
    @in_a_loop
    async def test_a_task_cancelled_from_outside_is_restarted_and_says_so(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        stop = asyncio.Event()
        refresher = RefresherLike()
        pauses = Pauses()
        restarts: list[str] = []
        runner = asyncio.create_task(
            supervise.run_all(
                [supervise.Spec("refresher", lambda: refresher.run(stop))],
                stop=stop,
                sleep=pauses,
                on_restart=restarts.append,
            )
        )
        for _ in range(2):  # two kopf restarts in a row
            await refresher.waiting.wait()
            refresher.waiting.clear()
            assert refresher.inner is not None
            refresher.inner.cancel()  # what kopf does to "hung" tasks
        await refresher.waiting.wait()
        assert refresher.starts == 3
        assert restarts == ["refresher", "refresher"]
        assert pauses.delays == [1.0, 2.0]
        assert any(
            "refresher was cancelled by something other than the operator's stop" in line
            and "restarting it in 1s" in line
            for line in error_lines(caplog)
        )
        assert not runner.done()
        stop.set()
        await runner  # a stop ends supervision quietly

    @in_a_loop
    async def test_a_task_that_raises_or_returns_is_restarted_with_doubling_backoff(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        stop = asyncio.Event()
        clock = FakeClock()
        pauses = Pauses(clock)
        runs = 0

        async def flaky() -> None:
            nonlocal runs
            runs += 1
            if runs == 8:
                stop.set()
                return
            if runs % 2:
                raise RuntimeError("boom")

        await supervise.supervise(
            supervise.Spec("status", flaky), stop=stop, sleep=pauses, clock=clock
        )
        assert runs == 8
        assert pauses.delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
        lines = error_lines(caplog)
        assert "status failed: RuntimeError: boom; restarting it in 1s" in lines
        assert "status returned while the operator was running; restarting it in 2s" in lines

    @in_a_loop
    async def test_a_run_that_lasted_a_minute_resets_the_backoff(self) -> None:
        stop = asyncio.Event()
        clock = FakeClock()
        pauses = Pauses(clock)
        runs = 0

        async def sometimes_long() -> None:
            nonlocal runs
            runs += 1
            if runs == 4:
                clock.now += supervise.HEALTHY_AFTER_S  # this run was healthy a while
            if runs == 5:
                stop.set()
                return
            raise RuntimeError("boom")

        await supervise.supervise(
            supervise.Spec("shadow", sometimes_long), stop=stop, sleep=pauses, clock=clock
        )
        assert pauses.delays == [1.0, 2.0, 4.0, 1.0]

    @in_a_loop
    async def test_a_stop_ends_every_task_without_an_error_line(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        stop = asyncio.Event()
        started = asyncio.Event()

        async def forever() -> None:
            started.set()
            await asyncio.Event().wait()

        runner = asyncio.create_task(
            supervise.run_all(
                [supervise.Spec("a", forever), supervise.Spec("b", forever, restart=False)],
                stop=stop,
                sleep=Pauses(),
            )
        )
        await started.wait()
        stop.set()
        await runner
        assert error_lines(caplog) == []


class TestATaskThatMustNotEndEndsTheProcessLoudly:
    @in_a_loop
    async def test_the_elector_ending_stops_everything_and_raises_the_reason(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        stop = asyncio.Event()
        other_cancelled = asyncio.Event()

        async def elector() -> None:
            await asyncio.sleep(0)
            raise ConnectionError("socket closed")

        async def scheduler() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                other_cancelled.set()

        with pytest.raises(supervise.TaskEndedError) as ended:
            await supervise.run_all(
                [
                    supervise.Spec("scheduler", scheduler),
                    supervise.Spec("leader-election", elector, restart=False),
                ],
                stop=stop,
                sleep=Pauses(),
            )
        assert str(ended.value) == "leader-election failed: ConnectionError: socket closed"
        assert stop.is_set() and other_cancelled.is_set()
        assert (
            "leader-election failed: ConnectionError: socket closed; ending the process"
            in error_lines(caplog)
        )

    def test_the_command_exits_1_with_the_reason(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        async def ended(config: object) -> None:
            raise operator_mod.TaskEndedError(
                "leader-election returned while the operator was running"
            )

        monkeypatch.setattr(operator_mod, "run", ended)
        status = cli.main(["run", "--prometheus-url", "http://127.0.0.1:9"])
        assert status == 1
        assert (
            "metricsched: leader-election returned while the operator was running"
            in capsys.readouterr().err
        )
