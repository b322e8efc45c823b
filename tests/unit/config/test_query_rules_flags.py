"""The admin's query rules and answer caps: flags and METRICSCHED_* variables."""

from __future__ import annotations

import argparse

import pytest

from metricsched import config as config_mod
from metricsched.core import promql_guard
from metricsched.edges import prometheus


def _parse(argv: list[str], env: dict[str, str] | None = None) -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args(argv), env or {})


def test_by_default_any_query_is_allowed_under_the_documented_caps() -> None:
    cfg = _parse([])
    assert cfg.query_rules == promql_guard.Rules()
    assert not cfg.query_rules.enabled
    assert cfg.max_result_series == 10_000
    assert cfg.max_result_bytes == 8 * 1024 * 1024


def test_flags_set_the_allow_list_and_the_required_matchers() -> None:
    cfg = _parse(
        [
            "--query-allowed-metric=node_*",
            "--query-allowed-metric=up",
            "--query-required-matcher=namespace={namespace}",
            "--max-result-series=500",
            "--max-result-bytes=512Ki",
        ]
    )
    assert cfg.query_rules == promql_guard.Rules(
        allowed_metrics=("node_*", "up"),
        required_matchers=(promql_guard.RequiredMatcher("namespace", "{namespace}"),),
    )
    assert cfg.max_result_series == 500
    assert cfg.max_result_bytes == 512 * 1024


def test_environment_variables_set_the_same_rules() -> None:
    cfg = _parse(
        [],
        {
            "METRICSCHED_QUERY_ALLOWED_METRICS": "node_*, up",
            "METRICSCHED_QUERY_REQUIRED_MATCHERS": 'namespace={namespace},cluster="prod"',
            "METRICSCHED_MAX_RESULT_BYTES": "1048576",
        },
    )
    assert cfg.query_rules.allowed_metrics == ("node_*", "up")
    assert cfg.query_rules.required_matchers == (
        promql_guard.RequiredMatcher("namespace", "{namespace}"),
        promql_guard.RequiredMatcher("cluster", "prod"),
    )
    assert cfg.max_result_bytes == 1024 * 1024


def test_the_prometheus_source_takes_its_rules_and_caps_from_the_flags() -> None:
    cfg = _parse(["--query-allowed-metric=up", "--max-result-series=7", "--max-result-bytes=1Mi"])
    source = prometheus.PrometheusConfig.from_config(cfg)
    assert source.rules.allowed_metrics == ("up",)
    assert source.limits.max_series == 7
    assert source.limits.max_bytes == 1024 * 1024
    assert source.url == cfg.prometheus_url


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"METRICSCHED_QUERY_REQUIRED_MATCHERS": "namespace"}, "LABEL=VALUE"),
        ({"METRICSCHED_MAX_RESULT_BYTES": "8MB"}, "not a positive size"),
        ({"METRICSCHED_MAX_RESULT_BYTES": "0"}, "not a positive size"),
        ({"METRICSCHED_MAX_RESULT_SERIES": "0"}, "outside"),
    ],
)
def test_bad_rule_or_cap_values_give_a_clear_error(env: dict[str, str], needle: str) -> None:
    with pytest.raises(config_mod.ConfigError, match=needle):
        _parse([], env)
