"""What settled binds teach (``core.learning``): one batch's measure against its controls,
and what the recent measures say together, robustly, within bounds, while they last."""

from __future__ import annotations

import dataclasses
import math

import pytest

from metricsched.core import estimate, learning, model

T0 = 1_700_000_000.0


def metric(
    source="Learned", *, goal=model.Goal.MINIMIZE, low=None, high=0.8, **fields
) -> model.MetricSpec:
    return model.MetricSpec(
        name="cpu",
        source=model.PrometheusSource(query="up", node_label="node"),
        weight=1,
        goal=goal,
        threshold_min=low,
        threshold_max=high,
        on_missing=model.OnMissing.NEUTRAL,
        estimate=model.EstimateSpec(source=model.EstimateFrom(source), settle_s=30.0, **fields),
    )


def seen(per_pod=0.1, *, ratio=None, workload="shop/web", at=T0, pods=1) -> learning.Observation:
    return learning.Observation(at=at, pods=pods, workload=workload, per_pod=per_pod, ratio=ratio)


def summary(*observations: learning.Observation, now=T0, limit=math.inf):
    by: dict[str, list[learning.Observation]] = {}
    for found in observations:
        if found.workload:
            by.setdefault(found.workload, []).append(found)
    return learning.summarise(observations, by, now=now, limit=limit)


def measure(*, node_change, controls=(0.0, 0.0), pods=1, declared=0.0, allocatable=0.0, **kw):
    return learning.observation(
        metric=metric(**kw),
        at=T0,
        pods=pods,
        workload="shop/web",
        node_change=node_change,
        control_changes=controls,
        declared=declared,
        allocatable=allocatable,
    )


# --- one batch ---------------------------------------------------------------------------


def test_a_batch_is_measured_against_the_median_change_of_its_controls():
    found = measure(node_change=0.45, controls=(0.3, 0.4, 0.35), pods=2)
    assert found is not None
    assert found.per_pod == pytest.approx(0.05)  # (0.45 - 0.35) / 2


def test_a_batch_without_two_controls_teaches_nothing():
    assert measure(node_change=0.1, controls=(0.0,)) is None
    assert measure(node_change=0.1, controls=()) is None


def test_values_are_kept_in_the_direction_pods_push_the_metric():
    # Free memory falls by 0.1 as a pod starts: a Maximize metric's load is a fall.
    found = measure(node_change=-0.1, goal=model.Goal.MAXIMIZE, low=0.2, high=None)
    assert found is not None
    assert found.per_pod == pytest.approx(0.1)


def test_a_utilisation_ratio_is_learned_in_resource_units():
    # 0.1 of a 4-cpu node and 0.025 of a 16-cpu node are both 400 millicores.
    small = measure(node_change=0.1, allocatable=4000, resource=model.EstimateResource.CPU)
    large = measure(node_change=0.025, allocatable=16000, resource=model.EstimateResource.CPU)
    assert small is not None and large is not None
    assert small.per_pod == pytest.approx(400)
    assert large.per_pod == pytest.approx(400)


def test_one_batch_moves_no_more_than_the_cap_per_pod():
    found = measure(node_change=7.0)  # a sample gone wild
    assert found is not None
    assert found.per_pod == pytest.approx(0.8)  # the threshold's range


def test_one_observed_correction_is_bounded_against_noise():
    low = measure(node_change=-0.5, declared=0.1)
    high = measure(node_change=100.0, declared=0.1, high=None)
    assert low is not None and low.ratio == learning.MIN_RATIO
    assert high is not None and high.ratio == learning.MAX_RATIO


def test_the_cap_is_the_whole_node_or_the_thresholds_range():
    assert learning.cap(metric(resource=model.EstimateResource.CPU)) == 1.0
    assert learning.cap(metric(high=0.5)) == 0.5
    assert learning.cap(metric(low=0.2, high=0.7)) == pytest.approx(0.5)
    assert learning.cap(metric(goal=model.Goal.MAXIMIZE, low=0.2, high=None)) == 0.2
    assert learning.cap(metric(high=None)) == math.inf  # it only moves scores


def test_the_cap_is_the_widest_threshold_range_of_any_node_group():
    gpu = model.ThresholdOverride(
        node_selector=model.LabelSelector(match_labels={"pool": "gpu"}, match_expressions=()),
        threshold_min=None,
        threshold_max=0.9,
    )
    grouped = dataclasses.replace(metric(high=0.5), threshold_overrides=(gpu,))
    assert learning.cap(grouped) == 0.9


# --- what recent batches say -------------------------------------------------------------


def test_nothing_is_applied_before_five_observations():
    assert summary(*(seen() for _ in range(learning.MIN_OBSERVATIONS - 1))) is None
    assert summary(*(seen() for _ in range(learning.MIN_OBSERVATIONS))) is not None


def test_the_increment_is_the_median_per_pod_value():
    effect = summary(seen(0.15), seen(0.1), seen(0.2), seen(0.12), seen(0.18))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.15)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.15)}
    assert effect.ratio is None  # nothing was declared
    assert effect.observations == 5


def test_observations_far_from_the_others_are_left_out():
    # Two nodes whose neighbours heated up while their batches settled: the plain median
    # (0.12) leans towards them; they are rejected and the median of the rest is 0.11.
    effect = summary(seen(0.10), seen(0.70), seen(0.11), seen(0.75), seen(0.12))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.11)


def test_a_negative_increment_counts_as_none():
    # Loads that fell while batches settled: a pod never makes a node look better.
    effect = summary(*(seen(-0.05) for _ in range(5)))
    assert effect is not None
    assert effect.per_pod == 0.0
    assert effect.per_pod_by_workload == {"shop/web": 0.0}


def test_the_increment_never_passes_the_limit():
    effect = summary(*(seen(0.9) for _ in range(5)), limit=0.8)
    assert effect is not None
    assert effect.per_pod == 0.8


def test_observations_expire():
    old = [seen(at=T0 - learning.EXPIRY_S - 1) for _ in range(3)]
    recent = [seen(at=T0 - 60) for _ in range(3)]
    assert summary(*old, *recent) is None  # only 3 still count
    assert summary(*old, *recent, now=T0 - 120) is not None  # 2 minutes earlier, all 6 did


def test_a_mixed_batch_teaches_the_overall_increment_only():
    effect = summary(*(seen(0.2, workload="", pods=2) for _ in range(5)))
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.2)
    assert effect.per_pod_by_workload == {}


def test_a_workload_needs_five_observations_of_its_own():
    api = [seen(workload="shop/api") for _ in range(4)]
    db = [seen(workload="shop/db") for _ in range(5)]
    effect = summary(*api, *db)
    assert effect is not None
    assert set(effect.per_pod_by_workload) == {"shop/db"}


def test_a_declared_amount_is_corrected_by_what_binds_did():
    effect = summary(*(seen(ratio=4.0) for _ in range(5)))
    assert effect is not None
    assert effect.ratio == pytest.approx(4.0)
    assert effect.ratio_by_workload["shop/web"] == pytest.approx(4.0)


def test_learning_is_needed_for_learned_and_corrected_estimates_only():
    def spec(source, learn):
        return metric(source, learn=learn)

    assert estimate.learns(spec("Learned", False))
    assert estimate.learns(spec("Amount", True))
    assert not estimate.learns(spec("Amount", False))
    assert not estimate.learns(spec("None", True))
