"""±Inf metric values are values: the best or worst there is, never "missing"."""

from __future__ import annotations

import math

import pytest

from metricsched.core import model, scoring
from metricsched.core.plugins import metric_threshold

MINIMIZE = model.Goal.MINIMIZE
MAXIMIZE = model.Goal.MAXIMIZE
NEUTRAL = model.OnMissing.NEUTRAL


def test_plus_inf_fails_a_max_threshold(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    reasons = metric_threshold.metric_filter(policy=policy, columns=[(0.4, math.inf)], node_count=2)
    assert reasons == ((), ("node(s) exceeded threshold latency > 0.5",))


def test_minus_inf_fails_a_min_threshold(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("free-gpu", threshold_min=1)])
    reasons = metric_threshold.metric_filter(
        policy=policy, columns=[(-math.inf, 2.0)], node_count=2
    )
    assert reasons == (("node(s) fell below threshold free-gpu < 1",), ())


def test_plus_inf_is_the_worst_value_when_minimizing_and_does_not_set_the_scale():
    scores = scoring.normalise(
        (0.1, 0.2, 0.3, math.inf), goal=MINIMIZE, on_missing=NEUTRAL, tolerance_percent=0.0
    )
    assert tuple(scores.tolist()) == pytest.approx((100.0, 50.0, 0.0, 0.0))


def test_plus_inf_scores_below_a_missing_value_scored_neutral():
    scores = scoring.normalise((0.45, None, math.inf), goal=MINIMIZE, on_missing=NEUTRAL)
    assert tuple(scores.tolist()) == (100.0, 50.0, 0.0)


def test_an_infinite_best_value_takes_100_and_leaves_the_others_0():
    assert tuple(
        scoring.normalise((-math.inf, 0.1, 5.0), goal=MINIMIZE, on_missing=NEUTRAL).tolist()
    ) == (
        100.0,
        0.0,
        0.0,
    )
    assert tuple(
        scoring.normalise((math.inf, 0.1, math.inf), goal=MAXIMIZE, on_missing=NEUTRAL).tolist()
    ) == (
        100.0,
        0.0,
        100.0,
    )


def test_a_prometheus_sample_of_inf_is_a_fresh_value_and_nan_is_missing(
    make_node, make_metric, make_policy, make_view, now
):
    latency = make_metric("latency")
    policy = make_policy(metrics=[latency])
    view = make_view(policy, {"latency": {"node-1": math.inf, "node-2": math.nan}})
    column = scoring.metric_column(
        policy=policy,
        metric=latency,
        nodes=[make_node("node-1").node, make_node("node-2").node],
        metrics=view,
        now=now,
    )
    assert column == (math.inf, None)


def test_a_node_reporting_plus_inf_is_infeasible_under_a_max_threshold(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"latency": {"node-1": math.inf, "node-2": 0.45}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    by_node = {verdict.node: verdict for verdict in decision.verdicts}
    assert decision.node == "node-2"
    assert not by_node["node-1"].feasible
    assert by_node["node-1"].reason == "node(s) exceeded threshold latency > 0.5"
