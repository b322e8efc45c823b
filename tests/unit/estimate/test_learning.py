"""What settled binds teach: per-pod increments and corrections of a declared amount."""

from __future__ import annotations

import pytest

from metricsched.core import estimate, model


def seen(pods=1, delta=0.1, declared=0.0, workload="shop/web") -> estimate.Observation:
    return estimate.Observation(pods=pods, workload=workload, delta=delta, declared=declared)


def summary(*observations: estimate.Observation) -> model.LearnedEffect | None:
    by: dict[str, list[estimate.Observation]] = {}
    for found in observations:
        if found.workload:
            by.setdefault(found.workload, []).append(found)
    return estimate.summarise(observations, by)


def test_nothing_is_applied_before_a_few_observations():
    assert summary(seen(), seen()) is None
    assert summary(seen(), seen(), seen()) is not None


def test_the_increment_is_the_median_per_pod_change():
    effect = summary(seen(pods=2, delta=0.3), seen(delta=0.1), seen(delta=0.2))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.15)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.15)}
    assert effect.ratio is None  # nothing was declared
    assert effect.observations == 3


def test_one_node_whose_background_jumped_does_not_move_the_estimate():
    # A hot spot while a batch settled: +0.7 on one node, against 0.1 on the others.
    effect = summary(seen(delta=0.1), seen(delta=0.7), seen(delta=0.1), seen(delta=0.12))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.11)


def test_a_mixed_batch_teaches_the_overall_increment_only():
    effect = summary(*(seen(delta=0.4, pods=2, workload="") for _ in range(3)))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.2)
    assert effect.per_pod_by_workload == {}


def test_a_workload_needs_two_observations_of_its_own():
    effect = summary(seen(workload="shop/api"), seen(workload="shop/db"), seen(workload="shop/db"))
    assert effect is not None
    assert set(effect.per_pod_by_workload) == {"shop/db"}


def test_a_declared_amount_is_corrected_by_what_binds_did():
    effect = summary(*(seen(delta=0.4, declared=0.1) for _ in range(3)))
    assert effect is not None
    assert effect.ratio == pytest.approx(4.0)
    assert effect.ratio_by_workload["shop/web"] == pytest.approx(4.0)


def test_one_observed_correction_is_bounded_against_noise():
    low = summary(*(seen(delta=-0.5, declared=0.1) for _ in range(3)))
    high = summary(*(seen(delta=100.0, declared=0.1) for _ in range(3)))
    assert low is not None and low.ratio == estimate.MIN_RATIO
    assert high is not None and high.ratio == estimate.MAX_RATIO


def test_learning_is_needed_for_learned_and_corrected_estimates_only():
    def metric(source, learn):
        return model.MetricSpec(
            name="cpu",
            source=model.PrometheusSource(query="up", node_label="node"),
            weight=1,
            goal=model.Goal.MINIMIZE,
            threshold_min=None,
            threshold_max=0.8,
            on_missing=model.OnMissing.NEUTRAL,
            estimate=model.EstimateSpec(
                source=model.EstimateFrom(source), settle_s=30.0, learn=learn
            ),
        )

    assert estimate.learns(metric("Learned", False))
    assert estimate.learns(metric("Amount", True))
    assert not estimate.learns(metric("Amount", False))
    assert not estimate.learns(metric("None", True))
