"""When a policy's decisions leave a learned estimate out (it would rule out every node),
the operator says so on the policy: a Warning Event ``EstimateRulesOutEveryNode``, the
condition ``LearnedEstimateApplied=False``, and ``metricsched_estimate_fail_open_total``;
all of it clears once its decisions apply the estimate again."""

from __future__ import annotations

import argparse
from typing import Any

import kubernetes.client
import pytest

from metricsched import config as config_mod
from metricsched.core import model
from metricsched.runtime import operator as operator_mod
from metricsched.runtime import status as status_mod

KEY = model.PolicyKey("shop/web")
COUNTER = "metricsched_estimate_fail_open_total"


def _policy(estimate: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "generation": 1},
        "spec": {
            "metrics": [
                {
                    "name": "cpu",
                    "prometheus": {"query": "node_cpu_utilisation"},
                    "threshold": {"max": 0.8},
                    "estimate": estimate,
                }
            ]
        },
    }


def _decision(*left_out: str, outcome=model.Outcome.BIND) -> model.Decision:
    return model.Decision(
        pod=model.PodKey("shop/web-1"),
        policy=KEY,
        outcome=outcome,
        node=model.NodeName("node-1") if outcome is model.Outcome.BIND else None,
        fallback_reason="",
        verdicts=(),
        message="",
        estimate_fail_open=left_out,
    )


@pytest.fixture
def op() -> operator_mod.Operator:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    op = operator_mod.Operator(
        config_mod.from_args(parser.parse_args([]), {}),
        kubernetes.client.ApiClient(kubernetes.client.Configuration()),
    )
    op.ingest.on_policy("ADDED", _policy({"from": "Learned"}))
    return op


def _condition(op: operator_mod.Operator) -> dict[str, Any]:
    status = op.status.status_of(KEY, op.status.records[KEY])
    (found,) = (c for c in status["conditions"] if c["type"] == status_mod.LEARNED_CONDITION)
    return found


def _count(op: operator_mod.Operator) -> float | None:
    return op.metrics.registry.get_sample_value(COUNTER, {"policy": KEY, "metric": "cpu"})


def test_a_decision_that_left_a_learned_estimate_out_warns_on_the_policy(op):
    assert _condition(op)["status"] == "True"
    op.scheduler._track_fail_open(_decision("cpu"))
    assert op.policy_events.active(KEY) == {"estimate/cpu": "EstimateRulesOutEveryNode"}
    condition = _condition(op)
    assert (condition["status"], condition["reason"]) == ("False", "EstimateRulesOutEveryNode")
    assert "learned estimate of cpu would rule out every node" in condition["message"]
    assert _count(op) == 1


def test_every_such_decision_is_counted_under_one_lasting_warning(op):
    for _ in range(3):
        op.scheduler._track_fail_open(_decision("cpu"))
    assert _count(op) == 3
    assert op.policy_events.active(KEY) == {"estimate/cpu": "EstimateRulesOutEveryNode"}


def test_the_warning_clears_once_a_decision_applies_the_estimate_again(op):
    op.scheduler._track_fail_open(_decision("cpu"))
    op.scheduler._track_fail_open(_decision())
    assert op.policy_events.active(KEY) == {}
    assert _condition(op)["status"] == "True"
    assert _count(op) == 1


def test_a_pod_left_pending_says_nothing_about_the_estimate(op):
    op.scheduler._track_fail_open(_decision("cpu"))
    op.scheduler._track_fail_open(_decision(outcome=model.Outcome.UNSCHEDULABLE))
    assert op.policy_events.active(KEY) == {"estimate/cpu": "EstimateRulesOutEveryNode"}


def test_a_policy_whose_estimates_do_not_learn_shows_no_such_condition(op):
    op.ingest.on_policy(
        "MODIFIED",
        {
            **_policy({"from": "Amount", "resource": "cpu", "amount": "400m"}),
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "generation": 2},
        },
    )
    status = op.status.status_of(KEY, op.status.records[KEY])
    assert {c["type"] for c in status["conditions"]} == {"Ready", "MetricsAvailable"}


def test_a_deleted_policy_takes_its_counter_with_it(op):
    op.scheduler._track_fail_open(_decision("cpu"))
    op.metrics.forget_policy(KEY)
    assert _count(op) is None
