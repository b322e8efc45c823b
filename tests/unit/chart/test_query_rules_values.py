"""The chart's query rules and answer caps become the operator's flags (README: Security)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import chart_helpers as ch
import pytest

from metricsched import config
from metricsched.core import promql_guard


def operator_config(*sets: str, values: Sequence[Path] = ()) -> config.Config:
    env = ch.env(ch.render(*sets, values=values))
    return config.from_args(
        argparse.Namespace(), {k: v for k, v in env.items() if isinstance(v, str)}
    )


def test_by_default_any_query_is_allowed_under_the_default_caps() -> None:
    env = ch.env(ch.render())
    assert "METRICSCHED_QUERY_ALLOWED_METRICS" not in env
    assert "METRICSCHED_QUERY_REQUIRED_MATCHERS" not in env
    parsed = operator_config()
    assert not parsed.query_rules.enabled
    assert (parsed.max_result_series, parsed.max_result_bytes) == (10_000, 8 * 1024 * 1024)


def test_rules_and_caps_set_in_values_reach_the_operator(tmp_path: Path) -> None:
    values = tmp_path / "tenant-values.yaml"
    values.write_text(
        "prometheus:\n"
        "  queryRules:\n"
        '    allowedMetrics: ["node_*", "up"]\n'
        '    requiredMatchers: ["namespace={namespace}"]\n'
        "  resultLimits: {maxSeries: 2000000, maxBytes: 64Mi}\n"
    )
    parsed = operator_config(values=[values])
    assert parsed.query_rules == promql_guard.Rules(
        allowed_metrics=("node_*", "up"),
        required_matchers=(promql_guard.RequiredMatcher("namespace", "{namespace}"),),
    )
    assert parsed.max_result_series == 2_000_000
    assert parsed.max_result_bytes == 64 * 1024 * 1024


@pytest.mark.parametrize(
    "bad",
    [
        "prometheus.queryRules.requiredMatchers={namespace}",  # no value
        "prometheus.queryRules.allowedMetrics[0]=up-job",  # not a metric name pattern
        "prometheus.resultLimits.maxBytes=8MB",
        "prometheus.resultLimits.maxSeries=0",
        "prometheus.queryRules.deny=x",
    ],
)
def test_rule_and_cap_values_outside_the_schema_are_refused(bad: str) -> None:
    assert "values don't meet the specifications of the schema" in ch.render_error(bad)
