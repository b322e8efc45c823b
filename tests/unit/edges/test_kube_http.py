"""edges/kube_http.py against a small aiohttp server on loopback: credentials from the
kubernetes client's configuration (refreshed before each request), whole answers read,
error statuses returned or raised, and watch lines split across chunks put back."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from typing import Any

import certifi
import kubernetes
import orjson
import pytest
from aiohttp import web

from metricsched.edges import errors, kube_http

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def serve(routes: dict[str, Handler], body: Callable[[int], Awaitable[None]]) -> None:
    """Run ``body(port)`` against a server with ``routes`` (GET and POST)."""

    async def main() -> None:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_route("*", path, handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            await body(port)
        finally:
            await runner.cleanup()

    asyncio.run(main())


def client(port: int, *, token: str = "t0", hook: Callable[[Any], None] | None = None) -> Any:
    cfg = kubernetes.client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.api_key = {"authorization": f"Bearer {token}"}
    cfg.refresh_api_key_hook = hook
    return kubernetes.client.ApiClient(cfg)


# --- requests ----------------------------------------------------------------------------


def test_a_request_carries_the_token_the_refresh_hook_sets() -> None:
    seen: list[str] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    tokens = iter(["t1", "t2"])

    def refresh(cfg: Any) -> None:
        cfg.api_key = {"authorization": f"Bearer {next(tokens)}"}

    async def body(port: int) -> None:
        api = kube_http.AsyncApi(client(port, hook=refresh))
        first = await api.request("POST", "/api/v1/x", body={"a": 1})
        second = await api.request("POST", "/api/v1/x", body={"a": 1})
        await api.close()
        assert (first.status, second.status) == (201, 201)
        assert first.ok and first.json()["status"] == "Success"

    serve({"/api/v1/x": echo}, body)
    assert seen == ["Bearer t1", "Bearer t2"]


def test_an_error_status_is_returned_with_the_status_message() -> None:
    async def conflict(request: web.Request) -> web.Response:
        return web.json_response(
            {"kind": "Status", "message": "pod p is already assigned", "code": 409}, status=409
        )

    async def body(port: int) -> None:
        api = kube_http.AsyncApi(client(port))
        answer = await api.request("POST", "/c", body={})
        await api.close()
        assert not answer.ok
        error = answer.error()
        assert (error.status, error.message) == (409, "pod p is already assigned")

    serve({"/c": conflict}, body)


class TestJsonObject:
    def test_a_2xx_answer_gives_its_object(self) -> None:
        answer = kube_http.Answer(200, b'{"kind": "Lease"}')
        assert kube_http.json_object(answer) == {"kind": "Lease"}

    @pytest.mark.parametrize("status", [404, 409, 500])
    def test_an_error_status_raises_with_the_apis_message(self, status: int) -> None:
        answer = kube_http.Answer(status, orjson.dumps({"kind": "Status", "message": "no"}))
        with pytest.raises(errors.ApiError) as raised:
            kube_http.json_object(answer)
        assert (raised.value.status, raised.value.message) == (status, "no")

    def test_a_body_that_is_not_an_object_raises(self) -> None:
        with pytest.raises(ValueError, match="JSON object"):
            kube_http.json_object(kube_http.Answer(200, b"[1]"))


def test_a_body_that_is_not_json_still_gives_a_readable_error() -> None:
    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=503, text="upstream connect error")

    async def body(port: int) -> None:
        api = kube_http.AsyncApi(client(port))
        error = (await api.request("GET", "/b")).error()
        await api.close()
        assert (error.status, error.message) == (503, "upstream connect error")

    serve({"/b": broken}, body)


# --- watch streams -------------------------------------------------------------------------


def test_watch_lines_split_across_chunks_come_back_whole() -> None:
    events = [{"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}}} for i in range(5)]
    wire = b"".join(orjson.dumps(e) + b"\n" for e in events)

    async def watch(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true"
        response = web.StreamResponse()
        await response.prepare(request)
        for i in range(0, len(wire), 7):  # chunks that cut lines anywhere
            await response.write(wire[i : i + 7])
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    async def body(port: int) -> None:
        api = kube_http.AsyncApi(client(port))
        timeout = kube_http.aiohttp.ClientTimeout(total=5)
        got = [
            orjson.loads(line)
            async for line in api.lines("/w", params={"watch": "true"}, timeout=timeout)
        ]
        await api.close()
        assert got == events

    serve({"/w": watch}, body)


def test_a_watch_refused_raises_with_its_status() -> None:
    async def gone(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "message": "too old", "code": 410}, status=410)

    async def body(port: int) -> None:
        api = kube_http.AsyncApi(client(port))
        timeout = kube_http.aiohttp.ClientTimeout(total=5)
        with pytest.raises(errors.ApiError) as raised:
            async for _ in api.lines("/w", params={}, timeout=timeout):
                pass
        await api.close()
        assert raised.value.status == 410

    serve({"/w": gone}, body)


# --- a rotated CA or client certificate (issue 28, N11) -----------------------------------


def test_a_ca_file_replaced_on_disk_gives_a_new_pool_built_with_it(tmp_path: Any) -> None:
    ca = tmp_path / "ca.crt"
    shutil.copy(certifi.where(), ca)
    cfg = kubernetes.client.Configuration()
    cfg.host = "https://127.0.0.1:1"
    cfg.ssl_ca_cert = str(ca)
    api = kube_http.AsyncApi(kubernetes.client.ApiClient(cfg))

    async def go() -> None:
        first = api.session()
        assert api.session() is first  # unchanged files: the same pool
        stat = ca.stat()
        os.utime(ca, (stat.st_atime, stat.st_mtime + 60))  # the kubelet swapped the file
        second = api.session()
        assert second is not first and api.tls_reloads == 1
        await asyncio.sleep(0.05)
        assert first.closed
        await second.close()

    asyncio.run(go())


def test_requests_see_a_rotated_ca_file_within_the_check_interval(tmp_path: Any) -> None:
    # The request path looks at the files at most every TLS_CHECK_S (not three stats per
    # Binding): within it the pool stays, past it the rotation is seen.
    ca = tmp_path / "ca.crt"
    shutil.copy(certifi.where(), ca)
    now = [100.0]

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({}, status=201)

    async def body(port: int) -> None:
        api_client = client(port)
        api_client.configuration.ssl_ca_cert = str(ca)
        api = kube_http.AsyncApi(api_client, clock=lambda: now[0])
        await api.request("POST", "/api/v1/x", body={})
        stat = ca.stat()
        os.utime(ca, (stat.st_atime, stat.st_mtime + 60))
        now[0] += kube_http.TLS_CHECK_S / 2
        await api.request("POST", "/api/v1/x", body={})
        assert api.tls_reloads == 0
        now[0] += kube_http.TLS_CHECK_S / 2
        await api.request("POST", "/api/v1/x", body={})
        assert api.tls_reloads == 1
        await api.close()

    serve({"/api/v1/x": ok}, body)
