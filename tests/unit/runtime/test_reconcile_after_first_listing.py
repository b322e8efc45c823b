"""The reconciliation after kopf's first listing does not LIST the pending pods again when
the operator's own LIST of them has just run; it still LISTs the policies, and every later
reconciliation (kopf restarted, a re-list) LISTs both."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from metricsched.edges import kube_http
from metricsched.runtime import reconcile

from . import test_watches_and_relist as relist


class CountingApi:
    """Empty one-page LISTs; the paths asked, in order."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> kube_http.Answer:
        self.paths.append("policies" if "schedulingpolicies" in path else "pods")
        body = {"items": [], "metadata": {"resourceVersion": "20"}}
        return kube_http.Answer(200, json.dumps(body).encode())


async def _until(check: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 5.0)


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconcile, "SETTLE_S", 0.01)


@pytest.mark.parametrize(
    ("listed_ago", "first"),
    [
        (None, ["pods", "policies"]),  # no LIST of the operator's own: both
        (1.0, ["policies"]),  # the operator's LIST just ran: the policies only
        (reconcile.FRESH_S + 1, ["pods", "policies"]),  # too long ago: both
    ],
)
def test_the_first_reconciliation_skips_the_pending_list_only_right_after_the_operators(
    listed_ago: float | None, first: list[str]
) -> None:
    async def scenario() -> None:
        w = relist._watches()
        now = [100.0]
        w.clock = lambda: now[0]
        api = CountingApi()
        r = reconcile.Reconciler(
            api=api,  # type: ignore[arg-type]
            watches=w,
            metrics=w.metrics,
            interval_s=3600,
        )
        if listed_ago is not None:
            r.pending_listed(at=now[0] - listed_ago)
        task = asyncio.create_task(r.run(asyncio.Event()))
        try:
            w.on_pending_pod(None, relist._pod("a", "5"))  # kopf's first listing
            await _until(lambda: len(api.paths) == len(first))
            await asyncio.sleep(0.05)
            assert api.paths == first
            # kopf restarted later (a gap): the next reconciliation LISTs both again
            w.policy_gap("kopf's watches restarted")
            await _until(lambda: len(api.paths) == len(first) + 2)
            assert api.paths[len(first) :] == ["pods", "policies"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
