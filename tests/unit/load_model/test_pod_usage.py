"""A pod's usage: its annotations (a value or a distribution, drawn once from the seed and
its uid), else its requests; an annotation that does not parse is reported and ignored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.load_model.conftest import core, pod

MI = 2**20


def usage(body: dict[str, Any], seed: int = 1) -> tuple[Any, list[str]]:
    requests, problem = core.pod_requests(body)
    assert problem is None
    return core.draw_usage(body, seed=seed, requests=requests)


def test_a_fixed_cpu_annotation_is_the_pods_usage_whatever_it_requests() -> None:
    got, problems = usage(pod("p", cpu="50m", annotations={core.POD_CPU: "0.4"}))
    assert got.cpu == pytest.approx(0.4)
    assert problems == []


def test_a_cpu_annotation_may_be_a_quantity() -> None:
    got, _ = usage(pod("p", annotations={core.POD_CPU: "400m"}))
    assert got.cpu == pytest.approx(0.4)


def test_uniform_draws_stay_within_their_bounds_and_spread_over_them() -> None:
    draws = [
        usage(pod(f"p{i}", annotations={core.POD_CPU: "uniform(0.3,0.5)"}))[0].cpu
        for i in range(200)
    ]
    assert all(0.3 <= d <= 0.5 for d in draws)
    assert min(draws) < 0.32 and max(draws) > 0.48


def test_the_same_seed_and_uid_draw_the_same_usage_and_another_seed_does_not() -> None:
    body = pod("p", annotations={core.POD_CPU: "normal(0.4,0.1)", core.POD_RAMP: "uniform(1,9)"})
    assert usage(body, seed=7) == usage(body, seed=7)
    assert usage(body, seed=7)[0].cpu != usage(body, seed=8)[0].cpu
    other = pod("p", uid="another", annotations=body["metadata"]["annotations"])
    assert usage(body, seed=7)[0].cpu != usage(other, seed=7)[0].cpu


def test_a_normal_draw_is_clipped_at_zero() -> None:
    draws = [
        usage(pod(f"p{i}", annotations={core.POD_CPU: "normal(0,1)"}))[0].cpu for i in range(50)
    ]
    assert min(draws) == 0.0
    assert max(draws) > 0


def test_memory_reads_quantities_and_distributions_of_quantities() -> None:
    fixed, _ = usage(pod("a", annotations={core.POD_MEMORY: "256Mi"}))
    ranged, _ = usage(pod("b", annotations={core.POD_MEMORY: "uniform(128Mi,512Mi)"}))
    assert fixed.memory == 256 * MI
    assert 128 * MI <= ranged.memory <= 512 * MI


def test_without_usage_annotations_a_pod_uses_its_requests() -> None:
    got, problems = usage(pod("p", cpu="250m", memory="1Gi"))
    assert (got.cpu, got.memory) == (0.25, 1024 * MI)
    assert problems == []


def test_the_ramp_defaults_to_between_10_and_30_seconds() -> None:
    ramps = [usage(pod(f"p{i}"))[0].ramp for i in range(50)]
    assert all(10 <= r <= 30 for r in ramps)


def test_a_ramp_annotation_sets_the_seconds_to_full_usage() -> None:
    assert usage(pod("p", annotations={core.POD_RAMP: "0"}))[0].ramp == 0
    assert usage(pod("p", annotations={core.POD_RAMP: "20"}))[0].ramp == 20


@pytest.mark.parametrize(
    "bad",
    ["uniform(banana)", "uniform(0.5,0.2)", "normal(0.4,-1)", "nan", "inf", "", "lots", 0.4],
)
def test_a_bad_cpu_annotation_is_reported_and_the_pod_uses_its_requests(bad: Any) -> None:
    got, problems = usage(pod("p", cpu="200m", annotations={core.POD_CPU: bad}))
    assert got.cpu == pytest.approx(0.2)
    assert len(problems) == 1 and core.POD_CPU in problems[0]


def test_a_bad_ramp_annotation_is_reported_and_the_default_ramp_applies() -> None:
    got, problems = usage(pod("p", annotations={core.POD_RAMP: "soon"}))
    assert 10 <= got.ramp <= 30
    assert len(problems) == 1 and core.POD_RAMP in problems[0]


def test_unreadable_requests_count_as_nothing_and_are_reported() -> None:
    requests, problem = core.pod_requests(pod("p", cpu="a lot"))
    assert requests == (0.0, 0.0)
    assert problem is not None and "requests" in problem


@pytest.mark.parametrize(
    ("phase", "node", "deleting", "expected"),
    [
        ("Running", "n1", False, True),
        ("Pending", "n1", False, True),  # bound, not yet started by kwok: counts
        ("Pending", None, False, False),
        ("Succeeded", "n1", False, False),
        ("Failed", "n1", False, False),
        ("Running", "n1", True, False),
    ],
)
def test_a_pod_counts_while_bound_not_terminal_and_not_being_deleted(
    phase: str, node: str | None, deleting: bool, expected: bool
) -> None:
    body = pod("p", node=node, phase=phase)
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert core.counts(body) is expected
