"""Thresholds and onMissing: Exclude rule nodes out; ruled-out nodes are never chosen."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import model
from metricsched.core.plugins import metric_threshold

EXCLUDE = model.OnMissing.EXCLUDE


def reasons_for(policy, *columns):
    return metric_threshold.metric_filter(
        policy=policy, columns=columns, node_count=len(columns[0])
    )


def test_node_over_threshold_is_infeasible(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    assert reasons_for(policy, (0.4, 0.7)) == (
        (),
        ("node(s) exceeded threshold latency > 0.5",),
    )


def test_node_below_threshold_is_infeasible(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("free-gpu", threshold_min=2)])
    assert reasons_for(policy, (1.0, 2.0)) == (
        ("node(s) fell below threshold free-gpu < 2",),
        (),
    )


def test_values_on_the_threshold_bounds_are_feasible(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("temp", threshold_min=10, threshold_max=80)])
    assert reasons_for(policy, (10.0, 80.0)) == ((), ())


def test_node_without_value_for_thresholded_metric_passes_unless_excluded(make_metric, make_policy):
    neutral = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    excluded = make_policy(metrics=[make_metric("latency", threshold_max=0.5, on_missing=EXCLUDE)])
    assert reasons_for(neutral, (None,)) == ((),)
    assert reasons_for(excluded, (None,)) == (("node(s) had no fresh value for metric latency",),)


def test_exclude_rules_out_nodes_missing_a_metric_without_threshold(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("price", on_missing=EXCLUDE)])
    assert reasons_for(policy, (0.3, None)) == (
        (),
        ("node(s) had no fresh value for metric price",),
    )


def test_a_node_collects_one_reason_per_violated_metric(make_metric, make_policy):
    policy = make_policy(
        metrics=[
            make_metric("latency", threshold_max=0.5),
            make_metric("errors", threshold_max=0.01, on_missing=EXCLUDE),
        ]
    )
    assert reasons_for(policy, (0.9, 0.1), (None, 0.0)) == (
        (
            "node(s) exceeded threshold latency > 0.5",
            "node(s) had no fresh value for metric errors",
        ),
        (),
    )


def test_thresholded_out_nodes_do_not_set_the_normalisation_range(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    latency = make_metric("latency", threshold_max=0.5, tolerance_percent=0.0)
    policy = make_policy(metrics=[latency])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"), make_node("node-3"))
    view = make_view(policy, {"latency": {"node-1": 0.1, "node-2": 0.3, "node-3": 9.0}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    by_node = {verdict.node: verdict for verdict in decision.verdicts}
    assert decision.node == "node-1"
    assert by_node["node-2"].score == 0.0  # worst of the feasible two, not 97 of three
    assert not by_node["node-3"].feasible
    assert by_node["node-3"].reason == "node(s) exceeded threshold latency > 0.5"


def test_no_node_within_thresholds_is_unschedulable_with_threshold_reasons(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"latency": {"node-1": 0.6, "node-2": 0.7}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert decision.node is None
    assert decision.message.startswith("0/2 nodes are available: ")
    assert "2 node(s) exceeded threshold latency > 0.5" in decision.message


node_plans = st.lists(
    st.tuples(
        st.integers(0, 4000),  # millicores already requested of 2000
        st.booleans(),  # cordoned
        st.one_of(st.none(), st.floats(0, 1, allow_nan=False)),  # latency
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(
    plans=node_plans,
    threshold=st.floats(0, 1, allow_nan=False),
    on_missing=st.sampled_from(list(model.OnMissing)),
    penalty=st.integers(0, 100),
)
def test_an_infeasible_node_is_never_chosen(
    *,
    make_node,
    make_cluster,
    make_pod,
    make_metric,
    make_policy,
    make_view,
    schedule,
    plans,
    threshold,
    on_missing,
    penalty,
):
    policy = make_policy(
        metrics=[make_metric("latency", threshold_max=threshold, on_missing=on_missing)],
        burst_penalty=float(penalty),
    )
    nodes = [
        make_node(f"node-{index}", cpu=2000, requested_cpu=used, unschedulable=cordoned)
        for index, (used, cordoned, _) in enumerate(plans)
    ]
    latencies = {
        f"node-{index}": value for index, (_, _, value) in enumerate(plans) if value is not None
    }
    pod = make_pod(cpu=500)

    decision = schedule(
        pod=pod,
        snapshot=make_cluster(*nodes),
        policies=[policy],
        metrics=make_view(policy, {"latency": latencies}),
    )

    assert len(decision.verdicts) == len(nodes)
    if decision.node is None:
        assert decision.outcome is model.Outcome.UNSCHEDULABLE
        assert not any(verdict.feasible for verdict in decision.verdicts)
        return
    chosen = int(decision.node.removeprefix("node-"))
    used, cordoned, latency = plans[chosen]
    assert not cordoned
    assert used + 500 <= 2000
    verdict = decision.verdicts[chosen]
    assert verdict.feasible
    if not decision.fallback_reason:  # thresholds apply only when the metrics are trusted
        assert latency is None or latency <= threshold
        assert latency is not None or on_missing is not model.OnMissing.EXCLUDE


def daemon_set_pod(make_pod):
    return dataclasses.replace(make_pod("agent-x2k"), owner="DaemonSet/agent")


def test_a_daemon_set_pod_is_exempt_from_thresholds_by_default(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5, on_missing=EXCLUDE)])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"latency": {"node-1": 0.9}})

    decision = schedule(
        pod=daemon_set_pod(make_pod), snapshot=cluster, policies=[policy], metrics=view
    )

    assert decision.outcome is model.Outcome.BIND
    assert all(verdict.feasible for verdict in decision.verdicts)


def test_a_policy_may_apply_its_thresholds_to_daemon_set_pods(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = dataclasses.replace(
        make_policy(metrics=[make_metric("latency", threshold_max=0.5)]),
        daemon_set_pods=model.DaemonSetPods.FILTER,
    )
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"latency": {"node-1": 0.6, "node-2": 0.7}})

    decision = schedule(
        pod=daemon_set_pod(make_pod), snapshot=cluster, policies=[policy], metrics=view
    )

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "2 node(s) exceeded threshold latency > 0.5" in decision.message


def test_pods_of_other_controllers_meet_the_thresholds(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(policy, {"latency": {"node-1": 0.6, "node-2": 0.7}})
    pod = dataclasses.replace(make_pod(), owner="ReplicaSet/web-7d4")

    decision = schedule(pod=pod, snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
