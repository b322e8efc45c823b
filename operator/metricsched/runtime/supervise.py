"""Supervision of the operator's long-lived tasks: none ends silently.

Each task is written never to end on an error of its own, but something else can end
it: kopf, when its operator exits (after API errors, before restarting its watches),
cancels every task created since it started, including the inner tasks of
``asyncio.wait_for`` that a loop awaits, and a bug can raise past a loop's guard. A
supervised task that ends while the operator is not stopping is logged at ERROR with
the reason and started again after a backoff (1 s doubling to 30 s, back to 1 s once it
ran for a minute), or, for a task that must not be restarted (the leader elector),
ends the process with ``TaskEndedError`` (exit status 1, the reason on stderr).

The backoff pause creates no task (kopf cannot cancel it) and ends early on ``stop``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

logger = logging.getLogger("metricsched.supervise")

BACKOFF = (1.0, 30.0)  # first pause, cap
HEALTHY_AFTER_S = 60.0  # a run this long resets the backoff


class TaskEndedError(RuntimeError):
    """A task that must not end ended: the process exits so that it restarts clean."""


@dataclasses.dataclass(frozen=True, slots=True)
class Spec:
    """One long-lived task: its name and how to start it again."""

    name: str
    start: Callable[[], Awaitable[None]]
    restart: bool = True  # False: its end ends the process


Sleep = Callable[[float, asyncio.Event], Awaitable[None]]


async def pause(seconds: float, stop: asyncio.Event) -> None:
    """Wait ``seconds`` or until ``stop``, without creating a task."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, 0.5))


async def supervise(
    spec: Spec,
    *,
    stop: asyncio.Event,
    backoff: tuple[float, float] = BACKOFF,
    healthy_after_s: float = HEALTHY_AFTER_S,
    sleep: Sleep = pause,
    clock: Callable[[], float] = time.monotonic,
    on_restart: Callable[[str], None] | None = None,
) -> None:
    """Run ``spec`` until ``stop``; restart it whenever it ends before (see the module)."""
    first, cap = backoff
    delay = first
    while not stop.is_set():
        started = clock()
        error: BaseException | None = None
        try:
            await spec.start()
        except asyncio.CancelledError as e:
            task = asyncio.current_task()
            if stop.is_set() or (task is not None and task.cancelling()):
                raise  # the operator is stopping, or cancelled this supervisor itself
            reason, error = "was cancelled by something other than the operator's stop", e
        except Exception as e:
            reason, error = f"failed: {type(e).__name__}: {e}", e
        else:
            reason = "returned while the operator was running"
        if stop.is_set():
            return
        if not spec.restart:
            logger.error("%s %s; ending the process", spec.name, reason, exc_info=error)
            raise TaskEndedError(f"{spec.name} {reason}")
        if clock() - started >= healthy_after_s:
            delay = first
        logger.error("%s %s; restarting it in %gs", spec.name, reason, delay, exc_info=error)
        if on_restart is not None:
            on_restart(spec.name)
        await sleep(delay, stop)
        delay = min(cap, delay * 2)


async def run_all(
    specs: Sequence[Spec],
    *,
    stop: asyncio.Event,
    **options: object,
) -> None:
    """Supervise every spec until ``stop``; ``TaskEndedError`` if one ends the process
    (the others are cancelled first). ``options`` go to ``supervise``."""
    tasks = [
        asyncio.create_task(supervise(spec, stop=stop, **options), name=spec.name)  # type: ignore[arg-type]
        for spec in specs
    ]
    stopper = asyncio.create_task(stop.wait(), name="stop")
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        failure: BaseException | None = None
        for task in done:
            if task is stopper or task.cancelled():
                continue
            if task.exception() is not None:
                failure = task.exception()
            elif not stop.is_set():
                failure = TaskEndedError(f"the supervisor of {task.get_name()} returned")
        if failure is not None and not isinstance(failure, TaskEndedError):
            logger.error("supervision failed", exc_info=failure)
            failure = TaskEndedError(f"supervision failed: {type(failure).__name__}: {failure}")
    finally:
        stop.set()
        for task in [*tasks, stopper]:
            task.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
    if failure is not None:
        raise failure
