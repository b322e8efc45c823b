"""The API server's version decides kube-scheduler's rules: read from /version at start,
mapped to the switches of that minor (gates at their defaults), handed to every cycle
through the snapshot; outside v1.35-v1.37 the nearest rules, with a warning."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from metricsched.core import framework, parse, versions
from metricsched.edges import kube_http
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import operator as operator_mod


def _version(major: str, minor: str, git: str = "") -> versions.ServerVersion:
    return parse.server_version_from_body({"major": major, "minor": minor, "gitVersion": git})


@pytest.mark.parametrize(
    ("minor", "rules"), [(35, versions.V1_35), (36, versions.V1_36), (37, versions.V1_37)]
)
def test_each_supported_minor_gets_its_own_rules_and_no_warning(
    minor: int, rules: versions.Rules
) -> None:
    choice = versions.rules_for(versions.ServerVersion(major=1, minor=minor))
    assert choice == versions.Choice(rules)


def test_the_gates_are_at_their_defaults_for_each_minor() -> None:
    assert not versions.V1_35.node_declared_features
    assert not versions.V1_35.dra_extended_resources
    assert not versions.V1_35.pod_level_resize
    for rules in (versions.V1_36, versions.V1_37):
        assert rules.node_declared_features and rules.dra_extended_resources
        assert rules.pod_level_resize


def test_an_older_server_gets_the_oldest_rules_with_a_warning() -> None:
    choice = versions.rules_for(_version("1", "33", "v1.33.4"))
    assert choice.rules is versions.V1_35
    assert "v1.33.4" in choice.warning and "outside" in choice.warning
    assert "v1.35 to v1.37" in choice.warning


def test_a_newer_server_gets_the_newest_rules_and_is_told_what_may_be_missing() -> None:
    choice = versions.rules_for(_version("1", "38", "v1.38.0"))
    assert choice.rules is versions.V1_37
    assert "lack filters" in choice.warning


def test_an_unreadable_version_falls_back_to_the_pinned_rules_with_a_warning() -> None:
    choice = versions.rules_for(None)
    assert choice.rules is versions.DEFAULT is versions.V1_35
    assert "could not be read" in choice.warning


def test_a_providers_plus_and_suffix_are_read() -> None:
    assert _version("1", "36+", "v1.36.3-eks-4f4795d") == versions.ServerVersion(
        major=1, minor=36, git_version="v1.36.3-eks-4f4795d"
    )
    assert _version("", "", "v1.37.2").minor == 37


@pytest.mark.parametrize("body", [{}, {"major": "x", "minor": "y"}, {"gitVersion": 3}, []])
def test_a_version_body_without_a_number_is_a_parse_error(body: Any) -> None:
    with pytest.raises(parse.ParseError):
        parse.server_version_from_body(body)


def test_the_rules_reach_the_cycle_through_the_snapshot() -> None:
    cache = cache_mod.ClusterCache()
    assert cache.snapshot().rules is versions.V1_35  # bit for bit v1.35 unless told
    cache.rules = versions.V1_37
    snapshot = cache.snapshot()
    pod = parse.pod_from_body({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert framework.CycleState.start(pod, snapshot).rules is versions.V1_37


class _Api:
    def __init__(self, answer: kube_http.Answer | Exception) -> None:
        self.answer = answer
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> kube_http.Answer:
        self.paths.append(path)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_operator_reads_slash_version_and_logs_the_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = _Api(kube_http.Answer(200, b'{"major":"1","minor":"36","gitVersion":"v1.36.3"}'))
    with caplog.at_level(logging.INFO):
        choice = asyncio.run(operator_mod.detect_rules(api))  # type: ignore[arg-type]
    assert api.paths == ["/version"]
    assert choice.rules is versions.V1_36
    assert "API server v1.36.3: applying kube-scheduler v1.36's rules" in caplog.text


@pytest.mark.parametrize(
    "answer",
    [
        kube_http.Answer(403, b"{}"),
        kube_http.Answer(200, b"not json"),
        OSError("connection refused"),
    ],
)
def test_a_version_that_cannot_be_read_warns_and_keeps_the_pinned_rules(
    answer: kube_http.Answer | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        choice = asyncio.run(operator_mod.detect_rules(_Api(answer)))  # type: ignore[arg-type]
    assert choice.rules is versions.V1_35
    assert "could not be read" in caplog.text
