"""The chart's memory bounds become the operator's flags (issue 28, N8): the cap on
stored metric values fits the chart's memory limit; the LIST page size is a value."""

from __future__ import annotations

import argparse

import chart_helpers as ch
import pytest

from metricsched import config


def operator_config(*sets: str) -> config.Config:
    env = ch.env(ch.render(*sets))
    return config.from_args(
        argparse.Namespace(), {k: v for k, v in env.items() if isinstance(v, str)}
    )


def test_by_default_the_stored_values_fit_the_memory_limit_and_lists_take_pages_of_500() -> None:
    parsed = operator_config()
    limit = ch.container(ch.render())["resources"]["limits"]["memory"]
    assert limit == "512Mi"
    # About 100 bytes per stored value (issue 28's measurement): a fifth of the limit.
    assert parsed.max_metric_values * 100 <= 512 * 1024 * 1024 / 5
    assert parsed.list_page_size == 500


def test_the_bounds_set_in_values_reach_the_operator() -> None:
    parsed = operator_config("prometheus.maxMetricValues=250000", "listPageSize=50")
    assert (parsed.max_metric_values, parsed.list_page_size) == (250_000, 50)


@pytest.mark.parametrize(
    "bad",
    ["prometheus.maxMetricValues=0", "listPageSize=0", "listPageSize=20000", "listPageSize=x"],
)
def test_bounds_outside_the_schema_are_refused(bad: str) -> None:
    assert "values don't meet the specifications of the schema" in ch.render_error(bad)
