#!/usr/bin/env python3
"""A TCP fault proxy: put it between a client and a server and break the path on demand.

One proxy per client (per operator replica), in front of kube-apiserver or Prometheus.
TLS stays end to end: the proxy sees only bytes, so faults act per TCP chunk, which for a
TLS client is one write burst, roughly one request.

Modes, switchable at run time (``FaultProxy.set_mode``), each applying to existing and new
connections alike:

- ``pass``: forward both ways.
- ``refuse``: reset every open connection, and reset each new one as soon as it is
  accepted (a server that went away: ECONNRESET / "connection refused" to the client).
- ``blackhole``: accept, forward nothing, answer nothing; open connections stall too (a
  partition). Leaving blackhole resumes the stalled connections with the bytes they held,
  as TCP retransmission does when a partition heals, except on connections one side
  closed meanwhile: those are reset and their held bytes dropped (a client whose request
  timed out and closed its socket does not have that request applied later).
- ``delay``: hold each chunk ``delay_ms`` before forwarding it, in both directions.
- ``reset``: for a fraction ``p`` of client→server chunks, forward the chunk, then drop
  the server's answer and reset the client connection (the request was applied, the
  client never learns it). A connection's first two client chunks (the TLS handshake)
  are never picked. Seeded, so a run is reproducible.

Beside the modes: ``stall_existing()`` freezes the connections open right now while new
ones pass (a hung watch or a hung pooled connection), ``stall_streams()`` freezes only the
server→client side of the open connections whose client has been silent for a while (the
long-lived streams: watches), ``reset_all()`` resets every open connection.

Why ``stall_streams`` tells streams apart by silence: TLS hides the request path
(``watch=true``), but over HTTP/1.1 a watch is one request and then only the server
talks, while the Lease renewal and Bindings write a request every few seconds. An idle
pooled connection looks like a quiet stream until one side speaks, so a stream-stalled
connection whose client writes again is released: it was about to carry a request.

Runs its own asyncio loop in a daemon thread (``FaultProxy.start()``), or as a process:

    python hack/faultproxy.py --listen 127.0.0.1:50600 --upstream 127.0.0.1:50443 \\
        --control 127.0.0.1:50601    # then: echo 'mode blackhole' | nc 127.0.0.1 50601

Stdlib only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import socket
import struct
import sys
import threading
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar, get_args

Mode = Literal["pass", "refuse", "blackhole", "delay", "reset"]
MODES: tuple[str, ...] = get_args(Mode)
CHUNK = 65536
T = TypeVar("T")


@dataclasses.dataclass
class Counters:
    """What the proxy did, for the test's log and the report."""

    accepted: int = 0
    refused: int = 0
    resets_injected: int = 0
    chunks_forwarded: int = 0


class _Conn:
    """One proxied connection: the client's and the upstream's stream pair."""

    def __init__(self, client_w: asyncio.StreamWriter) -> None:
        self.client_w = client_w
        self.upstream_w: asyncio.StreamWriter | None = None
        self.stalled = False  # frozen by stall_existing(); independent of the mode
        # Frozen server→client by stall_streams(); the client writing again releases it.
        self.stream_stalled = False
        self.client_spoke = 0.0  # loop time of the client's last chunk (or the accept)
        self.doomed = False  # reset mode: drop the next answer and reset the client
        self.sent = 0  # client→server chunks forwarded
        self.closed = False

    def abort(self) -> None:
        """Reset the client side (RST, not FIN) and drop the upstream side."""
        if self.closed:
            return
        self.closed = True
        _rst(self.client_w)
        if self.upstream_w is not None:
            _rst(self.upstream_w)


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """A TCP proxy from ``listen_port`` (0 = pick one) to ``upstream``, with fault modes."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        seed: int = 0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listen_host = listen_host
        self.port = listen_port
        self.counters = Counters()
        self._mode: Mode = "pass"
        self._delay_s = 0.0
        self._p = 0.0
        self._rng = random.Random(seed)
        self._conns: set[_Conn] = set()
        self._keepers: set[asyncio.Task[None]] = set()  # stall_streams(keep_s=...) tasks
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._changed: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    # --- control (thread-safe) -----------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> FaultProxy:
        """Run the proxy on its own loop in a daemon thread; returns once it listens."""
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._listen())
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(
            target=run, name=f"faultproxy-{self.upstream[1]}", daemon=True
        )
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def set_mode(self, mode: Mode, *, delay_ms: float = 0.0, p: float = 0.0) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        self._call(self._set_mode(mode, delay_ms / 1000.0, p))

    def stall_existing(self) -> int:
        """Freeze every connection open now (new ones pass); returns how many."""
        return self._call(self._stall_existing())

    def stall_streams(self, *, quiet_s: float = 5.0, keep_s: float = 0.0) -> int:
        """Freeze the server→client side of every open connection whose client has sent
        nothing for ``quiet_s`` (a watch: one request, then only the server talks); new
        connections pass, and a frozen one whose client writes again is released (an
        idle pooled connection, not a stream). With ``keep_s``, the rule keeps being
        applied for that long, so that a stream opened just before (not yet quiet for
        ``quiet_s``) or re-opened on its connection is frozen too. Returns how many were
        frozen at once."""
        return self._call(self._stall_streams(quiet_s, keep_s))

    def stalled_streams(self) -> int:
        """How many connections stall_streams() froze are still frozen and open."""
        return sum(1 for c in list(self._conns) if c.stream_stalled and not c.closed)

    def reset_all(self) -> int:
        """Reset every open connection (stalled ones included); returns how many."""
        return self._call(self._reset_all())

    def open_connections(self) -> int:
        return len(self._conns)

    def close(self) -> None:
        if self._loop is None:
            return
        with contextlib.suppress(RuntimeError):
            self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop = None

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            raise RuntimeError("fault proxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    # --- the loop's side -----------------------------------------------------------------

    async def _listen(self) -> None:
        self._changed = asyncio.Event()
        self._server = await asyncio.start_server(
            self._accept, self.listen_host, self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _set_mode(self, mode: Mode, delay_s: float, p: float) -> None:
        self._mode, self._delay_s, self._p = mode, delay_s, p
        if mode == "refuse":
            await self._reset_all()
        self._wake()

    async def _stall_existing(self) -> int:
        for c in self._conns:
            c.stalled = True
        return len(self._conns)

    async def _stall_streams(self, quiet_s: float, keep_s: float = 0.0) -> int:
        frozen = self._freeze_quiet(quiet_s)
        if keep_s > 0:
            task = asyncio.create_task(self._keep_stalling(quiet_s, keep_s))
            self._keepers.add(task)
            task.add_done_callback(self._keepers.discard)
        return frozen

    def _freeze_quiet(self, quiet_s: float) -> int:
        now = asyncio.get_running_loop().time()
        frozen = 0
        for c in self._conns:
            if c.upstream_w is not None and now - c.client_spoke >= quiet_s:
                c.stream_stalled = True
                frozen += 1
        return frozen

    async def _keep_stalling(self, quiet_s: float, keep_s: float) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + keep_s
        while loop.time() < until:
            await asyncio.sleep(0.25)
            self._freeze_quiet(quiet_s)

    async def _reset_all(self) -> int:
        conns = list(self._conns)
        for c in conns:
            c.abort()
        self._conns.clear()
        self._wake()
        return len(conns)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._reset_all()
        # Let each connection's task see the reset and end before the loop stops, so that
        # none is destroyed pending (a stream held by stall_streams ends last).
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            await asyncio.wait(others, timeout=2)

    def _wake(self) -> None:
        # Pumps waiting out a blackhole or a stall re-check their condition.
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def _held(self, conn: _Conn, *, to_client: bool = False) -> bool:
        """Whether bytes of ``conn`` are held; ``to_client``: the server→client side,
        the only side stall_streams() holds."""
        return conn.stalled or self._mode == "blackhole" or (to_client and conn.stream_stalled)

    async def _wait_released(self, conn: _Conn, *, to_client: bool = False) -> None:
        while self._held(conn, to_client=to_client) and not conn.closed:
            assert self._changed is not None
            await self._changed.wait()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        conn = _Conn(client_w)
        conn.client_spoke = asyncio.get_running_loop().time()
        if self._mode == "refuse":
            self.counters.refused += 1
            conn.abort()
            return
        self.counters.accepted += 1
        self._conns.add(conn)
        try:
            # Blackhole: accepted, then nothing (the upstream is dialled when it lifts).
            await self._wait_released(conn)
            if conn.closed:
                return
            try:
                up_r, up_w = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 10)
            except (OSError, TimeoutError):
                conn.abort()
                return
            conn.upstream_w = up_w
            if conn.closed:  # reset while dialling
                _rst(up_w)
                return
            to_server: asyncio.Queue[bytes] = asyncio.Queue()
            to_client: asyncio.Queue[bytes] = asyncio.Queue()
            await asyncio.gather(
                self._read(conn, client_r, to_server, client=True),
                self._write(conn, to_server, up_w, upstream=True),
                self._read(conn, up_r, to_client, client=False),
                self._write(conn, to_client, client_w, upstream=False),
            )
        finally:
            self._conns.discard(conn)
            conn.abort()

    async def _read(
        self,
        conn: _Conn,
        reader: asyncio.StreamReader,
        out: asyncio.Queue[bytes],
        *,
        client: bool,
    ) -> None:
        """Read one side into a queue, also while held, so that a peer giving up is seen.

        A side that closes while its bytes are held (the client's request timed out, the
        server died) aborts the connection and the held bytes are dropped: the partition
        model is "the peer's kernel gave up", not "the bytes arrive when it heals". On a
        stream-stalled connection only the client giving up aborts: the server ending
        the watch is one more thing the client must not learn.
        """
        try:
            while not conn.closed:
                data = await reader.read(CHUNK)
                if not data and (self._held(conn) or (client and conn.stream_stalled)):
                    conn.abort()
                    break
                if client and data:
                    conn.client_spoke = asyncio.get_running_loop().time()
                    if conn.stream_stalled:
                        conn.stream_stalled = False  # a request: not a stream after all
                        self._wake()
                out.put_nowait(data)  # b"" = EOF, forwarded as a half-close
                if not data:
                    return
        except (OSError, RuntimeError):
            conn.abort()
        self._wake()  # the writers re-check conn.closed

    async def _write(
        self,
        conn: _Conn,
        queue: asyncio.Queue[bytes],
        writer: asyncio.StreamWriter,
        *,
        upstream: bool,
    ) -> None:
        """Forward queued chunks when released; upstream=True is client→server."""
        try:
            while not conn.closed:
                getter = asyncio.ensure_future(queue.get())
                assert self._changed is not None
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait([getter, changed], return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                if not getter.done():
                    getter.cancel()
                    continue
                data = getter.result()
                await self._wait_released(conn, to_client=not upstream)
                if conn.closed:
                    return
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if self._mode == "delay" and self._delay_s > 0:
                    await asyncio.sleep(self._delay_s)
                if not upstream and conn.doomed:
                    # The answer to a request the server has applied: lost, client reset.
                    self.counters.resets_injected += 1
                    conn.abort()
                    return
                writer.write(data)
                await writer.drain()
                self.counters.chunks_forwarded += 1
                if upstream:
                    conn.sent += 1
                    # The first two client chunks are the TLS handshake, not a request.
                    if self._mode == "reset" and conn.sent > 2 and self._rng.random() < self._p:
                        conn.doomed = True
        except (OSError, RuntimeError):
            conn.abort()


# --- process mode with a line-based control socket --------------------------------------


async def _control(proxy: FaultProxy, host: str, port: int) -> None:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        line = (await r.readline()).decode().split()
        reply = "ok"
        try:
            if line[:1] == ["mode"]:
                mode = line[1]
                if mode not in MODES:
                    raise ValueError(f"unknown mode {mode}")
                kw = dict(a.split("=", 1) for a in line[2:])
                await proxy._set_mode(
                    mode,  # type: ignore[arg-type]
                    float(kw.get("delay_ms", 0)) / 1000.0,
                    float(kw.get("p", 0)),
                )
            elif line[:1] == ["stall"]:
                reply = f"ok {await proxy._stall_existing()}"
            elif line[:1] == ["stall-streams"]:
                kw = dict(a.split("=", 1) for a in line[1:])
                reply = f"ok {await proxy._stall_streams(float(kw.get('quiet_s', 5)))}"
            elif line[:1] == ["reset"]:
                reply = f"ok {await proxy._reset_all()}"
            elif line[:1] == ["status"]:
                reply = f"ok {proxy.mode} {dataclasses.asdict(proxy.counters)}"
            else:
                reply = (
                    "error: commands are mode <m> [delay_ms=N] [p=F] | stall | "
                    "stall-streams [quiet_s=F] | reset | status"
                )
        except (ValueError, IndexError) as e:
            reply = f"error: {e}"
        w.write((reply + "\n").encode())
        await w.drain()
        w.close()

    await asyncio.start_server(handle, host, port)


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="host:port to listen on")
    parser.add_argument("--upstream", required=True, help="host:port to forward to")
    parser.add_argument("--control", required=True, help="host:port of the control socket")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lhost, lport = _hostport(args.listen)
    uhost, uport = _hostport(args.upstream)
    chost, cport = _hostport(args.control)
    proxy = FaultProxy(uhost, uport, listen_host=lhost, listen_port=lport, seed=args.seed)

    async def run() -> None:
        await proxy._listen()
        await _control(proxy, chost, cport)
        print(f"proxy 127.0.0.1:{proxy.port} -> {uhost}:{uport}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
