"""The informers LIST in pages of ``--list-page-size`` (issue 28, N8): each page is read
and decoded whole, so a cluster of large pods lowers it to bound what one page holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

from metricsched.edges import informer, kube_http, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers
from tests.unit.runtime import test_watches_and_relist as relist


class PagedApi:
    """LIST answers in pages of the ``limit`` asked for; quiet watches."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.limits: list[str] = []

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str], **_: Any
    ) -> kube_http.Answer:
        self.limits.append(params["limit"])
        start, limit = int(params.get("continue") or 0), int(params["limit"])
        meta: dict[str, Any] = {"resourceVersion": "100"}
        if start + limit < len(self.objects):
            meta["continue"] = str(start + limit)
        body = {"items": self.objects[start : start + limit], "metadata": meta}
        return kube_http.Answer(200, orjson.dumps(body))

    async def lines(
        self, path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[bytes]:
        await asyncio.sleep(3600)
        yield b""


def test_the_cluster_state_lists_in_pages_of_the_configured_size() -> None:
    api = PagedApi([relist._node(f"n{i}", str(i)) for i in range(5)])
    w = relist._watches()
    state = informers.ClusterState(
        api=api,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
        resources=tuple(r for r in informers.RESOURCES if r.kind == "Node"),
        page=2,
    )

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        await asyncio.wait_for(state.reflectors[0].synced.wait(), 5)
        stop.set()
        task.cancel()

    asyncio.run(go())
    assert api.limits == ["2", "2", "2"]
    assert len(w.cache.nodes()) == 5


def test_the_default_page_is_500() -> None:
    assert informer.PAGE == 500
    assert relist._watches().config.list_page_size == 500
