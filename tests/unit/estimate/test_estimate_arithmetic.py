"""Estimates count what the samples do not show yet: pods bound since, and the pod placed.

Each scene: nodes whose cpu utilisation was sampled ``SAMPLED_AGO`` seconds before the
decision, pods bound to them at given times, and a policy thresholding cpu at 0.8.
"""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import estimate, model
from tests.unit.conftest import NOW

SAMPLED_AT = NOW - 5
THRESHOLD = "node(s) exceeded threshold cpu > 0.8"


def spec(source: str = "Amount", **fields) -> model.EstimateSpec:
    defaults = {
        "resource": model.EstimateResource.CPU,
        "amount": 400,
        "settle_s": 30.0,
        "learn": False,
    }
    if source in ("Learned", "None"):
        defaults.pop("resource")
        defaults.pop("amount")
    return model.EstimateSpec(source=model.EstimateFrom(source), **{**defaults, **fields})


@pytest.fixture
def cpu_policy(make_metric, make_policy):
    def make(estimate_spec: model.EstimateSpec, *, goal=model.Goal.MINIMIZE, **policy_fields):
        metric = dataclasses.replace(
            make_metric("cpu", threshold_max=0.8, goal=goal), estimate=estimate_spec
        )
        return make_policy(metrics=[metric], **policy_fields)

    return make


@pytest.fixture
def bound(make_pod):
    """A pod bound to ``node`` ``ago`` seconds before the decision."""

    def make(name: str, node: str, *, ago: float, cpu: int = 50, limit: int = 0, app="web"):
        pod = make_pod(name, cpu=cpu, labels={"app": app})
        return dataclasses.replace(
            pod,
            node_name=node,
            phase="Running",
            bound_at=NOW - ago,
            limits=model.Resources(milli_cpu=limit or cpu),
        )

    return make


@pytest.fixture
def with_pods(make_node):
    def make(name: str, *pods: model.PodInfo, cpu: int = 4000) -> model.NodeState:
        return dataclasses.replace(make_node(name, cpu=cpu), pods=tuple(pods))

    return make


@pytest.fixture
def decide(schedule, make_cluster, make_view, make_pod):
    """Decides for a 50m pod (or ``pod``) with the cpu samples ``values`` of the nodes."""

    def run(policy, nodes, values, *, pod=None, learned=None):
        view = make_view(policy, {policy.metrics[0].name: values}, refreshed_at=SAMPLED_AT)
        if learned is not None:
            key = model.MetricKey(policy.key, policy.metrics[0].name)
            view = {key: dataclasses.replace(view[key], learned=learned)}
        return schedule(
            pod=pod or make_pod("new", cpu=50),
            snapshot=make_cluster(*nodes),
            policies=[policy],
            metrics=view,
        )

    return run


def test_a_pod_bound_since_the_sample_keeps_a_node_at_the_threshold_out(
    decide, cpu_policy, bound, with_pods
):
    # 0.6 sampled; a pod bound 2 s ago (after the sample) adds 0.1 on 4 cpu, the pod placed
    # another 0.1: 0.8 is still allowed, a second recent pod makes it 0.9.
    policy = cpu_policy(spec())
    one = with_pods("node-1", bound("a", "node-1", ago=2))
    two = with_pods("node-2", bound("b", "node-2", ago=2), bound("c", "node-2", ago=1))
    decision = decide(
        policy,
        [one, two],
        {"node-1": 0.6, "node-2": 0.6},
    )
    assert decision.node == "node-1"
    verdicts = {v.node: v for v in decision.verdicts}
    assert verdicts["node-2"].reason == THRESHOLD
    assert verdicts["node-1"].metrics[0].estimate == pytest.approx(0.2)
    assert verdicts["node-2"].metrics[0].estimate == pytest.approx(0.3)


def test_the_pod_being_placed_counts_too(decide, cpu_policy, with_pods):
    # Nothing bound since the sample: 0.75 + the pod's own 0.1 passes 0.8.
    decision = decide(
        cpu_policy(spec()),
        [with_pods("node-1")],
        {"node-1": 0.75},
    )
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert THRESHOLD in decision.message


def test_a_small_node_and_a_large_node_see_the_same_pod_differently(decide, cpu_policy, with_pods):
    # 400m is 0.1 of 4 cpu but 0.025 of 16: only the large node stays under 0.8.
    decision = decide(
        cpu_policy(spec()),
        [with_pods("small"), with_pods("large", cpu=16000)],
        {"small": 0.75, "large": 0.75},
    )
    assert decision.node == "large"


def test_a_pod_stops_counting_once_a_sample_taken_settle_time_after_its_bind_shows_it(
    decide, cpu_policy, bound, with_pods
):
    # Sampled 5 s ago; settle 30 s. Bound 40 s ago: the sample (35 s after) shows it.
    # Bound 20 s ago: the sample was 15 s after, too soon: still counted.
    policy = cpu_policy(spec())
    old = with_pods("old", bound("a", "old", ago=40))
    young = with_pods("young", bound("b", "young", ago=20))
    decision = decide(
        policy,
        [old, young],
        {"old": 0.5, "young": 0.5},
    )
    verdicts = {v.node: v for v in decision.verdicts}
    assert verdicts["old"].metrics[0].estimate == pytest.approx(0.1)  # the placed pod only
    assert verdicts["young"].metrics[0].estimate == pytest.approx(0.2)


def test_pods_of_every_scheduler_count(decide, cpu_policy, bound, with_pods):
    other = dataclasses.replace(bound("other", "node-1", ago=1), scheduler_name="default-scheduler")
    decision = decide(
        cpu_policy(spec()),
        [with_pods("node-1", other)],
        {"node-1": 0.65},
    )
    assert decision.outcome is model.Outcome.UNSCHEDULABLE


def test_requests_and_limits_are_scaled_by_the_factor(decide, cpu_policy, bound, with_pods):
    recent = bound("a", "node-1", ago=1, cpu=200, limit=1000)
    node = with_pods("node-1", recent)
    new = dataclasses.replace(recent, name="new", uid="uid-new", node_name="", bound_at=0.0)
    by_requests = cpu_policy(spec("Requests", amount=0, factor=2.0))
    by_limits = cpu_policy(spec("Limits", amount=0))
    for policy, expected in ((by_requests, (400 + 400) / 4000), (by_limits, (1000 + 200) / 4000)):
        # the new pod has no limit of its own: its request counts
        new_pod = dataclasses.replace(new, limits=model.Resources(milli_cpu=200))
        decision = decide(
            policy,
            [node],
            {"node-1": 0.1},
            pod=new_pod,
        )
        assert decision.verdicts[0].metrics[0].estimate == pytest.approx(expected)


def test_learned_increments_apply_per_workload_else_overall(decide, cpu_policy, bound, with_pods):
    policy = cpu_policy(spec("Learned"))
    learned = model.LearnedEffect(per_pod=0.05, per_pod_by_workload={"shop/web": 0.2})
    web, db = bound("a", "node-1", ago=1, app="web"), bound("b", "node-1", ago=1, app="db")
    new_web = dataclasses.replace(web, name="new", uid="uid-new", node_name="", bound_at=0.0)
    decision = decide(
        policy, [with_pods("node-1", web, db)], {"node-1": 0.1}, pod=new_web, learned=learned
    )
    # web (0.2) + db (overall 0.05) bound since, and the new web pod (0.2)
    assert decision.verdicts[0].metrics[0].estimate == pytest.approx(0.45)


def test_learned_without_history_adds_nothing(decide, cpu_policy, bound, with_pods):
    node = with_pods("node-1", bound("a", "node-1", ago=1))
    decision = decide(
        cpu_policy(spec("Learned")),
        [node],
        {"node-1": 0.79},
    )
    assert decision.node == "node-1"
    assert decision.verdicts[0].metrics[0].estimate == 0.0


def test_a_negative_learned_increment_adds_nothing(decide, cpu_policy, bound, with_pods):
    node = with_pods("node-1", bound("a", "node-1", ago=1))
    learned = model.LearnedEffect(per_pod=-0.2, observations=5)
    decision = decide(cpu_policy(spec("Learned")), [node], {"node-1": 0.5}, learned=learned)
    assert decision.verdicts[0].metrics[0].estimate == 0.0


def test_a_learned_increment_counts_at_most_the_thresholds_range_per_pod(
    decide, cpu_policy, with_pods
):
    learned = model.LearnedEffect(per_pod=5.0, observations=5)
    decision = decide(
        cpu_policy(spec("Learned")), [with_pods("node-1")], {"node-1": 0.0}, learned=learned
    )
    assert decision.node == "node-1"  # 0 + 0.8: still within max 0.8
    assert decision.verdicts[0].metrics[0].estimate == pytest.approx(0.8)


def test_learned_cores_count_over_each_nodes_allocatable(decide, cpu_policy, bound, with_pods):
    policy = cpu_policy(spec("Learned", resource=model.EstimateResource.CPU))
    learned = model.LearnedEffect(per_pod=400.0, observations=5)  # millicores per pod
    small = with_pods("node-1", bound("a", "node-1", ago=1))
    large = with_pods("node-2", bound("b", "node-2", ago=1), cpu=16000)
    decision = decide(policy, [small, large], {"node-1": 0.1, "node-2": 0.1}, learned=learned)
    added = {v.node: v.metrics[0].estimate for v in decision.verdicts}
    # the recent pod and the new one: 800m of 4 cpu, of 16 cpu
    assert added == {"node-1": pytest.approx(0.2), "node-2": pytest.approx(0.05)}


def test_a_learned_ratio_corrects_a_declared_amount(decide, cpu_policy, bound, with_pods):
    policy = cpu_policy(spec("Requests", amount=0, learn=True))
    recent = bound("a", "node-1", ago=1, cpu=100)
    new = dataclasses.replace(recent, name="new", uid="uid-new", node_name="", bound_at=0.0)
    decision = decide(
        policy,
        [with_pods("node-1", recent)],
        {"node-1": 0.1},
        pod=new,
        learned=model.LearnedEffect(ratio=4.0),
    )
    # two pods of 100m requested, using four times that: 0.8 cpu of 4
    assert decision.verdicts[0].metrics[0].estimate == pytest.approx(0.2)


def test_a_maximize_metric_falls_by_the_estimate(decide, make_metric, make_policy, with_pods):
    free = dataclasses.replace(
        make_metric("free", goal=model.Goal.MAXIMIZE, threshold_min=0.2), estimate=spec()
    )
    decision = decide(make_policy(metrics=[free]), [with_pods("node-1")], {"node-1": 0.25})
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "fell below threshold free < 0.2" in decision.message


def test_the_scheduled_event_shows_the_estimate_next_to_the_sample(decide, cpu_policy, with_pods):
    decision = decide(
        cpu_policy(spec()),
        [with_pods("node-1")],
        {"node-1": 0.62},
    )
    assert "cpu 0.62 (+0.1 est.) → 100" in decision.message


def test_no_estimate_leaves_the_sample_as_it_is(decide, cpu_policy, bound, with_pods):
    node = with_pods("node-1", bound("a", "node-1", ago=1))
    decision = decide(
        cpu_policy(spec("None", settle_s=0.0)),
        [node],
        {"node-1": 0.79},
    )
    assert decision.node == "node-1"
    assert "est." not in decision.message


def test_declared_estimates_on_every_metric_replace_the_burst_penalty(cpu_policy):
    assert estimate.replaces_burst_penalty(cpu_policy(spec(), burst_penalty=5))
    learned_by_default = dataclasses.replace(spec("Learned"), declared=False)
    assert not estimate.replaces_burst_penalty(cpu_policy(learned_by_default, burst_penalty=5))
    # Declared or not, a learned increment adds nothing until it has learned.
    assert not estimate.replaces_burst_penalty(cpu_policy(spec("Learned"), burst_penalty=5))
    assert not estimate.replaces_burst_penalty(cpu_policy(spec("None"), burst_penalty=5))


def test_burst_penalty_is_not_taken_when_estimates_replace_it(decide, cpu_policy, with_pods):
    node = dataclasses.replace(with_pods("node-1"), recent_binds=(NOW - 1,) * 3)
    penalised = cpu_policy(spec("None"), burst_penalty=10)
    estimated = cpu_policy(spec(), burst_penalty=10)
    assert "burst -30" in decide(penalised, [node], {"node-1": 0.1}).message
    assert "burst" not in decide(estimated, [node], {"node-1": 0.1}).message
