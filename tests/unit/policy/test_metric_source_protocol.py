"""Every metric source answers ``model.MetricSource``: what the cycle, the estimates, the
refresher and status ask of a source, so that none of them asks which type it is. A new
source type added to ``model.AnySource`` without an example here, or without an answer to
every question, fails these tests (and mypy, where the estimate parser takes a
``MetricSource``)."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import typing
from typing import ClassVar

import pytest

from metricsched.core import model, policy_estimate

OPERATOR = pathlib.Path(__file__).resolve().parents[3] / "operator" / "metricsched"

EXAMPLES: dict[type[object], model.AnySource] = {
    model.PrometheusSource: model.PrometheusSource(query="node_cpu_ratio", node_label="node"),
    model.AnnotationSource: model.AnnotationSource(annotation="example.com/hourly-price"),
    model.MetricsServerSource: model.MetricsServerSource(resource=model.EstimateResource.CPU),
}
SOURCES = list(EXAMPLES.values())


def fetched_by(source: model.MetricSource) -> list[str]:
    """The ways its values are got, by the members that say so."""
    ways = {
        "node annotation": source.node_annotation,
        "prometheus": source.prometheus,
        "node metrics": source.node_metrics,
    }
    return [way for way, answer in ways.items() if answer is not None]


def test_there_is_an_example_of_every_source_type() -> None:
    assert set(EXAMPLES) == set(typing.get_args(model.AnySource))
    assert all(type(source) is kind for kind, source in EXAMPLES.items())


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: type(s).__name__)
def test_each_source_answers_the_protocol(source: model.AnySource) -> None:
    assert isinstance(source, model.MetricSource)


def test_a_source_missing_an_answer_is_not_a_metric_source() -> None:
    @dataclasses.dataclass(frozen=True)
    class Unanswered:
        field: ClassVar[str] = "kubeletSummary"
        refreshed: ClassVar[bool] = True
        moves_with_binds: ClassVar[bool] = True
        event_label: ClassVar[str] = "kubelet"
        default_estimate: ClassVar[model.EstimateFrom] = model.EstimateFrom.REQUESTS
        node_annotation: None = None
        prometheus: None = None  # no ``node_metrics``: how are its values got?

    assert not isinstance(Unanswered(), model.MetricSource)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: type(s).__name__)
def test_each_source_is_fetched_one_way(source: model.AnySource) -> None:
    assert len(fetched_by(source)) == 1


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: type(s).__name__)
def test_only_a_source_read_off_the_nodes_is_always_current(source: model.AnySource) -> None:
    assert source.refreshed is (source.node_annotation is None)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: type(s).__name__)
def test_each_default_estimate_has_a_settle_time(source: model.AnySource) -> None:
    if source.moves_with_binds:
        assert source.default_estimate in policy_estimate.DEFAULT_SETTLE_S
    else:
        assert source.default_estimate is model.EstimateFrom.NONE


def test_the_sources_have_distinct_fields_and_answers() -> None:
    assert len({source.field for source in SOURCES}) == len(SOURCES)
    assert [fetched_by(source) for source in SOURCES] == [
        ["prometheus"],
        ["node annotation"],
        ["node metrics"],
    ]


def test_the_answers_carry_each_source_s_own_data() -> None:
    prometheus, annotation, metrics_server = SOURCES
    assert prometheus.prometheus is prometheus
    assert annotation.node_annotation == "example.com/hourly-price"
    assert metrics_server.node_metrics is model.EstimateResource.CPU


def test_no_call_site_asks_which_type_a_source_is() -> None:
    switch = re.compile(r"isinstance\([^)]*Source\b")
    found = [
        f"{path.relative_to(OPERATOR)}:{number}"
        for path in sorted(OPERATOR.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if switch.search(line)
    ]
    assert found == []
