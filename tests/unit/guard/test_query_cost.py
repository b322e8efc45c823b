"""With query rules on, a policy's query may not cost Prometheus unboundedly: long ranges
and subqueries that evaluate their inner query too often are refused, with a message the
policy author can act on (issue 24, finding 9: the rules bounded what a query selects,
not what it costs, so ``[30d:1s]`` kept Prometheus's query slots busy for every tenant)."""

from __future__ import annotations

import pytest

from metricsched.core import promql_guard

RULES = promql_guard.Rules(
    required_matchers=(promql_guard.parse_required_matcher("namespace={namespace}"),)
)
SEL = 'x{namespace="shop"}'


def _check(query: str) -> str | None:
    return promql_guard.check(query, namespace="shop", rules=RULES)


@pytest.mark.parametrize(
    "query",
    [
        f"max_over_time(rate({SEL}[5m])[10m:30s])",
        f"avg_over_time({SEL}[1h])",
        f"max_over_time(rate({SEL}[5m])[16h:])",  # 960 evaluations at the default 1m step
        f"max_over_time({SEL}[1d:2m])",  # 720: a day's window is the limit, included
        f"max_over_time(max_over_time({SEL}[10m:1m])[1h:1m])",  # 10 x 60
        f"rate({SEL}[5m]) / rate({SEL}[5m] offset 30d)",  # an offset costs no range
    ],
)
def test_queries_of_ordinary_cost_are_allowed(query: str) -> None:
    assert _check(query) is None


def test_a_fine_subquery_step_over_a_long_window_is_refused_with_its_cost() -> None:
    reason = _check(f"max_over_time(rate({SEL}[5m])[12h:1s])")
    assert reason == (
        "the subquery [12h:1s] evaluates its inner query 43200 times (the limit is 1000,"
        " nested subqueries multiplied): use a larger step or a shorter range"
    )


def test_a_subquery_without_a_step_is_counted_at_the_default_evaluation_interval() -> None:
    reason = _check(f"max_over_time(rate({SEL}[5m])[20h:])")
    assert reason is not None
    assert reason.startswith("the subquery [20h:] evaluates its inner query 1200 times at a 1m")


def test_nested_subqueries_multiply() -> None:
    reason = _check(f"max_over_time(max_over_time({SEL}[1h:1m])[1h:1m])")
    assert reason is not None
    assert "evaluates its inner query 3600 times" in reason


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        (f"max_over_time(rate({SEL}[5m])[30d:1s])", "[30d]"),
        (f"rate({SEL}[2d])", "[2d]"),
        (f"max_over_time({SEL}[90000s])", "[25h]"),
    ],
)
def test_a_window_longer_than_a_day_is_refused(query: str, shown: str) -> None:
    assert _check(query) == (
        f"the range {shown} is longer than the 1d the cluster's query rules allow"
    )


def test_without_rules_prometheus_judges_the_cost() -> None:
    query = f"max_over_time(rate({SEL}[5m])[30d:1s])"
    assert promql_guard.check(query, namespace="shop", rules=promql_guard.Rules()) is None
