"""The TCP fault proxy against a loopback echo server: each mode does what it says."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults import proxy as proxy_mod


def _echo_server() -> int:
    started = threading.Event()
    port: list[int] = []

    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1024):
                w.write(data)
                await w.drain()
        except OSError:
            pass
        w.close()

    async def main() -> None:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port.append(int(server.sockets[0].getsockname()[1]))
        started.set()
        await asyncio.Event().wait()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    started.wait(5)
    return port[0]


@pytest.fixture
def proxy() -> Iterator[proxy_mod.FaultProxy]:
    p = proxy_mod.FaultProxy("127.0.0.1", _echo_server()).start()
    yield p
    p.close()


def _connect(p: proxy_mod.FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", p.port), timeout=1.0)


def test_pass_forwards_both_ways(proxy: proxy_mod.FaultProxy) -> None:
    with _connect(proxy) as s:
        s.sendall(b"hello")
        assert s.recv(16) == b"hello"


def test_refuse_resets_open_and_new_connections(proxy: proxy_mod.FaultProxy) -> None:
    with _connect(proxy) as old:
        old.sendall(b"x")
        assert old.recv(4) == b"x"
        proxy.set_mode("refuse")
        with pytest.raises(ConnectionResetError):
            old.sendall(b"y")
            old.recv(4)
    with pytest.raises(ConnectionResetError), _connect(proxy) as new:
        new.sendall(b"z")
        new.recv(4)


def test_blackhole_answers_nothing_and_delivers_when_it_lifts(proxy: proxy_mod.FaultProxy) -> None:
    proxy.set_mode("blackhole")
    with _connect(proxy) as s:
        s.sendall(b"held")
        with pytest.raises(TimeoutError):
            s.recv(16)
        proxy.set_mode("pass")
        s.settimeout(5)
        assert s.recv(16) == b"held"


def test_reset_forwards_the_request_then_resets_instead_of_answering(
    proxy: proxy_mod.FaultProxy,
) -> None:
    proxy.set_mode("reset", p=1.0)
    with _connect(proxy) as s:
        for _ in range(2):  # the first two chunks count as the TLS handshake
            s.sendall(b"hs")
            assert s.recv(16) == b"hs"
        s.sendall(b"request")
        with pytest.raises(ConnectionResetError):
            s.recv(16)
    assert proxy.counters.resets_injected == 1


def test_stall_existing_freezes_open_connections_but_not_new_ones(
    proxy: proxy_mod.FaultProxy,
) -> None:
    with _connect(proxy) as old:
        old.sendall(b"a")
        assert old.recv(4) == b"a"
        assert proxy.stall_existing() == 1
        old.sendall(b"b")
        with pytest.raises(TimeoutError):
            old.recv(4)
        with _connect(proxy) as new:
            new.sendall(b"c")
            assert new.recv(4) == b"c"


def _ticker_server() -> int:
    """Echoes what it reads; after b"watch" it also sends b"." every 20 ms unasked (a
    watch stream: one request, then only the server talks)."""
    started = threading.Event()
    port: list[int] = []

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        async def tick() -> None:
            while True:
                w.write(b".")
                await w.drain()
                await asyncio.sleep(0.02)

        ticking: asyncio.Task[None] | None = None
        try:
            while data := await r.read(1024):
                if data == b"watch" and ticking is None:
                    ticking = asyncio.ensure_future(tick())
                else:
                    w.write(data)
                    await w.drain()
        except OSError:
            pass
        if ticking is not None:
            ticking.cancel()
        w.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port.append(int(server.sockets[0].getsockname()[1]))
        started.set()
        await asyncio.Event().wait()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    started.wait(5)
    return port[0]


@pytest.fixture
def streams() -> Iterator[proxy_mod.FaultProxy]:
    p = proxy_mod.FaultProxy("127.0.0.1", _ticker_server()).start()
    yield p
    p.close()


def _drain(s: socket.socket, *, quiet: float = 0.3) -> None:
    """Read until nothing comes for ``quiet`` s (what was in flight before a stall)."""
    s.settimeout(quiet)
    with contextlib.suppress(TimeoutError):
        while s.recv(4096):
            pass


def test_stall_streams_freezes_a_quiet_clients_stream_and_nothing_else(
    streams: proxy_mod.FaultProxy,
) -> None:
    with _connect(streams) as watch, _connect(streams) as busy:
        watch.sendall(b"watch")
        assert watch.recv(1)
        time.sleep(0.3)  # the watch's client is silent; the busy one just spoke
        busy.sendall(b"renew")
        assert busy.recv(16) == b"renew"
        assert streams.stall_streams(quiet_s=0.2) == 1
        _drain(watch)
        with pytest.raises(TimeoutError):
            watch.recv(16)  # the server still ticks; nothing reaches the client
        assert streams.stalled_streams() == 1
        busy.sendall(b"bind")
        assert busy.recv(16) == b"bind"  # a connection that talks is not a stream
        with _connect(streams) as new:
            new.sendall(b"list")
            assert new.recv(16) == b"list"  # new connections pass


def test_kept_stalling_freezes_a_stream_opened_just_before_once_it_is_quiet(
    streams: proxy_mod.FaultProxy,
) -> None:
    with _connect(streams) as watch:
        watch.sendall(b"watch")  # just opened: not quiet yet
        assert watch.recv(1)
        assert streams.stall_streams(quiet_s=0.3, keep_s=2.0) == 0
        deadline = time.monotonic() + 2
        while not streams.stalled_streams() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert streams.stalled_streams() == 1
        _drain(watch)
        with pytest.raises(TimeoutError):
            watch.recv(16)  # the server still ticks; nothing reaches the client


def test_a_stalled_connection_whose_client_writes_again_is_released(
    streams: proxy_mod.FaultProxy,
) -> None:
    with _connect(streams) as idle:
        idle.sendall(b"a")
        assert idle.recv(4) == b"a"
        time.sleep(0.3)  # an idle pooled connection looks like a quiet stream
        assert streams.stall_streams(quiet_s=0.2) == 1
        idle.sendall(b"request")  # its next request: it was not a stream
        idle.settimeout(5)
        assert idle.recv(16) == b"request"
        assert streams.stalled_streams() == 0


def test_a_client_giving_up_on_a_stalled_stream_ends_the_connection(
    streams: proxy_mod.FaultProxy,
) -> None:
    watch = _connect(streams)
    watch.sendall(b"watch")
    assert watch.recv(1)
    time.sleep(0.3)
    assert streams.stall_streams(quiet_s=0.2) == 1
    watch.close()  # the client's watchdog fired: the held bytes are dropped
    deadline = time.monotonic() + 5
    while streams.open_connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert streams.open_connections() == 0
