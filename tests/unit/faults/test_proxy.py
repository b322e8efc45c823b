"""The TCP fault proxy against a loopback echo server: each mode does what it says."""

from __future__ import annotations

import asyncio
import socket
import threading
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
