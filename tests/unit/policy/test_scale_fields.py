"""A metric's tolerance, tolerancePercent and range: defaults, parsing and refusals."""

from __future__ import annotations

import pytest

from metricsched.core import policy


def with_metric(**fields):
    metric = {"name": "latency", "prometheus": {"query": "up"}, **fields}
    return {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"metrics": [metric]}}


def test_a_metric_counts_values_within_5_percent_of_the_best_as_equal_by_default():
    (metric,) = policy.policy_from_body(with_metric()).metrics
    assert (metric.tolerance, metric.tolerance_percent, metric.value_range) == (0.0, 5.0, None)


def test_tolerance_percent_and_range_are_read():
    (metric,) = policy.policy_from_body(
        with_metric(tolerance=0.002, tolerancePercent=0, range=1)
    ).metrics
    assert (metric.tolerance, metric.tolerance_percent, metric.value_range) == (0.002, 0.0, 1.0)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"range": 0}, "spec.metrics[0].range: must be more than 0, got 0"),
        ({"tolerance": -1}, "spec.metrics[0].tolerance: must not be negative, got -1"),
        (
            {"tolerancePercent": 150},
            "spec.metrics[0].tolerancePercent: must be from 0 to 100, got 150",
        ),
        ({"range": "wide"}, "spec.metrics[0].range: must be a finite number, got 'wide'"),
    ],
)
def test_out_of_bounds_scale_fields_are_refused_with_the_field_named(fields, problem):
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(with_metric(**fields))
    assert caught.value.problems == (problem,)
