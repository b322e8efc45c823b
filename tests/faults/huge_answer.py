"""A loopback HTTP shim in front of Prometheus that answers one metric with a huge result.

An instant query (``/api/v1/query``) whose PromQL names ``metric`` is answered with a
valid Prometheus vector of ``series`` series, generated while it is sent (chunked
transfer, a batch of series per chunk): the test process never holds the body, so half
a million series cost it a few hundred KiB, not the ~60 MB the answer is on the wire.
Each series has a distinct ``series`` label and a ``node`` label cycling over the given
node names and many fake ones, as a query that forgot its ``by (node)`` would return.

Every other request is forwarded unchanged to the real Prometheus and its answer
returned (read whole: those are the small answers of the other policies' queries).

The counters say how many huge answers were started, finished or cut short by the
client (an operator that stops reading at its cap closes the connection), and how many
requests were forwarded. Stdlib only; runs in daemon threads (``HugeAnswerShim.start()``).
"""

from __future__ import annotations

import dataclasses
import http.client
import http.server
import itertools
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence

BATCH = 2000  # series per chunk (~250 KiB)
FAKE_NODES = 5000
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
)


@dataclasses.dataclass
class Counters:
    huge_started: int = 0
    huge_finished: int = 0  # every series sent
    huge_cut_short: int = 0  # the client closed the connection mid-answer
    huge_bytes_sent: int = 0
    forwarded: int = 0
    forward_failed: int = 0


def series_chunks(
    *, metric: str, series: int, nodes: Sequence[str], at: float, batch: int = BATCH
) -> Iterator[bytes]:
    """The body of a vector answer with ``series`` series, a few series per piece."""
    names = itertools.cycle([*nodes, *(f"huge-fake-node-{i:05d}" for i in range(FAKE_NODES))])
    yield b'{"status":"success","data":{"resultType":"vector","result":['
    for start in range(0, series, batch):
        items = []
        for i in range(start, min(series, start + batch)):
            labels = {"__name__": metric, "node": next(names), "series": str(i)}
            items.append(json.dumps({"metric": labels, "value": [at, f"{(i % 97) / 10:g}"]}))
        yield (b"," if start else b"") + ",".join(items).encode()
    yield b"]}}"


class HugeAnswerShim:
    """Listens on 127.0.0.1 (``port``), in front of ``upstream_url``."""

    def __init__(
        self,
        upstream_url: str,
        *,
        metric: str,
        series: int = 500_000,
        nodes: Sequence[str] = (),
    ) -> None:
        parts = urllib.parse.urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.metric = metric
        self.series = series
        self.nodes = nodes  # read at each answer: the caller may still be adding nodes
        self.counters = Counters()
        self._lock = threading.Lock()
        shim = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                shim._handle(self, body=b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                shim._handle(self, body=self.rfile.read(length))

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> HugeAnswerShim:
        threading.Thread(
            target=self._server.serve_forever, name=f"huge-answer-{self.port}", daemon=True
        ).start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)

    # --- requests ------------------------------------------------------------------------

    def _handle(self, h: http.server.BaseHTTPRequestHandler, *, body: bytes) -> None:
        url = urllib.parse.urlsplit(h.path)
        params = urllib.parse.parse_qs(url.query)
        if h.command == "POST" and "form-urlencoded" in (h.headers.get("Content-Type") or ""):
            params |= urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        query = " ".join(params.get("query", []))
        if url.path.endswith("/api/v1/query") and self.metric in query:
            self._huge(h)
        else:
            self._forward(h, body=body)

    def _huge(self, h: http.server.BaseHTTPRequestHandler) -> None:
        self._count(huge_started=1)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        sent = 0
        try:
            for piece in series_chunks(
                metric=self.metric, series=self.series, nodes=self.nodes, at=time.time()
            ):
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            h.close_connection = True
            self._count(huge_cut_short=1, huge_bytes_sent=sent)
            return
        self._count(huge_finished=1, huge_bytes_sent=sent)

    def _forward(self, h: http.server.BaseHTTPRequestHandler, *, body: bytes) -> None:
        headers = {
            k: v
            for k, v in h.headers.items()
            # Identity encoding from upstream: the answer is passed on as it came.
            if k.lower() not in HOP_BY_HOP | {"host", "accept-encoding", "content-length"}
        }
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            conn.request(h.command, h.path, body=body or None, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        except OSError:
            self._count(forward_failed=1)
            h.send_error(502, "upstream Prometheus unreachable")
            return
        finally:
            conn.close()
        self._count(forwarded=1)
        h.send_response(answer.status, answer.reason)
        for k, v in answer.getheaders():
            if k.lower() not in HOP_BY_HOP | {"content-length"}:
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
