"""A metric read from metrics.k8s.io (``metricsServer: {resource: cpu | memory}``): parsed
as its own source, estimated like a utilisation, and declared the same way by the CRD."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml

from metricsched.core import model, policy, policy_estimate

CRD_PATH = pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml"


def body(**metric: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "load", "namespace": "shop"},
        "spec": {"metrics": [{"name": "cpu", "weight": 1, "goal": "Minimize", **metric}]},
    }


def problems_of(raw: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(raw)
    return caught.value.problems


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_a_metrics_server_metric_reads_the_resource_it_names(resource: str) -> None:
    (metric,) = policy.policy_from_body(body(metricsServer={"resource": resource})).metrics
    assert metric.source == model.MetricsServerSource(model.EstimateResource(resource))
    assert metric.source.refreshed and metric.source.moves_with_binds
    assert metric.source.event_label == "metrics-server"


@pytest.mark.parametrize("bad", [{}, {"resource": "gpu"}, {"resource": "CPU"}, "cpu"])
def test_a_metrics_server_metric_needs_cpu_or_memory(bad: object) -> None:
    (problem,) = problems_of(body(metricsServer=bad))
    assert problem.startswith("spec.metrics[0].metricsServer")


def test_a_metric_with_metrics_server_and_another_source_is_a_problem() -> None:
    raw = body(metricsServer={"resource": "cpu"}, nodeAnnotation="example.com/price")
    assert problems_of(raw) == (
        "spec.metrics[0]: needs exactly one source, prometheus, nodeAnnotation or metricsServer"
        " (it has nodeAnnotation and metricsServer)",
    )


def test_a_threshold_counts_the_requests_of_placed_pods_by_default() -> None:
    """Measured (the Prometheus default) would ask Prometheus for per-pod usage; a cluster
    with only metrics-server has none, so the pod's requests stand in until its usage
    shows in NodeMetrics. Not declared: a burst still meets the burst penalty."""
    raw = body(metricsServer={"resource": "memory"}, threshold={"max": 0.8})
    (metric,) = policy.policy_from_body(raw).metrics
    assert metric.estimate.source is model.EstimateFrom.REQUESTS
    assert metric.estimate.resource is model.EstimateResource.MEMORY
    assert metric.estimate.settle_s == policy_estimate.METRICS_SERVER_SETTLE_S == 120.0
    assert not metric.estimate.declared


def test_without_a_threshold_there_is_no_default_estimate() -> None:
    (metric,) = policy.policy_from_body(body(metricsServer={"resource": "cpu"})).metrics
    assert not metric.estimate.active


def test_a_declared_estimate_applies_to_a_metrics_server_metric() -> None:
    raw = body(
        metricsServer={"resource": "cpu"},
        threshold={"max": 0.7},
        estimate={"from": "Amount", "resource": "cpu", "amount": "250m"},
    )
    (metric,) = policy.policy_from_body(raw).metrics
    assert (metric.estimate.source, metric.estimate.amount) == (model.EstimateFrom.AMOUNT, 250)


def test_the_crd_declares_the_same_source_and_resources() -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    item = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["metrics"]["items"]
    declared = item["properties"]["metricsServer"]
    assert declared["required"] == ["resource"]
    assert declared["properties"]["resource"]["enum"] == [r.value for r in model.EstimateResource]
    rules = " ".join(rule["rule"] for rule in item["x-kubernetes-validations"])
    for field in ("prometheus", "nodeAnnotation", "metricsServer"):
        assert f"has(self.{field})" in rules
