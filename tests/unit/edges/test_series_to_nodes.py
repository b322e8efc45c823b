"""One instant query per call, and how its series become per-node values."""

from __future__ import annotations

import math
import pathlib

import edges_fakes as fakes

from metricsched.core import model
from metricsched.edges import prometheus

NOW = 1_000.0
Nodes = list[model.NodeInfo]


def run(
    source: prometheus.PrometheusClient,
    nodes: list[model.NodeInfo],
    *,
    label: str = "node",
) -> prometheus.QueryReport:
    return source.query_nodes_report("up", node_label=label, nodes=nodes, now=NOW, namespace="shop")


def values(report: prometheus.QueryReport) -> dict[str, float]:
    return {name: sample.value for name, sample in report.series.values.items()}


def test_query_is_sent_once_as_an_instant_query(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.vector(({"node": "node-a"}, "1")))
    source.query_nodes(
        "avg by (node) (rate(x[1m]))",
        node_label="node",
        nodes=three_nodes,
        now=NOW,
        namespace="shop",
    )
    assert fakes.queries(fake_prometheus) == ["avg by (node) (rate(x[1m]))"]


def test_series_named_by_node_name_map_to_that_node(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(({"node": "node-a"}, "0.25"), ({"node": "node-b"}, "3")),
    )
    report = run(source, three_nodes)
    assert values(report) == {"node-a": 0.25, "node-b": 3.0}
    assert report.series.error is None
    assert report.series.error_message == ""


def test_samples_carry_the_time_of_the_refresh_that_returned_them(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.vector(({"node": "node-a"}, "1")))
    series = source.query_nodes(
        "up", node_label="node", nodes=three_nodes, now=NOW, namespace="shop"
    )
    assert series.values[model.NodeName("node-a")] == model.MetricSample(1.0, refreshed_at=NOW)
    assert series.last_refresh == NOW


def test_host_port_instance_matches_a_node_address(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(
            ({"instance": "10.0.0.2:9100"}, "7"), ({"instance": "node-a.internal:9100"}, "8")
        ),
    )
    assert values(run(source, three_nodes, label="instance")) == {
        "node-b": 7.0,
        "node-a": 8.0,
    }


def test_bracketed_ipv6_with_port_matches_a_node_address(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.vector(({"instance": "[fd00::3]:9100"}, "5")))
    assert values(run(source, three_nodes, label="instance")) == {"node-c": 5.0}


def test_bare_ipv6_address_matches_without_losing_its_last_group(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (200, fakes.vector(({"instance": "fd00::3"}, "5")))
    assert values(run(source, three_nodes, label="instance")) == {"node-c": 5.0}


def test_node_name_with_port_matches_that_node(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(({"instance": "node-b:9100"}, "2")),
    )
    assert values(run(source, three_nodes, label="instance")) == {"node-b": 2.0}


def test_series_of_unknown_nodes_or_without_the_label_are_ignored_and_counted(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(
            ({"node": "node-a"}, "1"),
            ({"node": "gone-node"}, "2"),
            ({"node": "10.9.9.9:9100"}, "3"),
            ({"job": "no-node-label"}, "4"),
        ),
    )
    report = run(source, three_nodes)
    assert values(report) == {"node-a": 1.0}
    assert report.series_total == 4
    assert report.series_unknown_node == 3
    assert report.series.error is None


def test_nan_and_unparsable_values_are_dropped_and_infinities_kept_as_values(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(
            ({"node": "node-a"}, "NaN"),
            ({"node": "node-b"}, "+Inf"),
            ({"node": "node-c"}, "not-a-number"),
            ({"node": "node-c"}, "-Inf"),
        ),
    )
    report = run(source, three_nodes)
    assert values(report) == {"node-b": math.inf, "node-c": -math.inf}
    assert report.values_dropped == 2


def test_duplicate_series_keep_the_first_by_sorted_labels_whatever_the_order(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    series = [
        ({"node": "node-a", "pod": "exporter-2"}, "20"),
        ({"node": "node-a", "pod": "exporter-1"}, "10"),
    ]
    fake_prometheus.responder = lambda r: (200, fakes.vector(*series))
    first = run(source, three_nodes)
    fake_prometheus.responder = lambda r: (200, fakes.vector(*reversed(series)))
    second = run(source, three_nodes)
    assert values(first) == values(second) == {"node-a": 10.0}
    assert first.series_duplicate == second.series_duplicate == 1


def test_a_series_naming_the_node_beats_one_matched_by_address(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient, three_nodes: Nodes
) -> None:
    fake_prometheus.responder = lambda r: (
        200,
        fakes.vector(({"instance": "10.0.0.1:9100"}, "1"), ({"instance": "node-a"}, "2")),
    )
    report = run(source, three_nodes, label="instance")
    assert values(report) == {"node-a": 2.0}
    assert report.series_duplicate == 1


def test_bearer_token_is_read_from_its_file_for_every_query(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    config = prometheus.PrometheusConfig(
        url=fake_prometheus.url, token_file=str(token_file), timeout_s=1.0, retries=0
    )
    source = prometheus.PrometheusClient(config)
    nodes = [fakes.node("node-a")]
    source.query_nodes("up", node_label="node", nodes=nodes, now=NOW, namespace="shop")
    token_file.write_text("rotated-token\n")
    source.query_nodes("up", node_label="node", nodes=nodes, now=NOW, namespace="shop")
    source.close()
    assert [r.headers.get("authorization") for r in fake_prometheus.requests] == [
        "Bearer first-token",
        "Bearer rotated-token",
    ]


def test_no_authorization_header_without_a_token_file(
    fake_prometheus: fakes.FakeServer, source: prometheus.PrometheusClient
) -> None:
    source.query_nodes(
        "up", node_label="node", nodes=[fakes.node("node-a")], now=NOW, namespace="shop"
    )
    assert "authorization" not in fake_prometheus.requests[0].headers
