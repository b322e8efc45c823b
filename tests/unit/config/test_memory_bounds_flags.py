"""The memory bounds: the operator-wide cap on stored metric values, the LIST page size."""

from __future__ import annotations

import argparse

import pytest

from metricsched import config as config_mod


def _parse(argv: list[str], env: dict[str, str] | None = None) -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args(argv), env or {})


def test_the_defaults_fit_the_charts_memory_limit_and_list_in_pages_of_500() -> None:
    cfg = _parse([])
    assert cfg.max_metric_values == 1_000_000  # ~100 bytes each: ~100 MiB of 512 MiB
    assert cfg.list_page_size == 500


def test_a_flag_wins_over_its_environment_variable() -> None:
    env = {"METRICSCHED_MAX_METRIC_VALUES": "5000", "METRICSCHED_LIST_PAGE_SIZE": "50"}
    assert _parse([], env).max_metric_values == 5000
    assert _parse([], env).list_page_size == 50
    cfg = _parse(["--max-metric-values", "7", "--list-page-size", "20"], env)
    assert (cfg.max_metric_values, cfg.list_page_size) == (7, 20)


@pytest.mark.parametrize(
    "env",
    [
        {"METRICSCHED_MAX_METRIC_VALUES": "0"},
        {"METRICSCHED_LIST_PAGE_SIZE": "0"},
        {"METRICSCHED_LIST_PAGE_SIZE": "20000"},
    ],
)
def test_a_bound_outside_its_range_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(config_mod.ConfigError, match="outside"):
        _parse([], env)
