"""Loopback fakes and builders for the edges' unit tests: fake Prometheus, fake Kubernetes API.

Each fake is a stdlib HTTP server on 127.0.0.1 that records every request it receives
and answers through a per-test ``responder``. Tests assert on what actually went over
the wire (request counts, bodies, headers), not on mocks of the client libraries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.server
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import kubernetes.client
import pytest

from metricsched.core import model
from metricsched.edges import kube_http, observe, prometheus

T = TypeVar("T")


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


# A responder returns (status, body): dict/list bodies are sent as JSON, bytes as they are.
Responder = Callable[[Request], tuple[int, Any]]


class FakeServer:
    """``keep_alive``: HTTP/1.1 with persistent connections, as the API server does (the
    default HTTP/1.0 closes each connection, which hides bugs of connection reuse)."""

    def __init__(self, responder: Responder, *, keep_alive: bool = False) -> None:
        self.responder = responder
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                url = urllib.parse.urlsplit(self.path)
                request = Request(
                    method=self.command,
                    path=url.path,
                    query=urllib.parse.parse_qs(url.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                with fake._lock:
                    fake.requests.append(request)
                status, body = fake.responder(request)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_PATCH(self) -> None:
                self._handle()

            def do_PUT(self) -> None:
                self._handle()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def received(self, method: str | None = None, path_part: str = "") -> list[Request]:
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and path_part in r.path
            ]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- Prometheus ------------------------------------------------------------------------


def vector(*series: tuple[dict[str, str], str]) -> dict[str, Any]:
    """A successful instant-vector answer from (labels, value) pairs."""
    return envelope("vector", [{"metric": labels, "value": [1.7e9, v]} for labels, v in series])


def envelope(result_type: str, result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": result_type, "result": result}}


def prom_error(error_type: str, error: str) -> dict[str, Any]:
    return {"status": "error", "errorType": error_type, "error": error}


@pytest.fixture
def fake_prometheus() -> Iterator[FakeServer]:
    server = FakeServer(lambda request: (200, vector()))
    yield server
    server.close()


@pytest.fixture
def metrics() -> observe.Metrics:
    return observe.Metrics()


@pytest.fixture
def source(
    fake_prometheus: FakeServer, metrics: observe.Metrics
) -> Iterator[prometheus.PrometheusClient]:
    config = prometheus.PrometheusConfig(url=fake_prometheus.url, timeout_s=1.0, retries=0)
    src = prometheus.PrometheusClient(config, metrics=metrics)
    yield src
    src.close()


def queries(server: FakeServer) -> list[str]:
    return [r.query["query"][0] for r in server.received("GET", "/api/v1/query")]


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- cluster objects -------------------------------------------------------------------


def node(name: str, *addresses: str) -> model.NodeInfo:
    return model.NodeInfo(
        name=model.NodeName(name),
        labels={},
        annotations={},
        taints=(),
        unschedulable=False,
        allocatable=model.Resources(milli_cpu=4000, memory=8 << 30, pods=110),
        addresses=addresses,
    )


def pod_info(name: str, namespace: str = "shop") -> model.PodInfo:
    return model.PodInfo(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        labels={},
        scheduler_name="metricsched",
        node_name="",
        requests=model.Resources(milli_cpu=100, pods=1),
        host_ports=(),
        node_selector={},
        required_node_affinity=(),
        tolerations=(),
        scheduling_gates=(),
        topology_spread=(),
        pod_affinity=(),
        pod_anti_affinity=(),
        unsupported=(),
        creation_timestamp=0.0,
        deleting=False,
        phase="Pending",
    )


@pytest.fixture
def three_nodes() -> list[model.NodeInfo]:
    return [
        node("node-a", "10.0.0.1", "node-a.internal"),
        node("node-b", "10.0.0.2"),
        node("node-c", "fd00::3"),
    ]


def metric(name: str, query: str, *, node_label: str = "node", weight: int = 1) -> model.MetricSpec:
    return model.MetricSpec(
        name=name,
        source=model.PrometheusSource(query=query, node_label=node_label),
        weight=weight,
        goal=model.Goal.MINIMIZE,
        threshold_min=None,
        threshold_max=None,
        on_missing=model.OnMissing.NEUTRAL,
    )


def policy(name: str, *metrics: model.MetricSpec, namespace: str = "shop") -> model.Policy:
    return model.Policy(
        namespace=namespace,
        name=name,
        generation=1,
        creation_timestamp=0.0,
        priority=0,
        pod_selector=model.LabelSelector(match_labels={}, match_expressions=()),
        metrics=metrics,
        max_metric_age_s=120.0,
        burst_penalty=5.0,
        burst_window_s=60.0,
        fallback=model.FallbackStrategy.LEAST_ALLOCATED,
    )


# --- Kubernetes API --------------------------------------------------------------------


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def kube_default(request: Request) -> tuple[int, Any]:
    """What a healthy API server answers to the writes the edges make."""
    if request.method == "POST" and request.path.endswith(("/binding", "/eviction")):
        return 201, status_body(201, "", "")
    if request.method in ("POST", "PATCH") and "/events" in request.path:
        body = request.json()
        return (201 if request.method == "POST" else 200), {"kind": "Event", **body}
    if request.method == "PATCH" and request.path.endswith("/status"):
        return 200, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}
    return 404, status_body(404, "NotFound", "not found")


@pytest.fixture
def fake_kube() -> Iterator[FakeServer]:
    server = FakeServer(kube_default)
    yield server
    server.close()


class Runner:
    """One event loop for a test, so that an ``AsyncApi``'s session lives across calls:
    ``run(binder.bind(http, ...))`` reads like the blocking call it replaced."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.loop.close()


@pytest.fixture
def run() -> Iterator[Runner]:
    runner = Runner()
    yield runner
    runner.close()


def async_api(url: str, **settings: Any) -> kube_http.AsyncApi:
    """The writers' API object production passes (``kube_http.AsyncApi``), aimed at
    ``url``; ``settings`` are set on its kubernetes ``Configuration``."""
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    for name, value in settings.items():
        setattr(configuration, name, value)
    return kube_http.AsyncApi(kubernetes.client.ApiClient(configuration))


@pytest.fixture
def writes_api(fake_kube: FakeServer, run: Runner) -> Iterator[kube_http.AsyncApi]:
    api = async_api(fake_kube.url)
    yield api
    run(api.close())


class FakeClock:
    def __init__(self, now: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def wait_for(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# --- a refresh round, as the operator (and explain) run it -----------------------------


def refresh_round(
    *,
    source: Any,
    store: Any,
    policies: list[model.Policy],
    nodes: list[model.NodeInfo],
    metrics: Any = None,
) -> list[Any]:
    """One round of the runtime's refresher (``Refresher.refresh_once``, one query at a
    time) over ``policies`` and ``nodes``; the results, in the policies' metric order."""
    import asyncio

    from metricsched.edges import observe as observe_mod
    from metricsched.runtime import cache as cache_mod
    from metricsched.runtime import gates as gates_mod
    from metricsched.runtime import queue as queue_mod
    from metricsched.runtime import refresher as refresher_mod
    from metricsched.runtime import status as status_mod
    from tests.unit.runtime import test_policy_lifecycle as lifecycle

    metrics = metrics or observe_mod.Metrics()
    cache = cache_mod.ClusterCache()
    for found in nodes:
        cache.upsert_node(found)
    status = status_mod.PolicyStatus(
        api=None,  # type: ignore[arg-type]
        policies=lambda: cache.policies,
        nodes=cache.nodes,
        counters=lambda key: (0, 0),
        metrics=metrics,
        gates=gates_mod.Gates(),
        interval_s=15.0,
    )
    for found in policies:
        cache.upsert_policy(found)
        status.records[found.key] = status_mod.PolicyRecord()
    refresher = refresher_mod.Refresher(
        source=source,
        store=store,
        cache=cache,
        queue=queue_mod.SchedulingQueue(),
        keep_result=lifecycle.owner(cache, status).refreshed,
        metrics=metrics,
        gates=gates_mod.Gates(),
        post_event=lambda key, **kw: None,
        interval_s=15.0,
        deadline_s=30.0,
        concurrency=1,
    )
    asyncio.run(refresher.refresh_once())
    return [
        status.records[found.key].metrics[spec.name]
        for found in policies
        for spec in found.metrics
        if spec.name in status.records[found.key].metrics
    ]
