"""The informers LIST one kind at a time (at start every kind would list at once): the
decoded pages of two kinds are never held together. Each LIST still completes whole, and
every kind is listed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from metricsched.edges import kube_http, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers

from . import test_watches_and_relist as relist


class PagedApi:
    """Two-page LISTs of every kind, each page answered after a pause; which kinds' LISTs
    were under way at once."""

    def __init__(self) -> None:
        self.under_way: set[str] = set()
        self.most_at_once = 0
        self.pages: list[str] = []

    async def request(
        self, method: str, path: str, *, params: dict[str, str], **_: Any
    ) -> kube_http.Answer:
        kind = path + "?" + params.get("fieldSelector", "")
        self.under_way.add(kind)
        self.most_at_once = max(self.most_at_once, len(self.under_way))
        await asyncio.sleep(0.001)
        self.pages.append(kind)
        last = "continue" in params
        if last:
            self.under_way.discard(kind)
        meta = {"resourceVersion": "7"} | ({} if last else {"continue": "next"})
        return kube_http.Answer(200, json.dumps({"items": [], "metadata": meta}).encode())


def test_the_informers_list_one_kind_at_a_time() -> None:
    w = relist._watches()
    api = PagedApi()
    state = informers.ClusterState(
        api=api,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
    )

    async def start() -> None:
        await asyncio.gather(*(r.list_once() for r in state.reflectors))

    asyncio.run(start())
    assert api.most_at_once == 1
    assert len(api.pages) == 2 * len(informers.RESOURCES)  # every kind, whole
    assert all(api.pages[i] == api.pages[i + 1] for i in range(0, len(api.pages), 2))
    assert state.consistent.is_set()
