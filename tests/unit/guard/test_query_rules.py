"""The admin's query rules: which PromQL a namespaced policy may have sent for it."""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import pytest

from metricsched.core import promql_guard

NAMESPACE_RULE = promql_guard.parse_required_matcher("namespace={namespace}")
NAMESPACED = promql_guard.Rules(required_matchers=(NAMESPACE_RULE,))
NODE_METRICS = promql_guard.Rules(allowed_metrics=("node_*", "up"))
BOTH = promql_guard.Rules(allowed_metrics=("node_*", "up"), required_matchers=(NAMESPACE_RULE,))


def refusal(query: str, rules: promql_guard.Rules, namespace: str = "shop") -> str | None:
    return promql_guard.check(query, namespace=namespace, rules=rules)


class TestWithoutRules:
    def test_any_query_is_allowed_unparsed(self) -> None:
        assert refusal("anything{ at all", promql_guard.Rules()) is None

    def test_empty_rules_are_not_enabled(self) -> None:
        assert not promql_guard.Rules().enabled
        assert NAMESPACED.enabled and NODE_METRICS.enabled


class TestRequiredMatchers:
    @pytest.mark.parametrize(
        "query",
        [
            'up{namespace="shop"}',
            'sum by (node) (rate(http_requests_total{namespace="shop", code=~"5.."}[5m]))',
            'max_over_time(up{namespace="shop"}[5m:1m] offset 1m)',
            'up{namespace="shop"} / on (node) group_left count(up{namespace="shop"})',
            "vector(1)",
            'label_replace(up{namespace="shop"}, "node", "$1", "instance", "(.*):.*")',
        ],
    )
    def test_a_query_whose_every_selector_carries_the_namespace_is_allowed(
        self, query: str
    ) -> None:
        assert refusal(query, NAMESPACED) is None

    @pytest.mark.parametrize(
        "query",
        [
            "up",
            'up{namespace="bank"}',
            'up{namespace=~"shop"}',
            'up{namespace!="shop"}',
            'up{namespace="shop"} + on () group_left secret_total',
            'sum(rate(up{namespace="shop"}[5m])) + sum(rate(up[5m]))',
            'up{namespace="shop" or job="x"}',
            "max_over_time(up[5m:1m])",
        ],
    )
    def test_a_selector_without_the_policy_namespace_is_refused(self, query: str) -> None:
        reason = refusal(query, NAMESPACED)
        assert reason is not None
        assert 'namespace="shop"' in reason

    def test_the_placeholder_is_the_policy_namespace_not_any_namespace(self) -> None:
        assert refusal('up{namespace="bank"}', NAMESPACED, namespace="bank") is None
        assert refusal('up{namespace="bank"}', NAMESPACED, namespace="shop") is not None

    def test_a_fixed_matcher_applies_to_every_namespace(self) -> None:
        rules = promql_guard.Rules(
            required_matchers=(promql_guard.parse_required_matcher('cluster="prod"'),)
        )
        assert refusal('up{cluster="prod"}', rules, namespace="any") is None
        assert refusal('up{cluster="dev"}', rules, namespace="any") is not None


class TestAllowedMetrics:
    def test_a_metric_on_the_allow_list_is_allowed(self) -> None:
        assert refusal('avg by (node) (node_load1{job="node"})', NODE_METRICS) is None
        assert refusal('{__name__="up"}', NODE_METRICS) is None

    def test_a_metric_off_the_allow_list_is_refused_by_name(self) -> None:
        reason = refusal("secret_total", NODE_METRICS)
        assert reason is not None
        assert "secret_total is not in the cluster's allow-list" in reason

    def test_a_metric_named_by_regex_is_refused(self) -> None:
        reason = refusal('{__name__=~"node_.*"}', NODE_METRICS)
        assert reason is not None
        assert "exactly" in reason

    def test_both_rules_apply_together(self) -> None:
        assert refusal('node_load1{namespace="shop"}', BOTH) is None
        assert refusal("node_load1", BOTH) is not None
        assert refusal('secret{namespace="shop"}', BOTH) is not None


class TestWhatCannotBeChecked:
    def test_a_query_that_does_not_parse_is_refused_when_rules_are_set(self) -> None:
        reason = refusal('up{namespace="shop"', BOTH)
        assert reason is not None
        assert reason.startswith("the query is not valid PromQL")

    def test_info_is_refused_because_it_selects_series_implicitly(self) -> None:
        reason = refusal('info(up{namespace="shop"})', BOTH)
        assert reason is not None
        assert "info()" in reason


class TestRuleFlags:
    @pytest.mark.parametrize(
        ("text", "label", "value"),
        [
            ("namespace={namespace}", "namespace", "{namespace}"),
            ('cluster="prod"', "cluster", "prod"),
            (" team = 'a' ", "team", "a"),
        ],
    )
    def test_a_required_matcher_is_label_equals_value(
        self, text: str, label: str, value: str
    ) -> None:
        assert promql_guard.parse_required_matcher(text) == promql_guard.RequiredMatcher(
            label=label, value=value
        )

    @pytest.mark.parametrize("text", ["namespace", "=x", "__name__=up", "9x=1", "team="])
    def test_a_malformed_required_matcher_is_an_error(self, text: str) -> None:
        with pytest.raises(promql_guard.RuleError):
            promql_guard.parse_required_matcher(text)


# --- properties ----------------------------------------------------------------------

metric_names = st.sampled_from(["up", "node_load1", "node_cpu_seconds_total", "secret_total"])
namespaces = st.sampled_from(["shop", "bank", "kube-system"])


@st.composite
def selectors(draw: st.DrawFn) -> tuple[str, bool]:
    """A selector and whether it satisfies BOTH for namespace shop."""
    name = draw(metric_names)
    namespace = draw(namespaces)
    extra = draw(st.sampled_from(["", ', job="x"', ', code=~"5.."']))
    ok = name != "secret_total" and namespace == "shop"
    return f'{name}{{namespace="{namespace}"{extra}}}', ok


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, bool]:
    """A query built from selectors by functions and operators, and whether BOTH allows it."""
    parts = draw(st.lists(selectors(), min_size=1, max_size=4))
    shapes = [
        lambda s: f"rate({s}[5m])",
        lambda s: f"sum by (node) ({s})",
        lambda s: f"max_over_time({s}[10m:1m])",
        lambda s: f"({s})",
        lambda s: s,
    ]
    texts = [draw(st.sampled_from(shapes))(text) for text, _ in parts]
    operator = draw(st.sampled_from([" + ", " / on (node) group_left () ", " and ", " or "]))
    return operator.join(texts), all(ok for _, ok in parts)


@hypothesis.given(queries())
def test_a_query_is_allowed_exactly_when_every_selector_is(case: tuple[str, bool]) -> None:
    query, allowed = case
    assert (refusal(query, BOTH) is None) == allowed


@hypothesis.given(st.text(max_size=200))
def test_no_text_makes_the_check_raise(text: str) -> None:
    result = refusal(text, BOTH)
    assert result is None or isinstance(result, str)
