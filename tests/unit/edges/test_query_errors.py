"""Failed queries are classified (never raised) and their messages never carry the token."""

from __future__ import annotations

import pathlib
import time

import edges_fakes as fakes
import pytest

from metricsched.core import model
from metricsched.edges import observe, prometheus

NOW = 2_000.0
NODES = [fakes.node("node-a", "10.0.0.1"), fakes.node("node-b", "10.0.0.2")]
SECRET = "s3cr3t-bearer-token-value"
Kind = model.QueryErrorKind


def query(source: prometheus.PrometheusClient, promql: str = "up") -> prometheus.QueryReport:
    return source.query_nodes_report(
        promql, node_label="node", nodes=NODES, now=NOW, namespace="shop"
    )


def make_source(url: str, **overrides: object) -> prometheus.PrometheusClient:
    settings: dict[str, object] = {"timeout_s": 1.0, "retries": 0, **overrides}
    return prometheus.PrometheusClient(prometheus.PrometheusConfig(url=url, **settings))  # type: ignore[arg-type]


def test_connection_refused_is_unreachable_and_marks_prometheus_down() -> None:
    source = make_source(f"http://127.0.0.1:{fakes.closed_port()}")
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "Connection refused" in report.series.error_message
    assert report.connect_failed
    assert report.series.values == {}
    assert report.series.last_refresh == NOW


def test_http_503_is_unreachable_after_the_configured_retries(
    fake_prometheus: fakes.FakeServer,
) -> None:
    fake_prometheus.responder = lambda r: (503, fakes.prom_error("timeout", "query timed out"))
    source = make_source(fake_prometheus.url, retries=1)
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "503" in report.series.error_message
    assert not report.connect_failed  # the server answers; only this query failed
    assert len(fake_prometheus.requests) == 2  # one try plus one retry


def test_a_slow_answer_is_unreachable_after_the_timeout(fake_prometheus: fakes.FakeServer) -> None:
    def slow(request: object) -> tuple[int, object]:
        time.sleep(0.5)
        return 200, fakes.vector(({"node": "node-a"}, "1"))

    fake_prometheus.responder = slow
    source = make_source(fake_prometheus.url, timeout_s=0.1)
    started = time.monotonic()
    report = query(source)
    assert time.monotonic() - started < 0.45
    assert report.series.error is Kind.UNREACHABLE
    assert "no answer within 0.1s" in report.series.error_message


def test_promql_rejected_with_400_is_a_bad_query_with_prometheus_error_text(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    error = '1:5: parse error: unexpected "}" in label matching'
    fake_prometheus.responder = lambda r: (400, fakes.prom_error("bad_data", error))
    report = query(source, "up{")
    assert report.series.error is Kind.BAD_QUERY
    assert report.series.error_message == f"Prometheus rejected the query: bad_data: {error}"
    assert len(fake_prometheus.requests) == 1  # client errors are not retried


def test_execution_error_422_is_a_bad_query(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (
        422,
        fakes.prom_error("execution", "many-to-many matching not allowed"),
    )
    report = query(source)
    assert report.series.error is Kind.BAD_QUERY
    assert "many-to-many matching not allowed" in report.series.error_message


def test_range_vector_result_is_a_bad_result(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.envelope("matrix", [{"metric": {"node": "node-a"}, "values": [[1.7e9, "1"]]}]),
    )
    report = query(source, "up[5m]")
    assert report.series.error is Kind.BAD_RESULT
    assert "range vector" in report.series.error_message


@pytest.mark.parametrize(("result_type", "value"), [("scalar", "1"), ("string", "hello")])
def test_scalar_or_string_result_is_a_bad_result(
    fake_prometheus: fakes.FakeServer,
    source: prometheus.PrometheusClient,
    result_type: str,
    value: str,
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.envelope(result_type, [1.7e9, value]))
    report = query(source, "1")
    assert report.series.error is Kind.BAD_RESULT
    assert "not an instant vector" in report.series.error_message


def test_no_series_at_all_is_an_empty_result(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    report = query(source)
    assert report.series.error is Kind.EMPTY_RESULT
    assert report.series.error_message == "the query returned no series"


def test_series_for_no_known_node_are_an_empty_result_counted_without_their_labels(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(({"node": "elsewhere", "tenant": "bank"}, "1"), ({"node": "node-z"}, "2")),
    )
    report = query(source)
    assert report.series.error is Kind.EMPTY_RESULT
    assert report.series.values == {}
    assert report.series.error_message == (
        "none of the 2 series names a known node: 0 without label 'node',"
        " 2 with a value that is no node's name or address"
    )


def test_series_without_the_node_label_are_counted_without_naming_their_labels(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.vector(({"instance": "10.0.0.1:9100"}, "1")))
    report = query(source)
    assert report.series.error is Kind.EMPTY_RESULT
    assert "1 without label 'node'" in report.series.error_message
    assert "instance" not in report.series.error_message
    assert "10.0.0.1" not in report.series.error_message


def test_only_non_finite_values_for_known_nodes_are_a_bad_result(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(({"node": "node-a"}, "NaN")),
    )
    assert query(source).series.error is Kind.BAD_RESULT


def test_an_answer_that_is_not_json_is_a_bad_result(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    fake_prometheus.responder = lambda r: (200, b"<html>login page</html>")
    report = query(source)
    assert report.series.error is Kind.BAD_RESULT
    assert "not JSON" in report.series.error_message


def test_rejected_token_is_unreachable_and_the_token_never_appears_in_the_message(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET)
    # A proxy that echoes the credentials it refused, the worst case for leaks.
    fake_prometheus.responder = lambda r: (
        401,
        f"bad credentials: {r.headers['authorization']}".encode(),
    )
    source = make_source(fake_prometheus.url, token_file=str(token_file))
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "401" in report.series.error_message
    assert SECRET not in report.series.error_message
    assert fake_prometheus.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_bad_query_message_echoing_the_token_is_scrubbed(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET)
    fake_prometheus.responder = lambda r: (
        400,
        fakes.prom_error("bad_data", f"cannot parse {r.headers['authorization']}"),
    )
    report = query(make_source(fake_prometheus.url, token_file=str(token_file)))
    assert report.series.error is Kind.BAD_QUERY
    assert SECRET not in report.series.error_message
    assert "[REDACTED]" in report.series.error_message


def test_credentials_in_the_url_are_left_out_of_messages() -> None:
    source = make_source(f"http://admin:hunter2@127.0.0.1:{fakes.closed_port()}/prom")
    message = query(source).series.error_message
    assert "hunter2" not in message
    assert "admin" not in message
    assert "http://127.0.0.1:" in message


@pytest.mark.parametrize(("content", "expected"), [(None, "cannot read"), ("\n", "is empty")])
def test_a_missing_or_empty_token_file_is_unreachable_without_sending_anything(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path, content: str | None, expected: str
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    report = query(make_source(fake_prometheus.url, token_file=str(token_file)))
    assert report.series.error is Kind.UNREACHABLE
    assert expected in report.series.error_message
    assert fake_prometheus.requests == []


def test_queries_and_errors_are_counted_by_kind(fake_prometheus: fakes.FakeServer) -> None:
    metrics = observe.Metrics()
    source = prometheus.PrometheusClient(
        prometheus.PrometheusConfig(url=fake_prometheus.url, timeout_s=1.0, retries=0),
        metrics=metrics,
    )
    query(source)  # empty result
    fake_prometheus.responder = lambda r: (400, fakes.prom_error("bad_data", "nope"))
    query(source)
    registry = metrics.registry
    assert registry.get_sample_value("metricsched_prometheus_queries_total") == 2
    assert (
        registry.get_sample_value("metricsched_prometheus_errors_total", {"kind": "EmptyResult"})
        == 1
    )
    assert (
        registry.get_sample_value("metricsched_prometheus_errors_total", {"kind": "BadQuery"}) == 1
    )


def test_ping_says_whether_the_query_api_answers(fake_prometheus: fakes.FakeServer) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.envelope("scalar", [1.7e9, "1"]))
    assert make_source(fake_prometheus.url).ping()[0] is True
    ok, message = make_source(f"http://127.0.0.1:{fakes.closed_port()}").ping()
    assert ok is False
    assert "unreachable" in message
