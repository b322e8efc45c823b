"""A policy's messages (status, events) carry the numbers its decisions used, never the
labels of series it did not match nor Prometheus's raw error text; a query the admin's
rules refuse is never sent."""

from __future__ import annotations

import edges_fakes as fakes
import hypothesis
import hypothesis.strategies as st
import pytest

from metricsched.core import model, promql_guard
from metricsched.edges import metric_store, observe, prometheus, query_rounds

NOW = 7_000.0
NODES = [fakes.node("node-a", "10.0.0.1"), fakes.node("node-b", "10.0.0.2")]
Kind = model.QueryErrorKind
SECRET_LABELS = {"node": "db-7", "tenant": "bank", "card": "4111-1111"}
OPEN = promql_guard.Rules()
NAMESPACED = promql_guard.Rules(
    allowed_metrics=("node_*",),
    required_matchers=(promql_guard.parse_required_matcher("namespace={namespace}"),),
)


def make_source(
    url: str,
    *,
    rules: promql_guard.Rules = OPEN,
    metrics: observe.Metrics | None = None,
) -> prometheus.PrometheusClient:
    config = prometheus.PrometheusConfig(url=url, timeout_s=1.0, retries=0, rules=rules)
    return prometheus.PrometheusClient(config, metrics=metrics)


def query(source: prometheus.PrometheusClient, promql: str = "up") -> prometheus.QueryReport:
    return source.query_nodes_report(
        promql, node_label="node", nodes=NODES, now=NOW, namespace="shop"
    )


class TestPrometheusErrorsAreScrubbed:
    def test_an_execution_error_listing_series_becomes_a_fixed_sentence(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        error = (
            'found duplicate series for the match group {node="db-7"} on the right hand-side'
            ' of the operation: [{__name__="secret", node="db-7", tenant="bank"},'
            ' {__name__="secret", node="db-7", tenant="acme"}];many-to-many matching not'
            " allowed: matching labels must be unique on one side"
        )
        fake_prometheus.responder = lambda r: (422, fakes.prom_error("execution", error))
        message = query(make_source(fake_prometheus.url)).series.error_message
        assert message == (
            "Prometheus rejected the query: many-to-many matching not allowed: the series on"
            " one side of an operation are not unique for its matching labels"
        )

    def test_a_parse_error_keeps_its_position_but_not_label_sets(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        error = '1:12: parse error: unexpected identifier "x" in {tenant="bank"}'
        fake_prometheus.responder = lambda r: (400, fakes.prom_error("bad_data", error))
        message = query(make_source(fake_prometheus.url)).series.error_message
        assert message == (
            'Prometheus rejected the query: bad_data: 1:12: parse error: unexpected identifier "x"'
            " in {…}"
        )

    def test_an_unknown_execution_error_is_reduced_to_its_type(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        error = 'expanding series: remote read of {tenant="bank"} failed at db-7'
        fake_prometheus.responder = lambda r: (422, fakes.prom_error("execution", error))
        message = query(make_source(fake_prometheus.url)).series.error_message
        assert message == (
            "Prometheus rejected the query: execution: Prometheus gave no detail it is safe"
            " to repeat here"
        )

    @pytest.mark.parametrize("status", [401, 403, 404, 500, 503])
    def test_the_body_of_another_status_is_never_repeated(
        self, fake_prometheus: fakes.FakeServer, status: int
    ) -> None:
        fake_prometheus.responder = lambda r: (
            status,
            fakes.prom_error("unavailable", 'db-7 {tenant="bank"} is down'),
        )
        message = query(make_source(fake_prometheus.url)).series.error_message
        assert str(status) in message
        assert "db-7" not in message
        assert "bank" not in message

    @hypothesis.settings(max_examples=50)
    @hypothesis.given(
        value=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=8, max_size=20),
        error_type=st.sampled_from(["bad_data", "execution", "internal", "timeout", "weird"]),
        template=st.sampled_from(
            [
                'parse error at {{secret="{v}"}}',
                'found duplicate series [{{tenant="{v}"}}, {{x="1"}}] many-to-many matching'
                " not allowed",
                'vector cannot contain metrics with the same labelset {{a="{v}"}}',
                "{v}",
                'error {{card="{v}"}} and more {{x="{v}"}}',
            ]
        ),
    )
    def test_no_label_value_inside_a_label_set_survives_scrubbing(
        self, value: str, error_type: str, template: str
    ) -> None:
        scrubbed = prometheus.scrub_prometheus_error(
            error_type=error_type, error=template.format(v=value)
        )
        # A value that is part of the scrubber's own words (e.g. "executio" of
        # "execution: ...") says nothing about a leak: the same message with a value
        # outside the alphabet shows which words are the scrubber's.
        own = prometheus.scrub_prometheus_error(
            error_type=error_type, error=template.format(v="Q" * len(value))
        )
        hypothesis.assume(value not in own)
        if template != "{v}" or error_type != "bad_data":
            assert value not in scrubbed


class TestUnmatchedSeriesAreNotEchoed:
    @pytest.mark.parametrize(
        "labels",
        [SECRET_LABELS, {"instance": "db-7:9100", "tenant": "bank"}, {"card": "4111-1111"}],
    )
    def test_labels_of_series_naming_no_node_never_reach_the_message(
        self, fake_prometheus: fakes.FakeServer, labels: dict[str, str]
    ) -> None:
        fake_prometheus.responder = lambda r: (200, fakes.vector((labels, "42")))
        series = query(make_source(fake_prometheus.url)).series
        assert series.error is Kind.EMPTY_RESULT
        for name, value in labels.items():
            if name != "node":  # the policy's own nodeLabel is named, the others are not
                assert name not in series.error_message
            assert value not in series.error_message
        assert "42" not in series.error_message

    def test_a_matched_node_keeps_its_value_and_the_unmatched_leave_no_trace(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        fake_prometheus.responder = lambda r: (
            200,
            fakes.vector(({"node": "node-a"}, "0.5"), (SECRET_LABELS, "99")),
        )
        report = query(make_source(fake_prometheus.url))
        assert report.series.error is None
        assert report.series.error_message == ""
        assert {n: s.value for n, s in report.series.values.items()} == {"node-a": 0.5}
        assert report.series_unknown_node == 1


class TestRefusedQueriesAreNotSent:
    def test_a_refused_query_is_a_bad_query_and_nothing_goes_over_the_wire(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        metrics = observe.Metrics()
        source = make_source(fake_prometheus.url, rules=NAMESPACED, metrics=metrics)
        report = query(source, "secret_total")
        assert report.series.error is Kind.BAD_QUERY
        assert report.series.error_message == (
            "refused by the cluster's query rules, not sent: metric secret_total is not in"
            " the cluster's allow-list (node_*)"
        )
        assert fake_prometheus.requests == []
        registry = metrics.registry
        assert registry.get_sample_value("metricsched_prometheus_queries_total") == 0
        # Not a Prometheus error either: Prometheus was never asked.
        assert (
            registry.get_sample_value("metricsched_prometheus_errors_total", {"kind": "BadQuery"})
            is None
        )

    def test_an_allowed_query_is_sent(self, fake_prometheus: fakes.FakeServer) -> None:
        fake_prometheus.responder = lambda r: (200, fakes.vector(({"node": "node-a"}, "1")))
        report = query(
            make_source(fake_prometheus.url, rules=NAMESPACED), 'node_load1{namespace="shop"}'
        )
        assert report.series.error is None
        assert fakes.queries(fake_prometheus) == ['node_load1{namespace="shop"}']

    def test_policies_share_a_query_only_where_the_rules_allow_each_of_them(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        fake_prometheus.responder = lambda r: (200, fakes.vector(({"node": "node-a"}, "1")))
        shop_query = 'node_load1{namespace="shop"}'
        policies = [
            fakes.policy("web", fakes.metric("load", shop_query), namespace="shop"),
            fakes.policy("api", fakes.metric("load", shop_query), namespace="shop"),
            # The same text from another namespace reads shop's series: refused for it.
            fakes.policy("spy", fakes.metric("load", shop_query), namespace="bank"),
        ]
        results = fakes.refresh_round(
            source=make_source(fake_prometheus.url, rules=NAMESPACED),
            store=metric_store.MetricStore(),
            policies=policies,
            nodes=NODES,
        )
        by_policy = {r.policy: r for r in results}
        assert by_policy[model.PolicyKey("shop/web")].error is None
        assert by_policy[model.PolicyKey("shop/api")].error is None
        spy = by_policy[model.PolicyKey("bank/spy")]
        assert spy.error is Kind.BAD_QUERY
        assert 'namespace="bank"' in spy.error_message
        assert not spy.queried
        assert fakes.queries(fake_prometheus) == [shop_query]


class TestQueryGroups:
    def test_a_text_shared_across_namespaces_is_split_by_what_the_rules_say(self) -> None:
        shop_query = 'node_load1{namespace="shop"}'
        web = fakes.policy("web", fakes.metric("load", shop_query), namespace="shop")
        api = fakes.policy("api", fakes.metric("load", shop_query), namespace="shop")
        spy = fakes.policy("spy", fakes.metric("load", shop_query), namespace="bank")
        groups = query_rounds.guarded_query_groups(
            [web, spy, api], guard=promql_guard.Guard(NAMESPACED)
        )
        assert [(key.namespace, key.refusal is None, len(m)) for key, m in groups] == [
            ("shop", True, 2),
            ("bank", False, 1),
        ]

    def test_without_rules_one_group_serves_every_namespace(self) -> None:
        query = "avg by (node) (node_load1)"
        policies = [
            fakes.policy("web", fakes.metric("load", query), namespace="shop"),
            fakes.policy("spy", fakes.metric("load", query), namespace="bank"),
        ]
        ((key, members),) = query_rounds.guarded_query_groups(
            policies, guard=promql_guard.Guard(OPEN)
        )
        assert key.refusal is None
        assert len(members) == 2
        assert query_rounds.query_groups(policies) == [((query, "node"), members)]

    def test_a_query_sent_without_its_namespace_is_refused_while_rules_are_set(
        self, fake_prometheus: fakes.FakeServer
    ) -> None:
        source = make_source(fake_prometheus.url, rules=NAMESPACED)
        report = source.query_nodes_report(
            'node_load1{namespace="shop"}', node_label="node", nodes=NODES, now=NOW
        )
        assert report.series.error is Kind.BAD_QUERY
        assert "namespace was not given" in report.series.error_message
        assert fake_prometheus.requests == []


def test_a_redirect_is_not_followed_and_says_so(fake_prometheus: fakes.FakeServer) -> None:
    fake_prometheus.responder = lambda r: (302, b"")
    report = query(make_source(fake_prometheus.url))
    assert report.series.error is Kind.UNREACHABLE
    assert "HTTP 302: a redirect, not followed" in report.series.error_message
    assert len(fake_prometheus.requests) == 1
