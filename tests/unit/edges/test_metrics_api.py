"""edges/metrics_api.py: one LIST of NodeMetrics read as utilisation over allocatable,
against a small aiohttp server on loopback standing in for the aggregated API (404: no
APIService, 503: its backend unavailable)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import kubernetes
import pytest
from aiohttp import web
from edges_fakes import node

from metricsched.core import model
from metricsched.edges import kube_http, metrics_api

CPU, MEMORY = model.EstimateResource.CPU, model.EstimateResource.MEMORY
NOW = 1_700_000_000.0
NODES = [node("n1"), node("n2")]  # 4000m and 8 GiB allocatable each


def node_metrics(name: str, *, cpu: str, memory: str, at: float = NOW - 30) -> dict[str, Any]:
    stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name},
        "timestamp": stamp,
        "window": "20.5s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def read(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> metrics_api.NodeUsage:
    """``read_nodes`` against a server answering the NodeMetrics LIST with ``handler``."""

    async def main() -> metrics_api.NodeUsage:
        app = web.Application()
        app.router.add_get(metrics_api.NODES_PATH, handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        cfg = kubernetes.client.Configuration()
        cfg.host = f"http://127.0.0.1:{port}"
        api = kube_http.AsyncApi(kubernetes.client.ApiClient(cfg))
        try:
            return await metrics_api.read_nodes(api, nodes=NODES, now=NOW, timeout_s=5.0)
        finally:
            await api.close()
            await runner.cleanup()

    return asyncio.run(main())


def answering(status: int, body: Any) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body, status=status)

    return handler


def test_usage_is_read_as_utilisation_over_allocatable_at_the_end_of_its_window() -> None:
    usage = read(
        answering(
            200,
            {
                "kind": "NodeMetricsList",
                "items": [
                    node_metrics("n1", cpu="3000000000n", memory="2Gi"),
                    node_metrics("n2", cpu="500m", memory="6442450944"),
                ],
            },
        )
    )
    cpu, memory = usage.series[CPU], usage.series[MEMORY]
    assert (cpu.error, memory.error) == (None, None)
    assert cpu.values[model.NodeName("n1")].value == pytest.approx(0.75)
    assert cpu.values[model.NodeName("n2")].value == pytest.approx(0.125)
    assert memory.values[model.NodeName("n1")].value == pytest.approx(0.25)
    assert memory.values[model.NodeName("n2")].value == pytest.approx(0.75)
    assert cpu.values[model.NodeName("n1")].refreshed_at == pytest.approx(NOW - 30 + 20.5)
    assert cpu.last_refresh == NOW
    assert (usage.items, usage.unknown_node, usage.dropped) == (2, 0, 0)


def test_unknown_nodes_and_unreadable_quantities_are_left_out_and_counted() -> None:
    usage = read(
        answering(
            200,
            {
                "items": [
                    node_metrics("gone", cpu="1", memory="1Gi"),
                    node_metrics("n1", cpu="lots", memory="1Gi"),
                    {"metadata": {"name": "n2"}},
                ]
            },
        )
    )
    assert usage.unknown_node == 1
    assert usage.dropped == 3  # n1's cpu, n2's cpu and memory
    assert set(usage.series[CPU].values) == set()
    assert set(usage.series[MEMORY].values) == {model.NodeName("n1")}


def test_a_sample_stamped_in_the_future_is_no_fresher_than_the_refresh() -> None:
    usage = read(
        answering(200, {"items": [node_metrics("n1", cpu="1", memory="1Gi", at=NOW + 600)]})
    )
    assert usage.series[CPU].values[model.NodeName("n1")].refreshed_at == NOW


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (404, "no APIService serves metrics.k8s.io"),
        (503, "the metrics.k8s.io APIService is not available"),
    ],
)
def test_a_missing_or_unavailable_metrics_api_is_metrics_api_unavailable(
    status: int, says: str
) -> None:
    usage = read(answering(status, {"kind": "Status", "message": "the server is busy"}))
    for series in usage.series.values():
        assert series.error is model.QueryErrorKind.METRICS_API_UNAVAILABLE
        assert series.error_message.startswith(f"{status}: {says}")
        assert series.error_message.endswith("the server is busy")
        assert series.values == {}


def test_another_error_status_is_unreachable_with_the_status_message() -> None:
    usage = read(answering(500, {"kind": "Status", "message": "etcd timed out"}))
    assert usage.series[CPU].error is model.QueryErrorKind.UNREACHABLE
    assert usage.series[CPU].error_message == "500: etcd timed out"


def test_an_answer_that_is_not_a_list_is_a_bad_result() -> None:
    usage = read(answering(200, {"kind": "NodeMetricsList", "items": "none"}))
    assert usage.series[MEMORY].error is model.QueryErrorKind.BAD_RESULT


def test_no_answer_at_all_is_unreachable() -> None:
    async def main() -> metrics_api.NodeUsage:
        cfg = kubernetes.client.Configuration()
        cfg.host = "http://127.0.0.1:9"  # discard: nothing listens
        api = kube_http.AsyncApi(kubernetes.client.ApiClient(cfg))
        try:
            return await metrics_api.read_nodes(api, nodes=NODES, now=NOW, timeout_s=2.0)
        finally:
            await api.close()

    usage = asyncio.run(main())
    assert usage.series[CPU].error is model.QueryErrorKind.UNREACHABLE
    assert usage.series[CPU].error_message.startswith("the API server did not answer")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20.0),
        ("10.5s", 10.5),
        ("1m0s", 60.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("", 0.0),
        ("x", 0.0),
    ],
)
def test_a_window_is_read_as_a_go_duration(text: str, seconds: float) -> None:
    item = node_metrics("n1", cpu="1", memory="1Gi", at=NOW - 100)
    item["window"] = text
    usage = metrics_api.usage_of([item], nodes=NODES, now=NOW)
    assert usage.series[CPU].values[model.NodeName("n1")].refreshed_at == pytest.approx(
        NOW - 100 + seconds
    )


def test_an_answer_past_the_size_cap_is_refused_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bytes from whatever backs the APIService: a cap, as for Prometheus's answers.
    monkeypatch.setattr(metrics_api, "MAX_ANSWER_BYTES", 10_000)
    items = [node_metrics(f"n{i}", cpu="1", memory="1Gi") for i in range(200)]
    usage = read(answering(200, {"kind": "NodeMetricsList", "items": items}))
    cpu = usage.series[CPU]
    assert cpu.error is model.QueryErrorKind.BAD_RESULT
    assert "too large" in cpu.error_message and "10000 bytes" in cpu.error_message
    # Under the cap, the same kind of answer is read.
    small = read(answering(200, {"kind": "NodeMetricsList", "items": items[:2]}))
    assert small.series[CPU].error is None
