"""Utilisation, the ramp and the latency curve; a node's allocatable, address and
background load as the model reads them."""

from __future__ import annotations

import pytest

from tests.unit.load_model.conftest import core, node


@pytest.mark.parametrize(
    ("elapsed", "ramp", "expected"),
    [(0, 20, 0.0), (5, 20, 0.25), (10, 20, 0.5), (20, 20, 1.0), (99, 20, 1.0), (0, 0, 1.0)],
)
def test_usage_ramps_linearly_from_being_seen_bound_to_full(
    elapsed: float, ramp: float, expected: float
) -> None:
    assert core.ramp_fraction(elapsed, ramp) == pytest.approx(expected)


def test_utilisation_is_background_plus_usage_over_allocatable() -> None:
    # 4 cores at 25 % background (1 core) plus 1 core of pods: 2 of 4.
    assert core.utilisation(0.25, 4.0, 1.0) == pytest.approx(0.5)
    # The same pods on 16 cores move it a quarter as much.
    assert core.utilisation(0.25, 16.0, 1.0) == pytest.approx(0.3125)


def test_a_node_without_allocatable_reads_zero_not_a_division_error() -> None:
    assert core.utilisation(0.5, 0.0, 1.0) == 0.0


def test_latency_follows_the_queueing_curve_and_is_capped_near_saturation() -> None:
    assert core.latency(0.05, 0.0) == pytest.approx(0.05)
    assert core.latency(0.05, 0.5) == pytest.approx(0.1)
    assert core.latency(0.05, 0.9) == pytest.approx(0.5)
    assert core.latency(0.05, 1.4) == core.latency(0.05, 0.98) == pytest.approx(2.5)


def test_a_node_is_read_with_its_allocatable_address_and_background() -> None:
    got, problems = core.node_from_body(
        node("n1", cpu="8", memory="32Gi", background_cpu="0.6", background_memory="0.2")
    )
    assert (got.cpu, got.memory) == (8.0, 32 * 2**30)
    assert got.instance == "10.0.0.1:9100"
    assert (got.background_cpu, got.background_memory) == (0.6, 0.2)
    assert problems == []


def test_a_node_without_an_internal_ip_is_its_own_instance() -> None:
    got, _ = core.node_from_body(node("n1", ip=None))
    assert got.instance == "n1:9100"


@pytest.mark.parametrize("bad", ["hot", "-0.1", "nan"])
def test_a_bad_background_annotation_is_reported_and_counts_as_none(bad: str) -> None:
    got, problems = core.node_from_body(node("n1", background_cpu=bad))
    assert got.background_cpu == 0.0
    assert len(problems) == 1 and core.NODE_BACKGROUND_CPU in problems[0]
