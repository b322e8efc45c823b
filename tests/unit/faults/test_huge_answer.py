"""The huge-answer shim: one metric gets a valid, streamed vector of N series; every other
request reaches the real Prometheus unchanged; a client hanging up is counted."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from tests.faults import huge_answer

UPSTREAM_ANSWER = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


class _Upstream:
    """A loopback "Prometheus" that records the paths it was asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                upstream.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(UPSTREAM_ANSWER)))
                self.end_headers()
                self.wfile.write(UPSTREAM_ANSWER)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    u = _Upstream()
    yield u
    u.server.shutdown()
    u.server.server_close()


def _shim(upstream: _Upstream, *, series: int) -> huge_answer.HugeAnswerShim:
    return huge_answer.HugeAnswerShim(
        upstream.url, metric="huge_metric", series=series, nodes=["real-a", "real-b"]
    ).start()


def _query(shim: huge_answer.HugeAnswerShim, promql: str) -> str:
    return f"{shim.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})


def test_the_metric_gets_a_valid_vector_of_n_series_naming_real_and_fake_nodes(
    upstream: _Upstream,
) -> None:
    shim = _shim(upstream, series=5_000)
    with urllib.request.urlopen(_query(shim, "max(huge_metric)"), timeout=10) as r:
        assert r.headers["Transfer-Encoding"] == "chunked"
        body = json.loads(r.read())
    shim.close()
    result = body["data"]["result"]
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    assert len(result) == 5_000
    assert len({s["metric"]["series"] for s in result}) == 5_000  # distinct series
    nodes = {s["metric"]["node"] for s in result}
    assert {"real-a", "real-b"} <= nodes and len(nodes) > 1_000
    assert all(isinstance(float(s["value"][1]), float) for s in result)
    assert upstream.paths == []  # answered by the shim, never forwarded
    assert shim.counters.huge_started == shim.counters.huge_finished == 1


def test_half_a_million_series_are_streamed_in_pieces_not_built_whole() -> None:
    pieces = huge_answer.series_chunks(metric="m", series=500_000, nodes=["n"], at=1.0)
    count, largest, total = 0, 0, 0
    for piece in pieces:
        count += piece.count(b'{"metric":')
        largest = max(largest, len(piece))
        total += len(piece)
    assert count == 500_000
    assert total > 40 * 1024 * 1024  # what a client would have to hold
    assert largest < 512 * 1024  # what the shim holds at a time


def test_other_requests_are_forwarded_unchanged(upstream: _Upstream) -> None:
    shim = _shim(upstream, series=10)
    with urllib.request.urlopen(_query(shim, "max by (node) (other_metric)"), timeout=10) as r:
        assert r.read() == UPSTREAM_ANSWER
    with urllib.request.urlopen(f"{shim.url}/api/v1/status/buildinfo", timeout=10) as r:
        assert r.read() == UPSTREAM_ANSWER
    shim.close()
    assert [urllib.parse.urlsplit(p).path for p in upstream.paths] == [
        "/api/v1/query",
        "/api/v1/status/buildinfo",
    ]
    assert "other_metric" in urllib.parse.unquote_plus(upstream.paths[0])
    assert shim.counters.forwarded == 2 and shim.counters.huge_started == 0


def test_a_client_that_stops_reading_is_counted_as_cut_short(upstream: _Upstream) -> None:
    shim = _shim(upstream, series=500_000)
    conn = http.client.HTTPConnection("127.0.0.1", shim.port, timeout=10)
    conn.request(
        "GET", urllib.parse.urlsplit(_query(shim, "huge_metric")).path + "?query=huge_metric"
    )
    answer = conn.getresponse()
    assert answer.read(1024 * 1024)  # a client reading up to its cap...
    sock = conn.sock
    assert sock is not None
    sock.shutdown(socket.SHUT_RDWR)  # ...then hanging up
    conn.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not shim.counters.huge_cut_short:
        time.sleep(0.05)
    shim.close()
    assert shim.counters.huge_cut_short == 1
    assert shim.counters.huge_finished == 0
    assert shim.counters.huge_bytes_sent < 40 * 1024 * 1024
