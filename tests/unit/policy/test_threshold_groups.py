"""A threshold's overrides per node group and its mode: parsed once, checked as the CRD does."""

from __future__ import annotations

import pytest

from metricsched.core import model, policy, policy_defaults


def with_threshold(threshold, **spec):
    """A policy body whose one metric has ``threshold``."""
    metric = {"name": "cpu", "prometheus": {"query": "up"}, "threshold": threshold}
    return {
        "metadata": {"name": "pools", "namespace": "shop"},
        "spec": {"metrics": [metric], **spec},
    }


def problems_of(body) -> tuple[str, ...]:
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(body)
    return caught.value.problems


def test_overrides_parse_in_their_order_with_their_selectors():
    body = with_threshold(
        {
            "max": 0.8,
            "overrides": [
                {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "max": 0.9},
                {
                    "nodeSelector": {
                        "matchExpressions": [{"key": "size", "operator": "In", "values": ["xl"]}]
                    },
                    "max": 0.95,
                },
            ],
        }
    )
    (metric,) = policy.policy_from_body(body).metrics
    assert metric.threshold_max == 0.8
    assert metric.threshold_overrides == (
        model.ThresholdOverride(
            node_selector=model.LabelSelector(match_labels={"pool": "gpu"}, match_expressions=()),
            threshold_min=None,
            threshold_max=0.9,
        ),
        model.ThresholdOverride(
            node_selector=model.LabelSelector(
                match_labels={}, match_expressions=(("size", "In", ("xl",)),)
            ),
            threshold_min=None,
            threshold_max=0.95,
        ),
    )


def test_a_threshold_is_hard_unless_it_says_soft():
    (hard,) = policy.policy_from_body(with_threshold({"max": 0.8})).metrics
    (soft,) = policy.policy_from_body(with_threshold({"max": 0.8, "mode": "Soft"})).metrics
    assert hard.threshold_mode is model.ThresholdMode.HARD
    assert soft.threshold_mode is model.ThresholdMode.SOFT
    assert problems_of(with_threshold({"max": 0.8, "mode": "Lenient"})) == (
        "spec.metrics[0].threshold.mode: must be one of Hard, Soft, got 'Lenient'",
    )


def test_an_override_states_the_bounds_the_threshold_states():
    body = with_threshold(
        {"max": 0.8, "overrides": [{"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "min": 0.1}]}
    )
    assert problems_of(body) == (
        "spec.metrics[0].threshold.overrides[0]: must state what the threshold states: max",
    )


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        (
            {"max": 0.9},
            "spec.metrics[0].threshold.overrides[0].nodeSelector: is required (a label selector "
            "of nodes)",
        ),
        (
            {"nodeSelector": {}, "max": 0.9},
            "spec.metrics[0].threshold.overrides[0].nodeSelector: needs matchLabels or "
            "matchExpressions (the threshold itself is for every node)",
        ),
        (
            {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In"}]}, "max": 0.9},
            "spec.metrics[0].threshold.overrides[0].nodeSelector.matchExpressions[0].values: "
            "operator In needs at least one value",
        ),
        (
            {"nodeSelector": {"matchLabels": {"pool": "gpu"}}},
            "spec.metrics[0].threshold.overrides[0]: a threshold needs min, max or both",
        ),
        (
            {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "min": 0.9, "max": 0.5},
            "spec.metrics[0].threshold.overrides[0]: min (0.9) must not be greater than max (0.5)",
        ),
    ],
)
def test_malformed_overrides_are_problems(override, problem):
    body = with_threshold({"min": 0.0, "max": 0.8, "overrides": [override]})
    assert problem in problems_of(body)


def test_too_many_overrides_are_a_problem():
    override = {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "max": 0.9}
    body = with_threshold(
        {"max": 0.8, "overrides": [override] * (policy_defaults.MAX_THRESHOLD_OVERRIDES + 1)}
    )
    (problem,) = problems_of(body)
    assert problem.startswith("spec.metrics[0].threshold.overrides: must list at most 16")


def test_a_rebalance_trigger_needs_its_own_bound_when_the_threshold_has_overrides():
    body = with_threshold(
        {"max": 0.8, "overrides": [{"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "max": 0.9}]},
        rebalance={"trigger": {"metric": "cpu"}},
    )
    assert problems_of(body) == (
        "spec.rebalance.trigger: metric 'cpu' has threshold overrides (one threshold per node "
        "group): set trigger.above or trigger.below",
    )
    body["spec"]["rebalance"]["trigger"]["above"] = 0.85
    assert policy.policy_from_body(body).rebalance is not None
