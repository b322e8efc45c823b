"""A watch's end proves its connection, on the test bed's kube-apiserver (issue 29).

A watch of a kind that does not change may get no event and no bookmark for minutes, so
the informer asks the API server to end the watches whose silence holds decisions (Pod,
Node) after ``informer.LIVENESS_WATCH_S`` and counts the clean end as the watch being
alive. Here a Node watch that can see nothing (a field selector matching no node) is run
with a 3-s server timeout: each watch must end cleanly at the server, with no line before
it, be counted alive, and be resumed without a re-list or a stall.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest

from metricsched.edges import informer, kube_http
from tests.e2e.conftest import Cluster
from tests.unit.edges.test_informer import Recorder

ENDS = 3  # clean ends to see
SERVER_TIMEOUT_S = 3


class CountingApi(kube_http.AsyncApi):
    """The real client, counting the lines its watches deliver and the timeouts asked."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.lines_seen = 0
        self.timeouts: list[str] = []

    async def lines(
        self, path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[bytes]:
        self.timeouts.append(params["timeoutSeconds"])
        async for line in super().lines(path, params=params, timeout=timeout):
            self.lines_seen += 1
            yield line


def test_a_watch_that_sees_nothing_ends_at_the_servers_timeout_and_counts_as_alive(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer, "LIVENESS_WATCH_S", (SERVER_TIMEOUT_S, SERVER_TIMEOUT_S))
    nobody = f"metadata.name=no-such-node-{uuid.uuid4().hex[:8]}"
    resource = informer.Resource("Node", "/api/v1/nodes", nobody, stall_relist=True)
    sink = Recorder()

    async def go() -> tuple[informer.Reflector, CountingApi]:
        api = CountingApi(cluster.api_client)
        # The idle bound well past the server's timeout: only a stall could reach it.
        reflector = informer.Reflector(api, resource, sink, idle_timeout_s=20.0)
        stop = asyncio.Event()
        task = asyncio.create_task(reflector.run(stop))
        try:
            for _ in range(int((ENDS + 2) * SERVER_TIMEOUT_S * 10 + 100)):
                if reflector.watches > ENDS:  # the ENDS-th watch ended, the next began
                    break
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        return reflector, api

    reflector, api = asyncio.run(go())
    assert reflector.watches > ENDS, f"only {reflector.watches} watches in the time allowed"
    assert api.timeouts[0] == str(SERVER_TIMEOUT_S)
    assert not sink.events and len(sink.lists) == 1
    assert sink.relists == 0 and reflector.stalls == 0 and not sink.failures
    # Every line delivered counts, and so does every watch's end.
    assert sink.alive_lines - api.lines_seen >= ENDS
