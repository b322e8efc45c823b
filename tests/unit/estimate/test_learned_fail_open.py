"""A learned estimate never holds every pod: a decision in which it would rule out every
node that the samples let pass the thresholds leaves it out, and says so.

Each scene: three nodes of 4 cpu sampled 5 s before the decision, a policy thresholding
cpu at 0.8 with an estimate that learns, and what its learner says (a poisoned value:
0.6 per pod).
"""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import cycle, model
from tests.unit.conftest import NOW

POISONED = model.LearnedEffect(per_pod=0.6, observations=5)
BIND, UNSCHEDULABLE = model.Outcome.BIND, model.Outcome.UNSCHEDULABLE


@pytest.fixture
def cpu_policy(make_metric, make_policy):
    """A policy of shop thresholding cpu at 0.8, with ``estimate`` (Learned by default)."""

    def make(estimate: model.EstimateSpec | None = None) -> model.Policy:
        estimate = estimate or model.EstimateSpec(source=model.EstimateFrom.LEARNED, settle_s=30.0)
        metric = dataclasses.replace(make_metric("cpu", threshold_max=0.8), estimate=estimate)
        return make_policy("cpu-aware", metrics=[metric])

    return make


@pytest.fixture
def cluster(make_node, make_cluster):
    """Empty 4-cpu nodes of the given names."""
    return lambda names: make_cluster(*(make_node(name) for name in names))


@pytest.fixture
def decide(schedule, cpu_policy, cluster, make_view, make_pod):
    """Decides for a 100m pod of shop with the cpu samples ``values`` of the nodes."""

    def run(values, *, learned=POISONED, estimate=None, detail=True):
        policy = cpu_policy(estimate)
        view = make_view(policy, {"cpu": values}, refreshed_at=NOW - 5)
        key = model.MetricKey(policy.key, "cpu")
        return schedule(
            pod=make_pod("new"),
            snapshot=cluster(values),
            policies=[policy],
            metrics={key: dataclasses.replace(view[key], learned=learned)},
            detail=detail,
        )

    return run


SAMPLES = {"node-1": 0.3, "node-2": 0.5, "node-3": 0.7}


@pytest.mark.parametrize("detail", [True, False])
def test_a_learned_value_that_rules_out_every_node_is_left_out(decide, detail):
    decision = decide(SAMPLES, detail=detail)
    assert decision.outcome is BIND
    assert decision.node == "node-1"  # placed as if nothing were learned
    assert decision.estimate_fail_open == ("cpu",)
    assert decision.verdicts[0].metrics[0].estimate == 0.0
    assert decision.message.endswith(f"; learned estimate of cpu left out: {cycle.FAIL_OPEN_NOTE})")


def test_a_learned_value_that_leaves_a_node_is_applied(decide):
    decision = decide(SAMPLES, learned=model.LearnedEffect(per_pod=0.45, observations=5))
    assert decision.outcome is BIND
    assert decision.node == "node-1"  # 0.3 + 0.45 = 0.75: the others pass 0.8
    assert decision.estimate_fail_open == ()
    assert decision.verdicts[0].metrics[0].estimate == pytest.approx(0.45)
    assert "left out" not in decision.message


def test_nodes_the_samples_alone_rule_out_stay_out(decide):
    decision = decide({"node-1": 0.85, "node-2": 0.9, "node-3": 0.95})
    assert decision.outcome is UNSCHEDULABLE
    assert decision.estimate_fail_open == ()
    assert "3 node(s) exceeded threshold cpu > 0.8" in decision.message


def test_a_declared_amount_still_counts_when_its_learned_correction_is_left_out(decide):
    # 400m per pod declared (0.1 of 4 cpu), learned to be 20x that: only the correction
    # goes; node-3 (0.7 + 0.1) passes, the others would too.
    corrected = model.EstimateSpec(
        source=model.EstimateFrom.AMOUNT,
        settle_s=30.0,
        resource=model.EstimateResource.CPU,
        amount=400,
        learn=True,
    )
    decision = decide(SAMPLES, learned=model.LearnedEffect(ratio=20.0), estimate=corrected)
    assert decision.outcome is BIND
    assert decision.estimate_fail_open == ("cpu",)
    assert [v.metrics[0].estimate for v in decision.verdicts] == pytest.approx([0.1] * 3)


def test_a_declared_amount_that_rules_out_every_node_is_not_left_out(decide):
    amount = model.EstimateSpec(
        source=model.EstimateFrom.AMOUNT,
        settle_s=30.0,
        resource=model.EstimateResource.CPU,
        amount=2400,  # 0.6 of 4 cpu, declared: the user's word, not a guess
    )
    decision = decide(SAMPLES, learned=None, estimate=amount)
    assert decision.outcome is UNSCHEDULABLE
    assert decision.estimate_fail_open == ()
