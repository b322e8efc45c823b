"""From a raw SchedulingPolicy to a model.Policy: defaults, durations and every problem."""

from __future__ import annotations

import copy
import math

import pytest

from metricsched.core import model, policy, policy_fields

DESIGN_EXAMPLE = {
    "apiVersion": "metricsched.io/v1alpha1",
    "kind": "SchedulingPolicy",
    "metadata": {
        "name": "web-latency",
        "namespace": "shop",
        "generation": 3,
        "creationTimestamp": "2024-05-01T10:00:00Z",
    },
    "spec": {
        "podSelector": {"matchLabels": {"app": "web"}},
        "priority": 0,
        "metrics": [
            {
                "name": "latency",
                "prometheus": {
                    "query": "avg by (node) (rate(http_request_duration_seconds_sum[1m]))",
                    "nodeLabel": "node",
                },
                "weight": 3,
                "goal": "Minimize",
                "threshold": {"max": 0.5},
                "onMissing": "Neutral",
            },
            {
                "name": "price",
                "nodeAnnotation": "example.com/hourly-price",
                "weight": 1,
                "goal": "Minimize",
            },
        ],
        "maxMetricAge": "2m",
        "burstPenalty": 5,
        "burstWindow": "60s",
        "fallback": {"strategy": "LeastAllocated"},
    },
}


def minimal(**spec):
    """A policy body with one metric and whatever ``spec`` adds or replaces."""
    return {
        "metadata": {"name": "web-latency", "namespace": "shop"},
        "spec": {"metrics": [{"name": "latency", "prometheus": {"query": "up"}}], **spec},
    }


def problems_of(body) -> tuple[str, ...]:
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(body)
    return caught.value.problems


def test_design_example_parses_into_the_policy_it_describes():
    parsed = policy.policy_from_body(DESIGN_EXAMPLE)

    assert parsed.key == "shop/web-latency"
    assert (parsed.generation, parsed.priority) == (3, 0)
    assert parsed.creation_timestamp == 1714557600.0
    assert parsed.pod_selector == model.LabelSelector(
        match_labels={"app": "web"}, match_expressions=()
    )
    latency, price = parsed.metrics
    assert latency == model.MetricSpec(
        name="latency",
        source=model.PrometheusSource(
            query="avg by (node) (rate(http_request_duration_seconds_sum[1m]))",
            node_label="node",
        ),
        weight=3,
        goal=model.Goal.MINIMIZE,
        threshold_min=None,
        threshold_max=0.5,
        on_missing=model.OnMissing.NEUTRAL,
        # a latency threshold without an estimate gets none (Learned is opt-in): the
        # burst penalty stands in; the settle time is the burst window
        estimate=model.EstimateSpec(source=model.EstimateFrom.NONE, settle_s=60.0, declared=False),
    )
    assert price.source == model.AnnotationSource(annotation="example.com/hourly-price")
    assert (parsed.max_metric_age_s, parsed.burst_penalty, parsed.burst_window_s) == (
        120.0,
        5.0,
        60.0,
    )
    assert parsed.fallback is model.FallbackStrategy.LEAST_ALLOCATED


def test_body_without_defaults_gets_the_crds_defaults():
    parsed = policy.policy_from_body(minimal())

    (metric,) = parsed.metrics
    assert metric.source == model.PrometheusSource(query="up", node_label="node")
    assert (metric.weight, metric.goal, metric.on_missing) == (
        1,
        model.Goal.MINIMIZE,
        model.OnMissing.NEUTRAL,
    )
    assert (metric.threshold_min, metric.threshold_max) == (None, None)
    assert parsed.priority == 0
    assert parsed.pod_selector == model.LabelSelector(match_labels={}, match_expressions=())
    assert (parsed.max_metric_age_s, parsed.burst_penalty, parsed.burst_window_s) == (
        120.0,
        5.0,
        60.0,
    )
    assert parsed.fallback is model.FallbackStrategy.LEAST_ALLOCATED
    assert (parsed.generation, parsed.creation_timestamp) == (0, 0.0)


def test_policy_without_namespace_lives_in_default_like_kubectl_apply():
    body = minimal()
    del body["metadata"]["namespace"]
    assert policy.policy_from_body(body).namespace == "default"


def test_null_fallback_and_selector_mean_their_defaults():
    parsed = policy.policy_from_body(minimal(fallback=None, podSelector=None))
    assert parsed.fallback is model.FallbackStrategy.LEAST_ALLOCATED
    assert parsed.pod_selector.match_labels == {}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m30s", 90.0), ("500ms", 0.5), ("2m", 120.0), ("1.5h", 5400.0), ("1h0m10s", 3610.0)],
)
def test_durations_are_parsed_into_seconds(text, seconds):
    assert policy_fields.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2", "1d", "-1s", "1 m", "1ns", "1µs", "s", "1.s", "+1s"])
def test_malformed_durations_are_rejected(text):
    with pytest.raises(ValueError, match="not a duration"):
        policy_fields.parse_duration(text)


def test_metric_name_used_twice_is_a_problem():
    body = minimal()
    body["spec"]["metrics"].append({"name": "latency", "nodeAnnotation": "example.com/price"})
    assert problems_of(body) == (
        "spec.metrics[1]: metric name 'latency' is already used by spec.metrics[0]; "
        "metric names must be unique",
    )


def test_threshold_min_above_max_is_a_problem():
    body = minimal()
    body["spec"]["metrics"][0]["threshold"] = {"min": 2, "max": 1}
    assert problems_of(body) == (
        "spec.metrics[0].threshold: min (2) must not be greater than max (1)",
    )


def test_threshold_without_bounds_is_a_problem():
    body = minimal()
    body["spec"]["metrics"][0]["threshold"] = {}
    assert problems_of(body) == ("spec.metrics[0].threshold: a threshold needs min, max or both",)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "0.5", True])
def test_threshold_must_be_a_finite_number(bad):
    body = minimal()
    body["spec"]["metrics"][0]["threshold"] = {"max": bad}
    (problem,) = problems_of(body)
    assert problem.startswith("spec.metrics[0].threshold.max: must be a finite number")


def test_metric_without_source_is_a_problem():
    body = minimal()
    del body["spec"]["metrics"][0]["prometheus"]
    assert problems_of(body) == (
        "spec.metrics[0]: needs exactly one source, prometheus, nodeAnnotation or metricsServer"
        " (it has none)",
    )


def test_metric_with_two_sources_is_a_problem():
    body = minimal()
    body["spec"]["metrics"][0]["nodeAnnotation"] = "example.com/price"
    assert problems_of(body) == (
        "spec.metrics[0]: needs exactly one source, prometheus, nodeAnnotation or metricsServer"
        " (it has prometheus and nodeAnnotation)",
    )


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("maxMetricAge", "2 minutes", "spec.maxMetricAge: must be a duration such as 2m"),
        ("maxMetricAge", "0s", "spec.maxMetricAge: must be more than 0s and at most 24h"),
        ("maxMetricAge", "25h", "spec.maxMetricAge: must be more than 0s and at most 24h"),
        ("burstWindow", "2h", "spec.burstWindow: must be at least 0s and at most 1h"),
        ("burstWindow", 60, "spec.burstWindow: must be a duration such as 2m"),
        ("burstPenalty", 101, "spec.burstPenalty: must be an integer from 0 to 100"),
        ("burstPenalty", -1, "spec.burstPenalty: must be an integer from 0 to 100"),
        ("priority", "high", "spec.priority: must be an integer"),
        ("fallback", {"strategy": "Spread"}, "spec.fallback.strategy: must be one of"),
        ("metrics", [], "spec.metrics: must list 1 to 10 metrics, got 0 metrics"),
    ],
)
def test_spec_fields_out_of_bounds_are_problems(field, value, problem):
    (found,) = problems_of(minimal(**{field: value}))
    assert found.startswith(problem)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("name", "Latency", "spec.metrics[0].name: must be a DNS label"),
        ("name", "l" * 64, "spec.metrics[0].name: must be a DNS label"),
        ("weight", 0, "spec.metrics[0].weight: must be an integer from 1 to 100, got 0"),
        ("weight", 2.5, "spec.metrics[0].weight: must be an integer from 1 to 100, got 2.5"),
        ("goal", "Lowest", "spec.metrics[0].goal: must be one of Minimize, Maximize"),
        ("onMissing", "Skip", "spec.metrics[0].onMissing: must be one of Neutral, Exclude"),
        ("prometheus", {"query": ""}, "spec.metrics[0].prometheus.query: must be a PromQL"),
        (
            "prometheus",
            {"query": "up", "nodeLabel": "node-name"},
            "spec.metrics[0].prometheus.nodeLabel: must be a Prometheus label name",
        ),
    ],
)
def test_metric_fields_out_of_bounds_are_problems(field, value, problem):
    body = minimal()
    body["spec"]["metrics"][0][field] = value
    (found,) = problems_of(body)
    assert found.startswith(problem)


def test_eleven_metrics_are_too_many():
    metrics = [{"name": f"m{index}", "prometheus": {"query": "up"}} for index in range(11)]
    assert problems_of(minimal(metrics=metrics)) == (
        "spec.metrics: must list 1 to 10 metrics, got 11 metrics",
    )


def test_selector_expression_problems_are_reported():
    selector = {
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": []},
            {"key": "tier", "operator": "Exists", "values": ["x"]},
            {"key": "tier", "operator": "Near"},
        ]
    }
    assert problems_of(minimal(podSelector=selector)) == (
        "spec.podSelector.matchExpressions[0].values: operator In needs at least one value",
        "spec.podSelector.matchExpressions[1].values: operator Exists takes no values",
        "spec.podSelector.matchExpressions[2].operator: must be one of DoesNotExist, Exists, "
        "In, NotIn, got 'Near'",
    )


def test_every_problem_is_reported_at_once():
    body = copy.deepcopy(DESIGN_EXAMPLE)
    body["spec"]["maxMetricAge"] = "forever"
    body["spec"]["metrics"][0]["weight"] = 1000
    body["spec"]["metrics"][1]["name"] = "latency"
    del body["metadata"]["name"]

    problems = problems_of(body)

    assert len(problems) == 4
    assert str(policy.PolicyError(problems)) == "; ".join(problems)
    assert isinstance(policy.PolicyError(problems), ValueError)


def test_missing_spec_is_a_problem():
    assert problems_of({"metadata": {"name": "p", "namespace": "shop"}}) == (
        "spec: must be an object, got None",
    )


def test_default_policy_has_no_metrics_and_the_given_strategy():
    default = policy.default_policy(model.FallbackStrategy.MOST_ALLOCATED)
    assert (default.namespace, default.name, default.metrics) == ("", "default", ())
    assert default.fallback is model.FallbackStrategy.MOST_ALLOCATED
    assert policy.is_default(default)
    assert not policy.is_default(policy.policy_from_body(minimal()))


def test_metric_names_summarise_the_policy_for_kubectl():
    assert policy.metric_names(policy.policy_from_body(DESIGN_EXAMPLE)) == "latency,price"


def test_daemon_set_pods_are_exempt_from_thresholds_unless_the_policy_says_filter():
    assert policy.policy_from_body(minimal()).daemon_set_pods is model.DaemonSetPods.EXEMPT
    parsed = policy.policy_from_body(minimal(daemonSetPods="Filter"))
    assert parsed.daemon_set_pods is model.DaemonSetPods.FILTER
    assert any("spec.daemonSetPods" in p for p in problems_of(minimal(daemonSetPods="Always")))
