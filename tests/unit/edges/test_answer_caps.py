"""An answer is read incrementally under a byte and a series cap: memory stays bounded
whatever Prometheus sends, and a policy whose query returns too much gets ResultTooLarge."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import edges_fakes as fakes
import pytest

from metricsched.core import model
from metricsched.edges import prometheus, prometheus_http

NOW = 5_000.0
NODES = [fakes.node("node-a"), fakes.node("node-b")]
MiB = 1024 * 1024
Kind = model.QueryErrorKind

# Writes the answer to the socket; returns nothing. Raises when the client hangs up.
Writer = Callable[[http.server.BaseHTTPRequestHandler], None]


class StreamingServer:
    """A loopback Prometheus that streams its answer and counts the bytes it got out."""

    def __init__(self) -> None:
        self.writer: Writer = lambda h: None
        self.sent = 0
        self.finished = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                try:
                    server.writer(self)
                except OSError:  # the client closed the connection mid-answer
                    self.close_connection = True
                finally:
                    server.finished.set()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()

    def write(self, handler: http.server.BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        self.sent += len(data)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def streaming() -> Iterator[StreamingServer]:
    server = StreamingServer()
    yield server
    server.close()


def make_source(
    url: str, *, max_bytes: int = MiB, max_series: int = 100, timeout_s: float = 2.0
) -> prometheus.PrometheusClient:
    return prometheus.PrometheusClient(
        prometheus.PrometheusConfig(
            url=url,
            timeout_s=timeout_s,
            retries=0,
            limits=prometheus_http.Limits(max_bytes=max_bytes, max_series=max_series),
        )
    )


def query(source: prometheus.PrometheusClient) -> prometheus.QueryReport:
    return source.query_nodes_report("up", node_label="node", nodes=NODES, now=NOW, namespace="a")


def endless_vector(handler: http.server.BaseHTTPRequestHandler, server: StreamingServer) -> None:
    """A chunked answer of unbounded length: series after series until the client leaves."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()

    def chunk(data: bytes) -> None:
        server.write(handler, f"{len(data):x}\r\n".encode() + data + b"\r\n")

    chunk(b'{"status":"success","data":{"resultType":"vector","result":[')
    series = b'{"metric":{"node":"node-x","pod":"%08d"},"value":[1.7e9,"1"]},'
    block = b"".join(series % i for i in range(1000))
    for _ in range(100_000):  # ~70 GB: the client must stop long before
        chunk(block)


class TestByteCap:
    def test_an_answer_over_the_byte_cap_is_result_too_large(
        self, streaming: StreamingServer
    ) -> None:
        streaming.writer = lambda h: endless_vector(h, streaming)
        report = query(make_source(streaming.url, max_bytes=MiB))
        assert report.series.error is Kind.RESULT_TOO_LARGE
        assert "1024 KiB" in report.series.error_message
        assert report.series.values == {}

    def test_the_read_stops_at_the_cap_instead_of_draining_the_answer(
        self, streaming: StreamingServer
    ) -> None:
        streaming.writer = lambda h: endless_vector(h, streaming)
        query(make_source(streaming.url, max_bytes=MiB))
        assert streaming.finished.wait(timeout=30)
        # The cap plus what the loopback socket buffers held when the client hung up.
        assert streaming.sent < 64 * MiB

    def test_memory_stays_bounded_by_the_cap_not_the_answer(
        self, streaming: StreamingServer
    ) -> None:
        streaming.writer = lambda h: endless_vector(h, streaming)
        source = make_source(streaming.url, max_bytes=2 * MiB)
        tracemalloc.start()
        try:
            report = query(source)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.series.error is Kind.RESULT_TOO_LARGE
        assert peak < 8 * MiB

    def test_a_declared_length_over_the_cap_is_refused_before_reading(
        self, streaming: StreamingServer
    ) -> None:
        def huge(handler: http.server.BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Length", str(100 * MiB))
            handler.end_headers()
            streaming.write(handler, b"{" * (100 * MiB))

        streaming.writer = huge
        report = query(make_source(streaming.url, max_bytes=MiB))
        assert report.series.error is Kind.RESULT_TOO_LARGE

    def test_a_compressed_answer_is_capped_by_its_decoded_size(
        self, streaming: StreamingServer
    ) -> None:
        padding = " " * (64 * MiB)
        body = gzip.compress(
            json.dumps(fakes.vector(({"node": "node-a", "pad": padding}, "1"))).encode()
        )
        assert len(body) < MiB  # what crosses the wire fits the cap; what it decodes to not

        def bomb(handler: http.server.BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Encoding", "gzip")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            streaming.write(handler, body)

        streaming.writer = bomb
        report = query(make_source(streaming.url, max_bytes=MiB))
        assert report.series.error is Kind.RESULT_TOO_LARGE

    def test_an_answer_within_the_cap_is_read_whole(self, streaming: StreamingServer) -> None:
        body = json.dumps(fakes.vector(({"node": "node-a"}, "1"), ({"node": "node-b"}, "2")))

        def small(handler: http.server.BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            streaming.write(handler, body.encode())

        streaming.writer = small
        report = query(make_source(streaming.url, max_bytes=len(body)))
        assert report.series.error is None
        assert {n: s.value for n, s in report.series.values.items()} == {
            "node-a": 1.0,
            "node-b": 2.0,
        }


class TestSeriesCap:
    @staticmethod
    def answer(count: int, *, extra: dict[str, str] | None = None) -> fakes.Responder:
        series = [({"node": f"node-{i}", **(extra or {})}, "1") for i in range(count)]
        return lambda r: (200, fakes.vector(*series))

    def test_more_series_than_the_cap_is_result_too_large(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        fake_prometheus.responder = self.answer(11)
        report = query(make_source(fake_prometheus.url, max_series=10))
        assert report.series.error is Kind.RESULT_TOO_LARGE
        assert "10 series" in report.series.error_message

    def test_as_many_series_as_the_cap_is_fine(self, fake_prometheus: fakes.FakeServer) -> None:
        fake_prometheus.responder = self.answer(10)
        report = query(make_source(fake_prometheus.url, max_series=10))
        assert report.series.error is not Kind.RESULT_TOO_LARGE
        assert report.series_total == 10

    def test_a_label_named_metric_is_not_counted_as_a_series(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        fake_prometheus.responder = self.answer(10, extra={"metric": "x", "value": "y"})
        report = query(make_source(fake_prometheus.url, max_series=10))
        assert report.series.error is not Kind.RESULT_TOO_LARGE


class TestDeadline:
    def test_an_answer_dripping_past_the_deadline_is_unreachable(
        self, streaming: StreamingServer
    ) -> None:
        def drip(handler: http.server.BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for _ in range(400):
                streaming.write(handler, b"1\r\n \r\n")
                time.sleep(0.01)

        streaming.writer = drip
        report = query(make_source(streaming.url, timeout_s=0.5))
        assert report.series.error is Kind.UNREACHABLE
        assert "no complete answer within 0.5s" in report.series.error_message
        assert not report.connect_failed


def test_the_client_reads_data_result_of_a_success_envelope_only(
    fake_prometheus: fakes.FakeServer,
) -> None:
    fake_prometheus.responder = lambda r: (200, {"status": "error", "data": {"result": []}})
    report = query(make_source(fake_prometheus.url))
    assert report.series.error is Kind.BAD_RESULT
    assert "data.result" in report.series.error_message
