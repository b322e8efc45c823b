"""Pod usage that changes over a pod's life (``loadmodel.metricsched.io/cpu-pattern``):
bursty spikes on the pod's own timer, a diurnal wave and a step in step with the clock;
each bounded, with a known mean over its period, and the same for the same seed and uid."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.load_model.conftest import core, loadmodel, node, pod

T0 = 1_000_000.0


def usage(annotations: dict[str, Any], *, seed: int = 1, uid: str | None = None) -> Any:
    body = pod("p", uid=uid, annotations=annotations)
    requests, _ = core.pod_requests(body)
    got, problems = core.draw_usage(body, seed=seed, requests=requests)
    assert problems == []
    return got


def over_a_period(
    pattern: Any, *, seen: float = T0, start: float = T0, steps: int = 6000
) -> list[float]:
    return [pattern.factor(t=start + i * pattern.period / steps, seen=seen) for i in range(steps)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("constant", core.Pattern()),
        (
            "bursty(60, 10, 3, 5)",
            core.Pattern("bursty", period=60, width=10, peak=3, offset=5),
        ),
        (" bursty( 60 , 10 , 3 ) ", core.Pattern("bursty", period=60, width=10, peak=3)),
        ("diurnal(600, 0.5)", core.Pattern("diurnal", period=600, amplitude=0.5)),
        ("step(1000120.5, 4)", core.Pattern("step", peak=4, at=1000120.5)),
    ],
)
def test_patterns_parse(text: str, expected: Any) -> None:
    assert core.parse_pattern(text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "bursty(0, 1, 2)",  # no period
        "bursty(10, 11, 2)",  # spikes longer than the period
        "bursty(10, 1, -1)",
        "bursty(10, 1)",
        "diurnal(600, 1.5)",  # usage would go negative
        "diurnal(-5, 0.5)",
        "diurnal(600, nan)",
        "step(1000, -1)",  # usage would go negative
        "step(1000)",
        "step(inf, 2)",
        "sine(600, 0.5)",  # a node's drift, not a pod's pattern
        "spiky",
        "",
    ],
)
def test_a_bad_pattern_is_reported_and_the_pod_stays_constant(bad: str) -> None:
    body = pod("p", annotations={core.POD_CPU: "0.4", core.POD_CPU_PATTERN: bad})
    got, problems = core.draw_usage(body, seed=1, requests=(0.1, 0.0))
    assert got.pattern == core.Pattern()
    assert got.cpu == pytest.approx(0.4)
    assert len(problems) == 1 and core.POD_CPU_PATTERN in problems[0]


# --- bursty -----------------------------------------------------------------------------


def test_bursty_spikes_to_peak_for_width_seconds_every_period_on_the_pods_timer() -> None:
    pattern = core.parse_pattern("bursty(60, 10, 3, 5)")
    seen = T0 + 17
    assert pattern.factor(t=seen + 4.9, seen=seen) == 1.0
    assert pattern.factor(t=seen + 5, seen=seen) == 3.0
    assert pattern.factor(t=seen + 14.9, seen=seen) == 3.0
    assert pattern.factor(t=seen + 15, seen=seen) == 1.0
    assert pattern.factor(t=seen + 65, seen=seen) == 3.0


def test_bursty_is_bounded_and_its_mean_over_a_period_is_one_plus_the_extra_spike() -> None:
    pattern = core.parse_pattern("bursty(60, 15, 3, 0)")
    values = over_a_period(pattern, start=T0 + 7)
    assert set(values) == {1.0, 3.0}
    assert pattern.mean == pytest.approx(1 + 2 * 15 / 60)
    assert sum(values) / len(values) == pytest.approx(pattern.mean, abs=1e-3)


def test_a_bursty_offset_is_drawn_per_pod_from_the_seed_and_uid_unless_stated() -> None:
    def offset(seed: int, uid: str) -> float:
        got = usage({core.POD_CPU_PATTERN: "bursty(60,10,3)"}, seed=seed, uid=uid).pattern
        return float(got.offset)

    offsets = [offset(1, f"uid-{i}") for i in range(50)]
    assert all(0 <= o < 60 for o in offsets)
    assert max(offsets) - min(offsets) > 30  # pods spike out of step
    assert offset(1, "uid-3") == offsets[3]
    assert offset(2, "uid-3") != offsets[3]
    stated = usage({core.POD_CPU_PATTERN: "bursty(60,10,3,7)"}, seed=2, uid="uid-3")
    assert stated.pattern.offset == 7


# --- diurnal ----------------------------------------------------------------------------


def test_diurnal_stays_within_its_amplitude_and_averages_one_over_a_period() -> None:
    pattern = core.parse_pattern("diurnal(600, 0.5)")
    values = over_a_period(pattern, start=T0 + 123)
    assert min(values) >= 0.5 - 1e-9 and max(values) <= 1.5 + 1e-9
    assert min(values) < 0.51 and max(values) > 1.49
    assert sum(values) / len(values) == pytest.approx(1.0, abs=1e-9)
    assert pattern.mean == 1.0


def test_diurnal_pods_peak_together_whenever_each_started() -> None:
    pattern = core.parse_pattern("diurnal(600, 0.5)")
    t = T0 + 300
    assert pattern.factor(t=t, seen=T0) == pattern.factor(t=t, seen=T0 + 250)


# --- step -------------------------------------------------------------------------------


def test_a_step_multiplies_usage_from_its_clock_time_on_for_every_pod_whenever_seen() -> None:
    pattern = core.parse_pattern(f"step({T0 + 100}, 4)")
    assert pattern.factor(t=T0 + 99.9, seen=T0) == 1.0
    assert pattern.factor(t=T0 + 100, seen=T0) == 4.0
    # A replacement seen after the step uses the new level at once, not a step of its own.
    assert pattern.factor(t=T0 + 300, seen=T0 + 290) == 4.0
    assert pattern.mean == 4.0


# --- in the model -------------------------------------------------------------------------


def test_the_model_applies_the_pattern_after_the_ramp_and_counts_its_mean_as_eventual() -> None:
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1", cpu="4")])
    annotations = {
        core.POD_CPU: "1",
        core.POD_RAMP: "10",
        core.POD_CPU_PATTERN: "bursty(60,20,3,0)",
    }
    m.pod_seen(pod("a", annotations=annotations), T0)
    m.tick(T0 + 5)  # half ramped, in a spike: 0.5 * 3 cores
    assert m.samples["n1"].cpu == pytest.approx(1.5 / 4)
    m.tick(T0 + 30)  # ramped, between spikes
    assert m.samples["n1"].cpu == pytest.approx(1 / 4)
    m.tick(T0 + 65)  # ramped, in the next spike
    assert m.samples["n1"].cpu == pytest.approx(3 / 4)
    # The bind record's and /truth's eventual utilisation take the pattern's mean.
    assert m.truth(T0 + 65)["nodes"]["n1"]["eventual_cpu"] == pytest.approx((1 + 2 / 3) / 4)


def test_the_model_steps_a_pods_usage_up_at_the_clock_time_after_its_ramp() -> None:
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1", cpu="4")])
    annotations = {
        core.POD_CPU: "0.5",
        core.POD_RAMP: "10",
        core.POD_CPU_PATTERN: f"step({T0 + 40}, 3)",
    }
    m.pod_seen(pod("a", annotations=annotations), T0)
    m.tick(T0 + 5)
    assert m.samples["n1"].cpu == pytest.approx(0.25 / 4)
    m.tick(T0 + 39)
    assert m.samples["n1"].cpu == pytest.approx(0.5 / 4)
    m.tick(T0 + 41)
    assert m.samples["n1"].cpu == pytest.approx(1.5 / 4)


def test_the_same_seed_gives_the_same_patterned_usage_tick_by_tick() -> None:
    def run(seed: int) -> list[float]:
        m = loadmodel.Model(seed=seed, noise=0.03, service_time=0.05, record=None)
        m.nodes_listed([node("n1", cpu="4")])
        for i in range(5):
            annotations = {
                core.POD_CPU: "uniform(0.2,0.6)",
                core.POD_RAMP: "0",
                core.POD_CPU_PATTERN: "bursty(20,5,4)",
            }
            m.pod_seen(pod(f"p{i}", annotations=annotations), T0)
        values = []
        for i in range(60):
            m.tick(T0 + i)
            values.append(m.samples["n1"].cpu)
        return values

    assert run(3) == run(3)
    assert run(3) != run(4)
