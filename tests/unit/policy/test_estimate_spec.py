"""spec.metrics[].estimate: what a policy declares, its defaults, and clear errors."""

from __future__ import annotations

import pytest

from metricsched.core import model, policy, policy_estimate


def with_metric(**metric):
    return {
        "metadata": {"name": "cpu-aware", "namespace": "shop"},
        "spec": {
            "metrics": [{"name": "cpu", "prometheus": {"query": "up"}, **metric}],
            "burstWindow": "45s",
        },
    }


def estimate_of(**metric) -> model.EstimateSpec:
    return policy.policy_from_body(with_metric(**metric)).metrics[0].estimate


def problems_of(**metric) -> tuple[str, ...]:
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(with_metric(**metric))
    return caught.value.problems


def test_a_stated_amount_per_pod_is_read_in_the_resources_units():
    cpu = estimate_of(estimate={"from": "Amount", "resource": "cpu", "amount": "400m"})
    memory = estimate_of(estimate={"from": "Amount", "resource": "memory", "amount": "512Mi"})
    assert (cpu.source, cpu.amount, cpu.declared) == (model.EstimateFrom.AMOUNT, 400, True)
    assert not cpu.learn  # corrections from past binds are opt-in
    assert memory.amount == 512 * 1024**2


def test_settle_time_defaults_to_the_burst_window():
    assert estimate_of(estimate={"from": "Requests", "resource": "cpu"}).settle_s == 45.0
    declared = estimate_of(estimate={"from": "Requests", "resource": "cpu", "settleTime": "20s"})
    assert declared.settle_s == 20.0


def with_query(query: str, **metric):
    body = with_metric(**metric)
    body["spec"]["metrics"][0]["prometheus"]["query"] = query
    return policy.policy_from_body(body).metrics[0].estimate


def test_a_cpu_or_memory_threshold_alone_counts_measured_usage():
    cpu = with_query("instance:node_cpu_utilisation:rate5m", threshold={"max": 0.8})
    assert (cpu.source, cpu.resource, cpu.declared) == (
        model.EstimateFrom.MEASURED,
        model.EstimateResource.CPU,
        False,
    )
    # an upper bound: evidence ends it sooner
    assert cpu.settle_s == policy_estimate.MEASURED_SETTLE_S
    memory = with_query("instance:node_memory_utilisation:ratio", threshold={"max": 0.9})
    assert (memory.source, memory.resource) == (
        model.EstimateFrom.MEASURED,
        model.EstimateResource.MEMORY,
    )


def test_a_threshold_on_anything_but_utilisation_estimates_nothing_and_never_learns():
    # Learned is opt-in: a latency, an error rate, a percentage or a temperature gets none
    for query, threshold in (
        ("up", {"max": 0.8}),
        ("histogram_quantile(0.99, rate(latency_bucket[1m]))", {"max": 0.5}),
        ("node_cpu_utilisation_percent", {"max": 80}),
        ("node_hwmon_temp_celsius{chip='cpu'}", {"max": 0.9}),
        ("node_cpu_utilisation + node_memory_utilisation", {"max": 0.9}),
    ):
        assert with_query(query, threshold=threshold).source is model.EstimateFrom.NONE, query
    assert estimate_of().source is model.EstimateFrom.NONE


def test_measured_may_state_the_first_bursts_amount_and_factor():
    stated = estimate_of(
        estimate={"from": "Measured", "resource": "cpu", "amount": "400m", "factor": 1.5}
    )
    assert (stated.source, stated.amount, stated.measured_factor) == (
        model.EstimateFrom.MEASURED,
        400,
        1.5,
    )
    assert estimate_of(estimate={"from": "Measured", "resource": "memory"}).measured_factor is None
    assert problems_of(estimate={"from": "Measured"}) == (
        "spec.metrics[0].estimate.resource: must be one of cpu, memory, got None",
    )
    assert problems_of(estimate={"from": "Measured", "resource": "cpu", "learn": True}) == (
        "spec.metrics[0].estimate.learn: applies to from: Requests, Limits or Amount only",
    )


def test_from_none_turns_the_default_off():
    off = estimate_of(threshold={"max": 0.8}, estimate={"from": "None"})
    assert not off.active


def test_resource_and_amount_must_fit_the_source():
    assert problems_of(estimate={"from": "Requests"}) == (
        "spec.metrics[0].estimate.resource: must be one of cpu, memory, got None",
    )
    assert problems_of(estimate={"from": "Amount", "resource": "cpu"}) == (
        "spec.metrics[0].estimate.amount: from: Amount needs an amount, such as 400m or 512Mi",
    )
    assert problems_of(estimate={"from": "None", "resource": "cpu"}) == (
        "spec.metrics[0].estimate.resource: applies to from: Requests, Limits, Amount, "
        "Measured or Learned only",
    )
    assert problems_of(
        estimate={"from": "Amount", "resource": "cpu", "amount": "400m", "factor": 2}
    ) == ("spec.metrics[0].estimate.factor: applies to from: Requests, Limits or Measured only",)


def test_a_learned_estimate_may_name_the_resource_whose_utilisation_it_is():
    learned = estimate_of(threshold={"max": 0.8}, estimate={"from": "Learned", "resource": "cpu"})
    assert (learned.source, learned.resource) == (
        model.EstimateFrom.LEARNED,
        model.EstimateResource.CPU,
    )
    assert estimate_of(estimate={"from": "Learned"}).resource is None  # the metric's units


def test_bad_values_are_reported_not_raised_as_crashes():
    problems = problems_of(
        estimate={"from": "Amount", "resource": "cpu", "amount": "lots", "settleTime": "2d"}
    )
    assert any(
        p.startswith("spec.metrics[0].estimate.amount: must be a quantity") for p in problems
    )
    assert any(
        p.startswith("spec.metrics[0].estimate.settleTime: must be a duration") for p in problems
    )
    assert problems_of(estimate={"from": "Sometimes"})[0].startswith(
        "spec.metrics[0].estimate.from: must be one of Requests, Limits, Amount, Measured, "
        "Learned, None"
    )


def test_an_annotation_metric_cannot_declare_an_estimate():
    body = {
        "metadata": {"name": "price", "namespace": "shop"},
        "spec": {
            "metrics": [
                {
                    "name": "price",
                    "nodeAnnotation": "example.com/price",
                    "estimate": {"from": "Learned"},
                }
            ]
        },
    }
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(body)
    assert caught.value.problems == (
        "spec.metrics[0].estimate: applies to prometheus and metricsServer metrics only (a node"
        " annotation does not move with binds)",
    )
