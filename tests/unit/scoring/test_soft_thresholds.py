"""threshold.mode: Soft scores the nodes instead of refusing when every node is outside
the threshold, and says so in the Scheduled event; Hard (the default) refuses."""

from __future__ import annotations

import dataclasses

from metricsched.core import cycle, model
from metricsched.edges import observe

SOFT = model.ThresholdMode.SOFT


def soft(metric: model.MetricSpec) -> model.MetricSpec:
    return dataclasses.replace(metric, threshold_mode=SOFT)


def test_a_hard_threshold_refuses_when_every_node_is_over(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[make_metric("cpu", threshold_max=0.8)])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"cpu": {"node-1": 0.9, "node-2": 0.95}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE


def test_a_soft_threshold_scores_every_node_when_all_are_over_and_says_so(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[soft(make_metric("cpu", threshold_max=0.8))])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"cpu": {"node-1": 0.9, "node-2": 0.95}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.BIND
    assert decision.node == "node-1"  # the least loaded: scored, not picked at random
    assert all(verdict.feasible for verdict in decision.verdicts)
    assert f"; {cycle.SOFT_NOTE}: 2 node(s) exceeded threshold cpu > 0.8)" in decision.message
    assert decision.soft_lifted == ("cpu",)  # what metricsched_soft_threshold_lifted_total counts


def test_a_soft_threshold_still_filters_while_some_node_is_inside(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[soft(make_metric("cpu", threshold_max=0.8))])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"cpu": {"node-1": 0.9, "node-2": 0.7}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.node == "node-2"
    assert cycle.SOFT_NOTE not in decision.message
    assert decision.soft_lifted == ()
    verdicts = {verdict.node: verdict for verdict in decision.verdicts}
    assert verdicts["node-1"].reason == "node(s) exceeded threshold cpu > 0.8"


def test_hard_thresholds_and_exclude_still_apply_when_a_soft_one_is_lifted(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(
        metrics=[
            make_metric("temp", threshold_max=80),
            make_metric("price", on_missing=model.OnMissing.EXCLUDE),
            soft(make_metric("cpu", threshold_max=0.8)),
        ]
    )
    cluster = make_cluster(make_node("hot"), make_node("unpriced"), make_node("busy"))
    view = make_view(
        policy,
        {
            "temp": {"hot": 90, "unpriced": 50, "busy": 50},
            "price": {"hot": 1.0, "busy": 1.0},
            "cpu": {"hot": 0.9, "unpriced": 0.9, "busy": 0.9},
        },
    )

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.BIND
    assert decision.node == "busy"
    verdicts = {verdict.node: verdict for verdict in decision.verdicts}
    assert "node(s) exceeded threshold temp > 80" in verdicts["hot"].reason
    assert "node(s) had no fresh value for metric price" in verdicts["unpriced"].reason
    assert f"{cycle.SOFT_NOTE}: 1 node(s) exceeded threshold cpu > 0.8" in decision.message


def test_a_soft_threshold_is_not_lifted_when_hard_ones_leave_no_node(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(
        metrics=[make_metric("temp", threshold_max=80), soft(make_metric("cpu", threshold_max=0.8))]
    )
    cluster = make_cluster(make_node("node-1"))
    view = make_view(policy, {"temp": {"node-1": 90}, "cpu": {"node-1": 0.9}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "node(s) exceeded threshold temp > 80" in decision.message


def test_each_lifted_soft_threshold_is_counted_per_policy_and_metric():
    metrics = observe.Metrics()
    metrics.count_soft_lifted(policy="shop/web", metric="cpu")
    metrics.count_soft_lifted(policy="shop/web", metric="cpu")
    value = metrics.registry.get_sample_value(
        "metricsched_soft_threshold_lifted_total", {"policy": "shop/web", "metric": "cpu"}
    )
    assert value == 2
    metrics.forget_policy("shop/web")
    assert (
        metrics.registry.get_sample_value(
            "metricsched_soft_threshold_lifted_total", {"policy": "shop/web", "metric": "cpu"}
        )
        is None
    )
