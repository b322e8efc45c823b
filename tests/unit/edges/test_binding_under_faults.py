"""Binding when things go wrong: fencing, lost answers read back, connections reused."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import edges_fakes as fakes
import kubernetes.client
import pytest
from aiohttp import web

from metricsched.edges import binder, events, kube_http, pod_status, wire

Kind = binder.BindOutcome


def _pod_body(*, uid: str = "uid-123", node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-7d4", "namespace": "shop", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": {"nodeName": node}}


async def _read_back(api: kube_http.AsyncApi) -> binder.BindResult:
    return await binder.read_back(
        api, namespace="shop", name="web-7d4", uid="uid-123", node="node-3"
    )


async def _bind(api: kube_http.AsyncApi, **kw: Any) -> binder.BindResult:
    return await binder.bind(
        api, namespace="shop", name="web-7d4", uid="uid-123", node="node-3", **kw
    )


# --- fencing ----------------------------------------------------------------------------


def test_a_fenced_binding_is_not_sent(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    result = run(_bind(writes_api, fence=lambda: wire.MIN_FENCE_S / 2))
    assert result.kind is Kind.FENCED
    assert fake_kube.requests == []


def test_a_binding_within_the_fence_is_sent_with_a_timeout_no_longer_than_the_fence(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[object] = []
    original = writes_api.session

    def spy() -> Any:
        session = original()
        request = session.request

        def record(*args: Any, **kwargs: Any) -> Any:
            timeout = kwargs["timeout"]
            seen.append((timeout.total, timeout.sock_connect))
            return request(*args, **kwargs)

        monkeypatch.setattr(session, "request", record)
        return session

    monkeypatch.setattr(writes_api, "session", spy)
    result = run(_bind(writes_api, fence=lambda: 6.0, timeout_s=10.0))
    assert result.kind is Kind.BOUND
    assert seen == [(6.0, kube_http.CONNECT_S)]


def test_the_fence_is_read_again_before_a_binding_is_sent_again_after_a_401(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = lambda r: (401, fakes.status_body(401, "Unauthorized", "Unauthorized"))
    left = iter((10.0, wire.MIN_FENCE_S / 2))
    result = run(_bind(writes_api, fence=lambda: next(left)))
    assert result.kind is Kind.FENCED
    assert len(fake_kube.requests) == 1  # the 401'd one only: the second was not sent


# --- read-back of a lost answer ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "kind", "node"),
    [
        (_pod_body(node="node-3"), Kind.BOUND, "node-3"),
        (_pod_body(node="node-9"), Kind.ALREADY_BOUND, "node-9"),
        (_pod_body(), Kind.NOT_BOUND, ""),
        (_pod_body(uid="uid-456", node=""), Kind.GONE, ""),
        (_pod_body(node="", deleting=True), Kind.GONE, ""),
    ],
)
def test_a_lost_binding_answer_is_resolved_by_reading_the_pod(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    *,
    pod: dict[str, Any],
    kind: binder.BindOutcome,
    node: str,
) -> None:
    fake_kube.responder = lambda r: (200, pod)
    result = run(_read_back(writes_api))
    assert (result.kind, result.node) == (kind, node)
    (request,) = fake_kube.requests
    assert (request.method, request.path) == ("GET", "/api/v1/namespaces/shop/pods/web-7d4")


def test_a_deleted_pod_reads_back_as_gone(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    assert run(_read_back(writes_api)).kind is Kind.GONE


def test_a_read_back_that_fails_too_stays_unknown(run: fakes.Runner) -> None:
    api = fakes.async_api(f"http://127.0.0.1:{fakes.closed_port()}")
    assert run(_read_back(api)).kind is Kind.UNKNOWN
    run(api.close())


def test_a_read_back_answered_with_an_error_stays_unknown(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = lambda r: (500, fakes.status_body(500, "InternalError", "etcd down"))
    result = run(_read_back(writes_api))
    assert (result.kind, result.http_status) == (Kind.UNKNOWN, 500)
    assert "etcd down" in result.message


# --- lost answers on the wire (an aiohttp server on loopback) -----------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _serve(binding: Handler, body: Callable[[kube_http.AsyncApi], Awaitable[None]]) -> list[str]:
    """Run ``body`` with an API whose Bindings ``binding`` answers and whose pod reads
    say where the last Binding that reached the server went; the requests, in order."""
    seen: list[str] = []
    landed: dict[str, str] = {}

    async def post_binding(request: web.Request) -> web.StreamResponse:
        target = (await request.json())["target"]["name"]
        seen.append(f"bind {target}")
        landed["node"] = target  # the API server accepted it, whatever the client hears
        return await binding(request)

    async def get_pod(request: web.Request) -> web.StreamResponse:
        seen.append("read pod")
        return web.json_response(_pod_body(node=landed.get("node", "")))

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/shop/pods/web-7d4/binding", post_binding)
        app.router.add_get("/api/v1/namespaces/shop/pods/web-7d4", get_pod)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        api = fakes.async_api(f"http://127.0.0.1:{port}")
        try:
            await body(api)
        finally:
            await api.close()
            await runner.cleanup()

    asyncio.run(main())
    return seen


async def _reset(request: web.Request) -> web.StreamResponse:
    """Accepted, then the connection breaks before the answer (a reset, a proxy restart)."""
    assert request.transport is not None
    request.transport.abort()
    return web.Response(status=201)


def test_a_connection_reset_after_the_binding_was_sent_reads_back_to_bound() -> None:
    results: list[binder.BindResult] = []

    async def body(api: kube_http.AsyncApi) -> None:
        sent = await _bind(api)
        results.append(sent)
        results.append(await _read_back(api))

    seen = _serve(_reset, body)
    sent, read = results
    assert (sent.kind, sent.http_status) == (Kind.UNKNOWN, None)
    assert (read.kind, read.node) == (Kind.BOUND, "node-3")
    assert seen == ["bind node-3", "read pod"]


def test_an_answer_slower_than_the_timeout_is_unknown_not_failed() -> None:
    results: list[binder.BindResult] = []

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1.0)
        return web.json_response({"kind": "Status"}, status=201)

    async def body(api: kube_http.AsyncApi) -> None:
        results.append(await _bind(api, timeout_s=0.2))
        results.append(await _read_back(api))

    seen = _serve(slow, body)
    sent, read = results
    assert sent.kind is Kind.UNKNOWN
    assert "Timeout" in sent.message
    assert read.kind is Kind.BOUND  # the server took it: the read-back says so
    assert seen == ["bind node-3", "read pod"]


# --- connections ------------------------------------------------------------------------


@pytest.fixture
def keep_alive_kube() -> Iterator[fakes.FakeServer]:
    server = fakes.FakeServer(fakes.kube_default, keep_alive=True)
    yield server
    server.close()


def test_a_binding_after_other_writes_on_one_pooled_connection_is_not_lost(
    keep_alive_kube: fakes.FakeServer, run: fakes.Runner
) -> None:
    """Regression: answers released unread left their body on the pooled connection and
    the next request on it (here the Binding) failed with ResponseNotReady."""
    configuration = kubernetes.client.Configuration()
    configuration.host = keep_alive_kube.url
    api = kube_http.AsyncApi(kubernetes.client.ApiClient(configuration), limit=1)
    recorder = events.EventRecorder(api, component="metricsched")
    pod = events.ObjectRef.pod(namespace="shop", name="web-7d4", uid="uid-123")

    async def go() -> None:
        for _ in range(3):
            written = await pod_status.set_pod_scheduled_false(
                api, namespace="shop", name="web-7d4", message="0/3 nodes", current_conditions=()
            )
            assert written is pod_status.StatusWrite.WRITTEN
            recorded = await recorder.record(
                pod, event_type="Warning", reason="FailedScheduling", message="x"
            )
            assert recorded is not events.Recorded.FAILED
            result = await _bind(api)
            assert result.kind is Kind.BOUND, result.message
        await api.close()

    run(go())
    assert len(keep_alive_kube.received("POST", "/binding")) == 3
