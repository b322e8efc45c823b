"""The query rules' check costs a bounded amount whatever the query, and a round does not
re-check a query it has already judged (issue 24, finding 1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest

from metricsched.core import model, policy, promql_guard
from metricsched.edges import prometheus, query_rounds

NAMESPACED = promql_guard.Rules(
    required_matchers=(promql_guard.parse_required_matcher("namespace={namespace}"),)
)
FIXED = promql_guard.Rules(
    allowed_metrics=("node_*", "up"),
    required_matchers=(promql_guard.parse_required_matcher('cluster="prod"'),),
)


class ParseCounter:
    """Counts calls to ``promql_parser.parse`` (and still parses)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.real = promql_parser.parse

    def __call__(self, query: str) -> Any:
        self.calls.append(query)
        return self.real(query)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[ParseCounter]:
    counter = ParseCounter()
    monkeypatch.setattr(promql_parser, "parse", counter)
    yield counter


def _policy(name: str, namespace: str, *queries: str) -> model.Policy:
    return policy.policy_from_body(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": name, "generation": 1},
            "spec": {
                "metrics": [
                    {
                        "name": f"m{i}",
                        "prometheus": {"query": q, "nodeLabel": "node"},
                        "weight": 1,
                        "goal": "Minimize",
                    }
                    for i, q in enumerate(queries)
                ]
            },
        }
    )


class TestADeeplyNestedQueryIsRefusedBeforeItIsParsed:
    # The review's queries: 510 and 1,010 characters of unary minus stalled the event
    # loop 6 s and 40 s per round; 300 nested parentheses take the parser a third of a
    # second.
    @pytest.mark.parametrize(
        "query",
        [
            "-" * 500 + 'node_load1{namespace="shop"}',
            "-" * 1000 + 'node_load1{namespace="shop"}',
            "(" * 300 + 'node_load1{namespace="shop"}' + ")" * 300,
            "abs(" * 200 + 'up{namespace="shop"}' + ")" * 200,
            " + ".join(['up{namespace="shop"}'] * 150),
            "max_over_time(" * 100 + 'up{namespace="shop"}' + "[5m:1m])" * 100,
        ],
    )
    def test_the_refusal_says_why_and_nothing_is_parsed(
        self, query: str, parses: ParseCounter
    ) -> None:
        reason = promql_guard.check(query, namespace="shop", rules=NAMESPACED)
        assert reason is not None
        assert reason.startswith("the query is too complex to check")
        assert f"the limit is {promql_guard.MAX_STRUCTURE}" in reason
        assert parses.calls == []

    def test_a_query_longer_than_the_crd_admits_is_refused_unparsed(
        self, parses: ParseCounter
    ) -> None:
        query = 'up{namespace="shop", job="' + "x" * promql_guard.MAX_QUERY_CHARS + '"}'
        reason = promql_guard.check(query, namespace="shop", rules=NAMESPACED)
        assert reason is not None
        assert reason.startswith("the query is too long to check")
        assert parses.calls == []

    def test_without_rules_nothing_is_counted_or_parsed(self, parses: ParseCounter) -> None:
        assert (
            promql_guard.check("-" * 1000 + "up", namespace="shop", rules=promql_guard.Rules())
            is None
        )
        assert parses.calls == []


class TestTheBudgetCountsOnlyWhatNests:
    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("up", 0),
            ('up{namespace="shop", code=~"5..", job!="a"}', 0),  # matcher syntax is not nesting
            ('up{namespace="a or b"} or up{x="((("}', 1),  # strings are skipped
            ("rate(up[5m])", 2),
            ("a >= -b", 2),
            ("a and b unless c", 2),
            ("up # (((((( a comment\n", 0),
            ('sum by (node) (rate(x{namespace="shop"}[5m]))', 4),
        ],
    )
    def test_operators_and_opening_brackets_outside_strings_are_counted(
        self, query: str, expected: int
    ) -> None:
        assert promql_guard.structure(query) == expected

    def test_an_ordinary_ratio_of_rates_is_far_within_the_budget(self) -> None:
        query = (
            'sum by (node) (rate(http_request_duration_seconds_sum{namespace="shop"}[1m]))'
            ' / sum by (node) (rate(http_request_duration_seconds_count{namespace="shop"}[1m]))'
        )
        assert promql_guard.structure(query) < promql_guard.MAX_STRUCTURE // 8
        assert promql_guard.check(query, namespace="shop", rules=NAMESPACED) is None

    def test_a_query_at_the_budget_is_still_checked_to_its_deepest_selector(self) -> None:
        depth = promql_guard.MAX_STRUCTURE
        allowed = "-" * depth + 'node_load1{namespace="shop"}'
        foreign = "-" * depth + 'node_load1{namespace="bank"}'
        assert promql_guard.check(allowed, namespace="shop", rules=NAMESPACED) is None
        reason = promql_guard.check(foreign, namespace="shop", rules=NAMESPACED)
        assert reason is not None and 'namespace="shop"' in reason


class TestTheCheckReadsEachNodeOnce:
    def test_a_chain_of_n_operators_is_read_in_n_plus_one_steps(self) -> None:
        expr = promql_parser.parse("-" * 100 + "up")
        assert len(list(promql_guard.nodes(expr))) == 101

    def test_every_child_kind_is_reached(self) -> None:
        expr = promql_parser.parse(
            'topk(3, up{a="1"}) + label_replace(rate(x{a="1"}[5m:1m]), "d", "$1", "s", "(.*)")'
        )
        kinds = [type(n).__name__ for n in promql_guard.nodes(expr)]
        assert kinds.count("VectorSelector") == 2
        assert {"AggregateExpr", "NumberLiteral", "Call", "SubqueryExpr", "StringLiteral"} <= set(
            kinds
        )

    def test_promql_parsers_own_walk_is_not_used(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Its cost is roughly cubic in depth (the review's 40-s stall).
        def forbidden(*_: object, **__: object) -> bool:
            raise AssertionError("promql_parser.walk was called")

        monkeypatch.setattr(promql_parser, "walk", forbidden)
        query = "-" * 64 + 'sum(rate(up{namespace="shop"}[5m]))'
        assert promql_guard.check(query, namespace="shop", rules=NAMESPACED) is None


class TestVerdictsAreRemembered:
    def test_rounds_over_unchanged_policies_parse_each_query_once(
        self, parses: ParseCounter
    ) -> None:
        guard = promql_guard.Guard(NAMESPACED)
        policies = [
            _policy("web", "shop", 'up{namespace="shop"}', 'node_load1{namespace="shop"}'),
            _policy("api", "shop", 'up{namespace="shop"}'),
            _policy("spy", "bank", 'up{namespace="shop"}'),
        ]
        for _ in range(5):
            groups = query_rounds.guarded_query_groups(policies, guard=guard)
        # (query, namespace) pairs: the namespace rule makes the verdict differ by namespace.
        assert len(parses.calls) == 3
        refused = [key.namespace for key, _ in groups if key.refusal is not None]
        assert refused == ["bank"]

    def test_without_the_namespace_placeholder_one_verdict_serves_every_namespace(
        self, parses: ParseCounter
    ) -> None:
        guard = promql_guard.Guard(FIXED)
        for namespace in ("shop", "bank", "ops"):
            assert guard.check('up{cluster="prod"}', namespace=namespace) is None
        assert len(parses.calls) == 1

    def test_a_remembered_refusal_is_the_same_refusal(self) -> None:
        guard = promql_guard.Guard(NAMESPACED)
        first = guard.check('up{namespace="bank"}', namespace="shop")
        assert first is not None
        assert guard.check('up{namespace="bank"}', namespace="shop") == first
        assert guard.check('up{namespace="bank"}', namespace="bank") is None

    def test_the_memory_is_bounded_least_recently_used_first_out(
        self, parses: ParseCounter
    ) -> None:
        guard = promql_guard.Guard(NAMESPACED, max_entries=2)
        a, b, c = (f'{name}{{namespace="shop"}}' for name in ("a", "b", "c"))
        for query in (a, b, a, c):  # c evicts b, the least recently used
            guard.check(query, namespace="shop")
        assert parses.calls == [a, b, c]
        guard.check(a, namespace="shop")
        guard.check(b, namespace="shop")
        assert parses.calls == [a, b, c, b]

    def test_the_source_checks_a_query_once_for_the_round_and_the_send(
        self, parses: ParseCounter
    ) -> None:
        source = prometheus.PrometheusClient(
            prometheus.PrometheusConfig(url="http://127.0.0.1:9", rules=NAMESPACED)
        )
        try:
            policies = [_policy("web", "shop", 'up{namespace="shop"}')]
            ((key, _),) = query_rounds.guarded_query_groups(policies, guard=source.guard)
            assert source.refusal(key.query, namespace=key.namespace) is None
        finally:
            source.close()
        assert len(parses.calls) == 1
