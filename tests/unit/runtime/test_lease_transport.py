"""The Lease goes over the operator's one transport (``kube_http``), on a pool of its own
made and closed on the Lease's own loop (issue 28, N11): here against a small Lease
server on loopback with the API server's optimistic concurrency."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import kubernetes
import pytest
from aiohttp import web

from metricsched.edges import kube_http
from metricsched.runtime import leader

FAST = leader.Timing(lease_duration_s=0.6, renew_deadline_s=0.4, retry_period_s=0.05)
PATH = "/apis/coordination.k8s.io/v1/namespaces/ms/leases"


class LeaseServer:
    """GET, POST and PUT of one Lease: 404 when absent, 409 on a stale resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.requests: list[tuple[str, str]] = []  # (method, Authorization)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", PATH, self.handle)
        app.router.add_route("*", PATH + "/{name}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.headers.get("Authorization", "")))
        if request.method == "GET":
            if self.lease is None:
                return web.json_response({"kind": "Status", "message": "not found"}, status=404)
            return web.json_response(self.lease)
        body = await request.json()
        if request.method == "POST" and self.lease is not None:
            return web.json_response({"kind": "Status", "message": "exists"}, status=409)
        if request.method == "PUT":
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return web.json_response({"kind": "Status", "message": "conflict"}, status=409)
        self.store(body["spec"])
        return web.json_response(self.lease)

    def store(self, spec: dict[str, Any]) -> None:
        self.version += 1
        self.lease = {"metadata": {"resourceVersion": str(self.version)}, "spec": spec}

    def puts(self) -> int:
        return sum(1 for method, _ in self.requests if method == "PUT")


def _client(port: int) -> Any:
    cfg = kubernetes.client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.api_key = {"authorization": "Bearer lease-token"}
    return kubernetes.client.ApiClient(cfg)


class Transports:
    """``Elector``'s ``connect``: each AsyncApi it made, and the thread it was made on."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.made: list[tuple[kube_http.AsyncApi, int]] = []

    def __call__(self) -> kube_http.AsyncApi:
        api = kube_http.AsyncApi(_client(self.port), limit=leader.POOL_SIZE)
        self.made.append((api, threading.get_ident()))
        return api


async def _serve(server: LeaseServer) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def _until(check: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


def test_the_lease_is_created_and_renewed_over_kube_http_on_its_own_thread() -> None:
    server = LeaseServer()
    started = threading.Event()

    async def go() -> None:
        runner, port = await _serve(server)
        transports = Transports(port)
        elector = leader.Elector(
            transports, namespace="ms", name="lease", identity="a", timing=FAST
        )
        task = asyncio.create_task(
            elector.run_on_own_thread(on_started=started.set, on_lost=lambda: None)
        )
        try:
            await _until(started.is_set)
            before = server.puts()
            await _until(lambda: server.puts() >= before + 5)  # renewals over HTTP
            assert elector.fence() > 0.0
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await runner.cleanup()
        [(api, thread)] = transports.made
        assert thread != threading.get_ident()  # made on the Lease's own loop ...
        assert api._session is not None and api._session.closed  # ... and closed there

    asyncio.run(go())
    methods = [m for m, _ in server.requests]
    assert methods[0] == "GET" and "POST" in methods  # absent, then created
    assert {auth for _, auth in server.requests} == {"Bearer lease-token"}


def test_a_renewal_answered_409_closes_the_fence_and_ends_the_leadership() -> None:
    server = LeaseServer()
    lost = threading.Event()

    async def go() -> None:
        runner, port = await _serve(server)
        elector = leader.Elector(
            Transports(port), namespace="ms", name="lease", identity="a", timing=FAST
        )
        started = asyncio.Event()
        task = asyncio.create_task(elector.run(on_started=started.set, on_lost=lost.set))
        try:
            await asyncio.wait_for(started.wait(), 5)
            assert server.lease is not None
            server.store({**server.lease["spec"], "holderIdentity": "intruder"})
            await _until(lost.is_set)
            assert elector.fence() == 0.0 and not elector.leading
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await runner.cleanup()

    asyncio.run(go())
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "intruder"
