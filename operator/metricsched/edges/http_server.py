"""The HTTP server of the operator's own endpoints (/healthz, /readyz, /metrics).

The kubelet restarts the operator when /healthz fails three probes in a row, so nothing a
client of the port can do may keep a probe from being answered. A bounded pool of
threads, each reading one connection, does not hold: 72 idle connections filled its 8
threads and 64 waiting places and every probe was closed unanswered (issue 28, N2).

Each ``Server`` (one per port) runs an asyncio loop on a thread of its own, never the
operator's loop, and holds these bounds:

- A connection has ``HEADER_DEADLINE_S`` from its acceptance to send its request line and
  headers, its TLS handshake included; then it is closed unanswered. An idle or
  slow-loris connection holds nothing for longer than that.
- At most ``MAX_READING`` connections are being read at once. One more closes the oldest
  of the others that has sent nothing yet (else the oldest of them) and is read itself:
  a new connection is never refused for old ones, and a probe, whose request follows
  its connection at once, is closed only if that many connections arrive before the
  loop reads it (a loop turn accepts at most ``LISTEN_BACKLOG``).
- A route that does not block (the probes: a look at a lock-guarded state) is answered on
  the loop, without waiting for any thread. A route that may block (/metrics: the
  exposition, a TokenReview) runs in a pool of ``MAX_HANDLER_THREADS`` threads with at
  most ``MAX_WAITING`` requests waiting, and past that is answered 503 at once: /metrics
  is shed, a probe never is.
- One request per connection (``Connection: close``), answered within
  ``WRITE_DEADLINE_S``; a request head over ``MAX_HEAD_BYTES`` is answered 431.

Connections closed unanswered and requests shed are counted by reason (``DROP_REASONS``)
through ``on_drop``. Not served: keep-alive, request bodies, methods other than GET.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import email.utils
import http
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, SupportsIndex

logger = logging.getLogger(__name__)

HEADER_DEADLINE_S = 2.0  # a probe's request arrives within milliseconds of its connection
WRITE_DEADLINE_S = 10.0  # an answer of /metrics is a few hundred KiB at most
MAX_READING = 256  # connections being read (handshake, request head), per port
MAX_HANDLER_THREADS = 4  # for the routes that may block, per port
MAX_WAITING = 16  # requests of those routes waiting for a thread, per port
MAX_HEAD_BYTES = 32 * 1024  # request line and headers: a bearer token may be 16 KiB
LISTEN_BACKLOG = 128
DROP_LOG_INTERVAL_S = 60.0

DropReason = Literal["deadline", "evicted", "busy"]
# deadline: no complete request head in time; evicted: the oldest connection being read,
# closed for a new one; busy: a blocking route's threads and waiting places all taken (503).
DROP_REASONS: tuple[DropReason, ...] = ("deadline", "evicted", "busy")

TEXT = "text/plain; charset=utf-8"


class _Reader(asyncio.StreamReader):
    """A stream that remembers whether its client has sent anything: the idle go first."""

    heard = False

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if data:
            self.heard = True
        super().feed_data(data)


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # without the query string
    headers: Mapping[str, str]  # names in lower case


@dataclasses.dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """What answers one path; ``blocking`` routes run in the pool, the others on the loop."""

    handle: Callable[[Request], Response]
    blocking: bool = False


def text(status: int, message: str) -> Response:
    return Response(status, TEXT, (message + "\n").encode())


class Server:
    """One port: bound in the constructor (``OSError`` if it cannot be), served by ``start``.

    ``tls`` gives the context of each new connection (called per connection, so that a
    renewed certificate is used from then on); ``on_drop`` is called on the server's
    thread with the port and the reason of each connection or request not served.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        routes: Mapping[str, Route],
        tls: Callable[[], ssl.SSLContext] | None = None,
        on_drop: Callable[[int, DropReason], None] | None = None,
    ) -> None:
        self._sock = _listen(host, port)
        self.port = int(self._sock.getsockname()[1])
        self._routes = dict(routes)
        self._tls = tls
        self._on_drop = on_drop
        # Read at construction, so that tests may shrink them for one server.
        self._deadline_s = HEADER_DEADLINE_S
        self._write_deadline_s = WRITE_DEADLINE_S
        self._max_reading = MAX_READING
        self._max_admitted = MAX_HANDLER_THREADS + MAX_WAITING
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=MAX_HANDLER_THREADS, thread_name_prefix=f"metricsched-http-{self.port}"
        )
        # Everything below is touched on the server's thread only, but for the counters.
        self._reading: dict[asyncio.StreamWriter, _Reader] = {}  # in order of acceptance
        self._tasks: set[asyncio.Task[None]] = set()
        self._admitted = 0  # requests of blocking routes running, waiting or being written
        # Every key from the start: other threads read it while the loop counts.
        self.dropped = collections.Counter[DropReason]({r: 0 for r in DROP_REASONS})
        self._logged_drops = 0
        self._logged_at = time.monotonic() - DROP_LOG_INTERVAL_S  # the first drop is logged
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._serving = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"metricsched-http-{self.port}", daemon=True
        )

    def start(self) -> None:
        """Serve on a thread of the server's own; returns once it accepts connections."""
        self._thread.start()
        if not self._serving.wait(timeout=10.0):  # pragma: no cover - a stuck interpreter
            raise RuntimeError(f"the HTTP server of port {self.port} did not start")
        if self._error is not None:
            raise RuntimeError(f"the HTTP server of port {self.port} failed") from self._error

    def close(self) -> None:
        """Stop serving, close every connection and release the port; idempotent."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(stopping.set)
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- the server's thread -----------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve())
        except Exception as e:
            self._error = e
            logger.exception("the HTTP server of port %d failed", self.port)
        finally:
            self._serving.set()  # start() must not wait for a server that ended
            loop.close()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await self._loop.create_server(
            lambda: asyncio.StreamReaderProtocol(_Reader(limit=MAX_HEAD_BYTES), self._connected),
            sock=self._sock,
            backlog=LISTEN_BACKLOG,
        )
        self._serving.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for writer in list(self._reading):
                writer.transport.abort()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and isinstance(reader, _Reader)
        self._tasks.add(task)
        if len(self._reading) >= self._max_reading:
            self._evict()
        self._reading[writer] = reader
        admitted = False
        try:
            got = await self._read(reader, writer)
            self._reading.pop(writer, None)
            if got is None:
                return
            if isinstance(got, Response):
                response = got
            else:
                route = self._routes.get(got.path)
                if route is None:
                    response = text(404, "not found")
                elif got.method != "GET":
                    response = text(405, f"{got.method} is not served here: use GET")
                elif not route.blocking:
                    response = _call(route, got)
                elif self._admitted >= self._max_admitted:
                    self._drop("busy")
                    response = text(503, "busy: too many requests to this path at once; retry")
                else:
                    self._admitted += 1
                    admitted = True
                    loop = asyncio.get_running_loop()
                    response = await loop.run_in_executor(self._pool, _call, route, got)
            await self._write(writer, response)
        except asyncio.CancelledError:
            pass  # the server is closing; asyncio would log a cancelled stream task as an error
        except Exception:  # a connection's failure is that connection's alone
            logger.debug("http: a connection to port %d failed", self.port, exc_info=True)
        finally:
            if admitted:
                self._admitted -= 1  # after the answer: slow readers of /metrics count too
            self._reading.pop(writer, None)
            writer.transport.abort()  # no-op once closed; else nothing more is owed
            self._tasks.discard(task)

    def _evict(self) -> None:
        """Close the oldest connection being read that has sent nothing, else the oldest."""
        victim = next((w for w, r in self._reading.items() if not r.heard), None)
        if victim is None:
            victim = next(iter(self._reading))
        del self._reading[victim]
        victim.transport.abort()  # its read ends at once, and its task with it
        self._drop("evicted")

    async def _read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | Response | None:
        """The request, or the answer to a malformed one, or None: close unanswered."""
        try:
            async with asyncio.timeout(self._deadline_s):
                if self._tls is not None:
                    await writer.start_tls(self._tls())
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            self._drop("deadline")
            return None
        except asyncio.LimitOverrunError:
            return text(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
        except (asyncio.IncompleteReadError, OSError, ssl.SSLError):
            return None  # gone, reset, or a failed handshake: nobody to answer
        return _parse(head)

    async def _write(self, writer: asyncio.StreamWriter, response: Response) -> None:
        status = http.HTTPStatus(response.status)
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\n"
            "Server: metricsched\r\n"
            f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        with contextlib.suppress(TimeoutError, OSError, ssl.SSLError):
            async with asyncio.timeout(self._write_deadline_s):
                writer.write(head + response.body)
                await writer.drain()
                writer.close()
                await writer.wait_closed()

    def _drop(self, reason: DropReason) -> None:
        self.dropped[reason] += 1
        if self._on_drop is not None:
            try:
                self._on_drop(self.port, reason)
            except Exception:  # counting must never cost a connection its answer
                logger.warning("http: counting a dropped connection failed", exc_info=True)
        now = time.monotonic()
        if now - self._logged_at >= DROP_LOG_INTERVAL_S:
            total = sum(self.dropped.values())
            logger.warning(
                "http: port %d dropped %d connection(s) since the last report (%s so far): "
                "a client opens connections and sends no request, or floods /metrics; the "
                "probes are still answered",
                self.port,
                total - self._logged_drops,
                ", ".join(f"{r} {n}" for r, n in sorted(self.dropped.items())),
            )
            self._logged_drops, self._logged_at = total, now


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        # As http.server does: a restarted operator binds its port again at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _parse(head: bytes) -> Request | Response:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return text(400, "bad request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            return text(400, "bad header line")
        headers[name.lower()] = value.strip()
    return Request(method=parts[0], path=parts[1].split("?", 1)[0], headers=headers)


def _call(route: Route, request: Request) -> Response:
    try:
        return route.handle(request)
    except Exception:
        logger.exception("HTTP handler for %s failed", request.path)
        return text(500, "internal error")
