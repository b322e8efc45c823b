"""What settled binds teach: per-pod increments and corrections of a declared amount."""

from __future__ import annotations

import pytest

from metricsched.core import estimate, model


def seen(pods=1, delta=0.1, declared=0.0, workload="shop/web") -> estimate.Observation:
    return estimate.Observation(pods=pods, workload=workload, delta=delta, declared=declared)


def test_the_first_observation_is_taken_as_it_is():
    effect = estimate.learn(None, seen(pods=2, delta=0.3))
    assert effect.per_pod == pytest.approx(0.15)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.15)}
    assert effect.ratio is None
    assert effect.observations == 1


def test_later_observations_move_the_average_by_the_learning_rate():
    effect = estimate.learn(estimate.learn(None, seen(delta=0.1)), seen(delta=0.2))
    expected = 0.1 + estimate.LEARNING_RATE * (0.2 - 0.1)
    assert effect.per_pod == pytest.approx(expected)
    assert effect.observations == 2


def test_a_mixed_batch_teaches_the_overall_increment_only():
    effect = estimate.learn(None, seen(delta=0.4, pods=2, workload=""))
    assert effect.per_pod == pytest.approx(0.2)
    assert effect.per_pod_by_workload == {}


def test_a_declared_amount_is_corrected_by_what_binds_did():
    effect = estimate.learn(None, seen(delta=0.4, declared=0.1))
    assert effect.ratio == pytest.approx(4.0)
    assert effect.ratio_by_workload["shop/web"] == pytest.approx(4.0)


def test_a_correction_is_bounded_against_noise():
    assert estimate.learn(None, seen(delta=-0.5, declared=0.1)).ratio == estimate.MIN_RATIO
    assert estimate.learn(None, seen(delta=100.0, declared=0.1)).ratio == estimate.MAX_RATIO


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
