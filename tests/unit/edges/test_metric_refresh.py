"""One refresh round (the runtime's refresher, as the operator and explain run it): one
query per distinct PromQL, results per policy metric."""

from __future__ import annotations

import dataclasses

import edges_fakes as fakes

from metricsched.core import model
from metricsched.edges import metric_store, observe, prometheus

NOW = 3_000.0
LATENCY_Q = "avg by (node) (latency)"
CPU_Q = "avg by (node) (cpu)"


def answer_by_query(request: fakes.Request) -> tuple[int, object]:
    promql = request.query["query"][0]
    if promql == LATENCY_Q:
        return 200, fakes.vector(({"node": "node-a"}, "0.1"), ({"node": "node-b"}, "0.2"))
    if promql == CPU_Q:
        return 200, fakes.vector(({"node": "node-a"}, "0.5"))
    return 400, fakes.prom_error("bad_data", "unknown query")


def test_metrics_sharing_a_query_cause_exactly_one_query_per_refresh(
    fake_prometheus: fakes.FakeServer,
    source: prometheus.PrometheusClient,
    three_nodes: list[model.NodeInfo],
) -> None:
    fake_prometheus.responder = answer_by_query
    policies = [
        fakes.policy("web", fakes.metric("latency", LATENCY_Q), fakes.metric("cpu", CPU_Q)),
        fakes.policy("api", fakes.metric("lat", LATENCY_Q)),
        fakes.policy("batch", fakes.metric("cpu", CPU_Q), namespace="jobs"),
    ]
    store = metric_store.MetricStore()
    results = fakes.refresh_round(
        source=source,
        store=store,
        policies=policies,
        nodes=three_nodes,
    )
    assert sorted(fakes.queries(fake_prometheus)) == sorted([LATENCY_Q, CPU_Q])
    assert [(r.policy, r.metric) for r in results] == [
        ("shop/web", "latency"),
        ("shop/web", "cpu"),
        ("shop/api", "lat"),
        ("jobs/batch", "cpu"),
    ]
    assert sum(r.queried for r in results) == 2
    view = store.view()
    assert set(view) == {model.MetricKey(model.PolicyKey(r.policy), r.metric) for r in results}
    shared = view[model.MetricKey(model.PolicyKey("shop/api"), "lat")]
    assert {n: s.value for n, s in shared.values.items()} == {"node-a": 0.1, "node-b": 0.2}


def test_results_count_nodes_reporting_and_missing(
    fake_prometheus: fakes.FakeServer,
    source: prometheus.PrometheusClient,
    three_nodes: list[model.NodeInfo],
) -> None:
    fake_prometheus.responder = answer_by_query
    policies = [fakes.policy("web", fakes.metric("latency", LATENCY_Q))]
    (result,) = fakes.refresh_round(
        source=source,
        store=metric_store.MetricStore(),
        policies=policies,
        nodes=three_nodes,
    )
    assert (result.nodes_reporting, result.nodes_missing) == (2, 1)
    assert result.error is None
    assert result.duration_s > 0


def test_node_annotation_metrics_are_not_queried(
    fake_prometheus: fakes.FakeServer,
    source: prometheus.PrometheusClient,
    three_nodes: list[model.NodeInfo],
) -> None:
    price = dataclasses.replace(
        fakes.metric("price", "unused"), source=model.AnnotationSource("example.com/price")
    )
    results = fakes.refresh_round(
        source=source,
        store=metric_store.MetricStore(),
        policies=[fakes.policy("web", price)],
        nodes=three_nodes,
    )
    assert results == []
    assert fake_prometheus.requests == []


def test_a_query_error_is_reported_for_every_metric_that_shares_it(
    fake_prometheus: fakes.FakeServer,
    source: prometheus.PrometheusClient,
    three_nodes: list[model.NodeInfo],
) -> None:
    fake_prometheus.responder = answer_by_query
    policies = [
        fakes.policy("web", fakes.metric("broken", "rate(")),
        fakes.policy("api", fakes.metric("also-broken", "rate(")),
    ]
    results = fakes.refresh_round(
        source=source,
        store=metric_store.MetricStore(),
        policies=policies,
        nodes=three_nodes,
    )
    assert [r.error for r in results] == [model.QueryErrorKind.BAD_QUERY] * 2
    assert all("unknown query" in r.error_message for r in results)
    assert (results[0].nodes_reporting, results[0].nodes_missing) == (0, 3)
    assert len(fake_prometheus.requests) == 1


def test_when_prometheus_is_down_the_rest_of_the_round_is_not_attempted(
    three_nodes: list[model.NodeInfo],
) -> None:
    config = prometheus.PrometheusConfig(
        url=f"http://127.0.0.1:{fakes.closed_port()}", timeout_s=1.0, retries=0
    )
    source = prometheus.PrometheusClient(config)
    store = metric_store.MetricStore()
    key = model.MetricKey(model.PolicyKey("shop/web"), "cpu")
    store.update(key, model.MetricSeries({}, 0.0, None, ""))
    policies = [fakes.policy("web", fakes.metric("latency", LATENCY_Q), fakes.metric("cpu", CPU_Q))]
    results = fakes.refresh_round(
        source=source,
        store=store,
        policies=policies,
        nodes=three_nodes,
    )
    assert [r.error for r in results] == [model.QueryErrorKind.UNREACHABLE] * 2
    assert [r.queried for r in results] == [True, False]
    assert results[1].error_message.startswith("not attempted: Prometheus at")
    assert store.view()[key].error is model.QueryErrorKind.UNREACHABLE


def test_refresh_durations_are_recorded_per_policy_metric(
    fake_prometheus: fakes.FakeServer,
    three_nodes: list[model.NodeInfo],
) -> None:
    fake_prometheus.responder = answer_by_query
    metrics = observe.Metrics()
    source = prometheus.PrometheusClient(
        prometheus.PrometheusConfig(url=fake_prometheus.url, timeout_s=1.0, retries=0),
        metrics=metrics,
    )
    policies = [
        fakes.policy("web", fakes.metric("latency", LATENCY_Q)),
        fakes.policy("api", fakes.metric("lat", LATENCY_Q)),
    ]
    fakes.refresh_round(
        source=source,
        store=metric_store.MetricStore(),
        policies=policies,
        nodes=three_nodes,
        metrics=metrics,
    )
    registry = metrics.registry
    for policy, metric in [("shop/web", "latency"), ("shop/api", "lat")]:
        count = registry.get_sample_value(
            "metricsched_metric_refresh_duration_seconds_count",
            {"policy": policy, "metric": metric},
        )
        assert count == 1
    assert registry.get_sample_value("metricsched_prometheus_queries_total") == 1
