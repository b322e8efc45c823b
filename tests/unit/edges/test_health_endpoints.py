"""/metrics, /healthz and /readyz answer from the operator's state, on one port or two."""

from __future__ import annotations

import collections.abc
import socket
import urllib.error
import urllib.request

import edges_fakes as fakes
import pytest

from metricsched.edges import endpoints, observe, probes

Server = collections.abc.Iterator[endpoints.Closer]


def get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2.0) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


@pytest.fixture
def health(clock: fakes.FakeClock) -> probes.HealthState:
    return probes.HealthState(max_heartbeat_age_s=30.0, clock=clock)


@pytest.fixture
def shared(health: probes.HealthState, metrics: observe.Metrics) -> Server:
    closer = endpoints.serve(
        host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
    )
    yield closer
    closer.close()


def test_equal_ports_share_one_server_for_all_paths(shared: endpoints.Closer) -> None:
    assert shared.metrics_port == shared.health_port != 0
    assert get(shared.metrics_port, "/metrics")[0] == 200
    assert get(shared.metrics_port, "/healthz")[0] == 200
    assert get(shared.metrics_port, "/nothing-here")[0] == 404


def test_metrics_are_served_in_the_prometheus_text_format(
    shared: endpoints.Closer, metrics: observe.Metrics
) -> None:
    metrics.attempts.labels(result="scheduled").inc(3)
    metrics.pending_pods.set(7)
    status, content_type, text = get(shared.metrics_port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=")
    assert 'metricsched_schedule_attempts_total{result="scheduled"} 3.0' in text
    assert 'metricsched_schedule_attempts_total{result="wait"} 0.0' in text
    assert "metricsched_pending_pods 7.0" in text
    assert "python_gc_objects_collected_total" not in text  # our registry, not the global one


def test_every_metric_of_the_contract_is_exported(metrics: observe.Metrics) -> None:
    metrics.metric_refresh_duration.labels(policy="shop/web", metric="latency").observe(0.1)
    metrics.fallback_decisions.labels(strategy="LeastAllocated", reason_kind="Unreachable").inc()
    metrics.binding_errors.labels(result="Conflict").inc()
    metrics.prometheus_errors.labels(kind="BadQuery").inc()
    metrics.set_metric_age_source(lambda: {("shop/web", "latency"): 12.5})
    text = metrics.exposition().decode()
    for name in [
        "metricsched_schedule_attempts_total",
        "metricsched_scheduling_attempt_duration_seconds_bucket",
        "metricsched_pod_scheduling_duration_seconds_bucket",
        "metricsched_pending_pods",
        "metricsched_metric_refresh_duration_seconds_bucket",
        "metricsched_metric_age_seconds",
        "metricsched_prometheus_errors_total",
        "metricsched_fallback_decisions_total",
        "metricsched_binding_errors_total",
        "metricsched_events_dropped_total",
        "metricsched_prometheus_queries_total",
        "metricsched_api_writes_total",
    ]:
        assert f"\n{name}" in text, name
    assert 'metricsched_scheduling_attempt_duration_seconds_bucket{le="0.001"}' in text
    assert 'metricsched_pod_scheduling_duration_seconds_bucket{le="0.01"}' in text
    assert 'metricsched_pod_scheduling_duration_seconds_bucket{le="600.0"}' in text


def test_metric_age_is_computed_when_scraped(metrics: observe.Metrics) -> None:
    now = [100.0]
    metrics.set_metric_age_source(lambda: {("shop/web", "latency"): now[0] - 40.0})
    registry = metrics.registry
    labels = {"policy": "shop/web", "metric": "latency"}
    assert registry.get_sample_value("metricsched_metric_age_seconds", labels) == 60.0
    now[0] = 130.0
    assert registry.get_sample_value("metricsched_metric_age_seconds", labels) == 90.0


def test_forgotten_policy_metrics_disappear_from_the_export(metrics: observe.Metrics) -> None:
    metrics.metric_refresh_duration.labels(policy="shop/web", metric="latency").observe(0.1)
    metrics.forget_policy_metric(policy="shop/web", metric="latency")
    metrics.forget_policy_metric(policy="shop/web", metric="never-seen")
    assert 'policy="shop/web"' not in metrics.exposition().decode()


def test_healthz_fails_once_the_heartbeat_is_stale(
    shared: endpoints.Closer, health: probes.HealthState, clock: fakes.FakeClock
) -> None:
    clock.advance(10.0)
    health.beat()
    assert get(shared.health_port, "/healthz")[0] == 200
    clock.advance(31.0)
    status, _, text = get(shared.health_port, "/healthz")
    assert status == 503
    assert "last heartbeat 31.0s ago" in text


def test_readyz_is_503_with_a_reason_until_ready(
    shared: endpoints.Closer, health: probes.HealthState
) -> None:
    assert get(shared.health_port, "/readyz") == (
        503,
        "text/plain; charset=utf-8",
        "starting: caches not synced yet\n",
    )
    health.set_ready(True, "caches synced; leading")
    assert get(shared.health_port, "/readyz")[:1] == (200,)
    health.set_ready(False, "lost leadership")
    assert get(shared.health_port, "/readyz")[::2] == (503, "lost leadership\n")


def test_different_ports_serve_metrics_and_probes_separately(
    health: probes.HealthState, metrics: observe.Metrics
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = int(s.getsockname()[1])
    closer = endpoints.serve(
        host="127.0.0.1", metrics_port=0, health_port=free, health=health, metrics=metrics
    )
    try:
        assert closer.health_port == free != closer.metrics_port
        assert get(closer.metrics_port, "/metrics")[0] == 200
        assert get(closer.metrics_port, "/healthz")[0] == 404
        assert get(closer.health_port, "/healthz")[0] == 200
        assert get(closer.health_port, "/metrics")[0] == 404
    finally:
        closer.close()


def test_close_releases_the_port(health: probes.HealthState, metrics: observe.Metrics) -> None:
    closer = endpoints.serve(
        host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
    )
    port = closer.metrics_port
    closer.close()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_each_metric_age_is_exported_beside_its_policy_max_metric_age(
    metrics: observe.Metrics,
) -> None:
    metrics.set_metric_age_source(
        lambda: {("shop/web", "latency"): 90.0, ("shop/gone", "cpu"): 5.0},
        max_ages=lambda: {"shop/web": 60.0},
    )
    value = metrics.registry.get_sample_value
    labels = {"policy": "shop/web", "metric": "latency"}
    assert value("metricsched_metric_max_age_seconds", labels) == 60.0
    assert value("metricsched_metric_age_seconds", labels) == 90.0
    # A policy the cache no longer holds has an age but no limit to compare it with.
    assert (
        value("metricsched_metric_max_age_seconds", {"policy": "shop/gone", "metric": "cpu"})
        is None
    )


def test_a_failing_max_age_source_leaves_the_ages_exported(metrics: observe.Metrics) -> None:
    def broken() -> dict[str, float]:
        raise RuntimeError("boom")

    metrics.set_metric_age_source(lambda: {("shop/web", "latency"): 9.0}, max_ages=broken)
    labels = {"policy": "shop/web", "metric": "latency"}
    assert metrics.registry.get_sample_value("metricsched_metric_age_seconds", labels) == 9.0


def test_a_health_port_in_use_fails_serve_and_releases_the_metrics_port(
    health: probes.HealthState, metrics: observe.Metrics
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = int(s.getsockname()[1])
        with pytest.raises(OSError):
            endpoints.serve(
                host="127.0.0.1",
                metrics_port=free,
                health_port=busy,
                health=health,
                metrics=metrics,
            )
    with socket.socket() as s:
        s.bind(("127.0.0.1", free))  # released: the metrics server was closed


def exchange(port: int, request: bytes) -> bytes:
    """Send raw bytes; everything the server answers before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
        return answer


def test_a_malformed_request_is_answered_400(shared: endpoints.Closer) -> None:
    assert exchange(shared.health_port, b"HELLO\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    bad_header = b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n"
    assert exchange(shared.health_port, bad_header).startswith(b"HTTP/1.1 400 ")


def test_a_request_head_over_the_limit_is_answered_431(shared: endpoints.Closer) -> None:
    huge = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"x" * 40_000 + b"\r\n\r\n"
    assert exchange(shared.health_port, huge).startswith(b"HTTP/1.1 431 ")


def test_only_get_is_served(shared: endpoints.Closer) -> None:
    answer = exchange(shared.health_port, b"POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 ")


def test_a_probe_is_answered_with_a_length_and_the_connection_closed(
    shared: endpoints.Closer,
) -> None:
    answer = exchange(shared.health_port, b"GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nContent-Length: %d\r\n" % len(body) in head
    assert b"\r\nConnection: close" in head
    assert body.startswith(b"ok: last heartbeat")
