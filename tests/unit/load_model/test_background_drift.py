"""Background cpu that drifts (``loadmodel.metricsched.io/background-cpu-drift``): a sine
or a bounded random walk about the node's annotated background, from the seed and the
node's name; a run-time override stays exact."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.unit.load_model.conftest import core, loadmodel, node

T0 = 1_000_000.0


def drifted(text: str, *, base: float, elapsed: float, seed: int = 1, name: str = "n1") -> float:
    value, _ = core.drifted(
        core.parse_drift(text), base=base, seed=seed, node=name, elapsed=elapsed, walk=core.Walk()
    )
    return float(value)


def walk(text: str, *, base: float, seconds: list[float], seed: int = 1) -> list[float]:
    """The background at each of ``seconds``, the walk carried from one to the next as the
    model carries it from tick to tick."""
    drift, state, values = core.parse_drift(text), core.Walk(), []
    for elapsed in seconds:
        value, state = core.drifted(
            drift, base=base, seed=seed, node="n1", elapsed=elapsed, walk=state
        )
        values.append(value)
    return values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sine(600, 0.2)", core.Drift("sine", period=600, amplitude=0.2)),
        ("walk(0.02, 10, 0.15)", core.Drift("walk", step=0.02, every=10, bound=0.15)),
        ("linear(0.01, 0.9)", core.Drift("linear", slope=0.01, limit=0.9)),
        ("linear(-0.005, 1)", core.Drift("linear", slope=-0.005, limit=1)),
    ],
)
def test_drifts_parse(text: str, expected: Any) -> None:
    assert core.parse_drift(text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "sine(0, 0.2)",
        "sine(600, -0.1)",
        "walk(0.02, 0, 0.1)",
        "walk(1, 2)",
        "linear(0.01)",
        "linear(0.01, -1)",
        "random",
    ],
)
def test_a_bad_drift_is_reported_and_the_background_stays_put(bad: str) -> None:
    body = node("n1", background_cpu="0.3")
    body["metadata"]["annotations"][core.NODE_BACKGROUND_CPU_DRIFT] = bad
    got, problems = core.node_from_body(body)
    assert got.drift is None and got.background_cpu == 0.3
    assert len(problems) == 1 and core.NODE_BACKGROUND_CPU_DRIFT in problems[0]


# --- linear -----------------------------------------------------------------------------


def test_a_linear_drift_rises_at_its_slope_and_stops_at_its_limit() -> None:
    assert drifted("linear(0.01, 0.9)", base=0.2, elapsed=0) == pytest.approx(0.2)
    assert drifted("linear(0.01, 0.9)", base=0.2, elapsed=30) == pytest.approx(0.5)
    assert drifted("linear(0.01, 0.9)", base=0.2, elapsed=600) == pytest.approx(0.9)


def test_a_falling_linear_drift_stops_at_zero() -> None:
    assert drifted("linear(-0.01, 1)", base=0.3, elapsed=10) == pytest.approx(0.2)
    assert drifted("linear(-0.01, 1)", base=0.3, elapsed=100) == 0.0


# --- sine -------------------------------------------------------------------------------


def test_a_sine_averages_to_the_background_over_a_period_within_its_amplitude() -> None:
    values = [drifted("sine(600, 0.2)", base=0.4, elapsed=40 + i / 10) for i in range(6000)]
    assert sum(values) / len(values) == pytest.approx(0.4, abs=1e-9)
    assert min(values) >= 0.2 - 1e-9 and max(values) <= 0.6 + 1e-9
    assert min(values) < 0.21 and max(values) > 0.59


def test_a_sines_phase_is_per_node_and_seed_and_repeats_with_them() -> None:
    def at(seed: int = 1, name: str = "n1") -> float:
        return drifted("sine(600, 0.2)", base=0.4, elapsed=100, seed=seed, name=name)

    assert at() == at()
    assert at() != at(seed=2)
    assert at() != at(name="n2")


def test_a_sine_never_takes_the_background_below_zero() -> None:
    values = [drifted("sine(60, 0.5)", base=0.1, elapsed=i) for i in range(60)]
    assert min(values) == 0.0


# --- walk -------------------------------------------------------------------------------


def test_a_walk_steps_at_most_step_every_interval_and_stays_within_its_bound() -> None:
    values = walk("walk(0.02, 10, 0.1)", base=0.4, seconds=[10.0 * i for i in range(5000)])
    assert all(0.3 - 1e-9 <= v <= 0.5 + 1e-9 for v in values)
    assert max(abs(b - a) for a, b in itertools.pairwise(values)) <= 0.02 + 1e-9
    assert min(values) < 0.32 and max(values) > 0.48  # it wanders over its whole range
    # Between the walls the walk has no drift: over a long run it averages the background.
    assert sum(values) / len(values) == pytest.approx(0.4, abs=0.02)


def test_a_walk_is_the_same_for_the_same_seed_however_the_ticks_fall() -> None:
    text = "walk(0.02, 10, 0.1)"
    every_second = walk(text, base=0.4, seconds=[float(s) for s in range(1001)])
    at_once = walk(text, base=0.4, seconds=[1000.0])
    assert every_second[-1] == at_once[-1]
    assert walk(text, base=0.4, seconds=[1000.0], seed=2) != at_once


def test_a_walk_near_zero_folds_back_at_a_background_of_zero() -> None:
    values = walk("walk(0.05, 1, 0.5)", base=0.05, seconds=[float(s) for s in range(2000)])
    assert min(values) >= 0.0
    assert max(values) <= 0.55 + 1e-9


# --- in the model -------------------------------------------------------------------------


def test_the_model_drifts_the_background_from_when_it_first_sampled_the_node() -> None:
    body = node("n1", cpu="4", background_cpu="0.4")
    body["metadata"]["annotations"][core.NODE_BACKGROUND_CPU_DRIFT] = "sine(600, 0.2)"
    m = loadmodel.Model(seed=7, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([body])
    m.tick(T0 + 5)
    m.tick(T0 + 155)
    expected = drifted("sine(600, 0.2)", base=0.4, elapsed=150, seed=7)
    assert m.samples["n1"].cpu == pytest.approx(expected)
    assert m.samples["n1"].cpu != pytest.approx(0.4, abs=0.01)
    # /truth's eventual utilisation is the background without drift.
    assert m.truth(T0 + 155)["nodes"]["n1"]["eventual_cpu"] == pytest.approx(0.4)


def test_an_override_is_exact_and_the_drift_resumes_when_it_is_cleared() -> None:
    body = node("n1", cpu="4", background_cpu="0.4")
    body["metadata"]["annotations"][core.NODE_BACKGROUND_CPU_DRIFT] = "walk(0.05, 1, 0.2)"
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([body])
    m.tick(T0)
    m.set_background("n1", 0.9, None)
    m.tick(T0 + 30)
    assert m.samples["n1"].cpu == 0.9
    m.clear_background("n1")
    m.tick(T0 + 60)
    expected = walk("walk(0.05, 1, 0.2)", base=0.4, seconds=[60.0])[0]
    assert m.samples["n1"].cpu == pytest.approx(expected)
