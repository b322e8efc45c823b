"""What kubectl describe pod shows: Scheduled and FailedScheduling messages, and skips."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import api_formats, model, policy_defaults

Outcome = model.Outcome


def test_scheduled_message_names_policy_winning_scores_and_runner_up(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    web_latency = make_policy(
        "web-latency",
        metrics=[
            make_metric("latency", weight=11, tolerance_percent=0.0),
            make_metric("cpu", weight=8, tolerance_percent=0.0),
        ],
    )
    cluster = make_cluster(make_node("node-3"), make_node("node-5"), make_node("node-7"))
    view = make_view(
        web_latency,
        {
            "latency": {"node-3": 0.12, "node-5": 0.2, "node-7": 0.5},
            "cpu": {"node-3": 0.35, "node-5": 0.16, "node-7": 1.16},
        },
    )

    decision = schedule(
        pod=make_pod("web-7d4"), snapshot=cluster, policies=[web_latency], metrics=view
    )

    assert (decision.outcome, decision.node, decision.policy) == (
        Outcome.BIND,
        "node-3",
        "shop/web-latency",
    )
    assert decision.message == (
        "Successfully assigned shop/web-7d4 to node-3 (policy shop/web-latency: "
        "score 92 [latency 0.12 → 100, cpu 0.35 → 81]; runner-up node-5 88)"
    )


def test_scheduled_message_names_a_metrics_server_source_after_its_metric(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    usage = dataclasses.replace(
        make_metric("cpu", tolerance_percent=0.0),
        source=model.MetricsServerSource(model.EstimateResource.CPU),
    )
    web = make_policy("web-load", metrics=[make_metric("latency", tolerance_percent=0.0), usage])
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(
        web, {"latency": {"node-1": 0.1, "node-2": 0.2}, "cpu": {"node-1": 0.3, "node-2": 0.9}}
    )

    decision = schedule(pod=make_pod("web-7d4"), snapshot=cluster, policies=[web], metrics=view)

    assert decision.message == (
        "Successfully assigned shop/web-7d4 to node-1 (policy shop/web-load: "
        "score 100 [latency 0.1 → 100, cpu from metrics-server 0.3 → 100]; runner-up node-2 0)"
    )


def test_scheduled_message_shows_missing_values_and_the_burst_penalty(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    policy_ = make_policy(
        metrics=[make_metric("latency"), make_metric("errors")], burst_penalty=5.0
    )
    cluster = make_cluster(make_node("node-1", recent_binds=[now - 1]))
    view = make_view(policy_, {"latency": {"node-1": 0.2}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=view)

    assert decision.message == (
        "Successfully assigned shop/web-7d4 to node-1 (policy shop/web-latency: "
        "score 70 [latency 0.2 → 100, errors missing → 50, burst -5])"
    )


def test_failed_scheduling_counts_filter_and_threshold_reasons_like_kube_scheduler(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy_ = make_policy(metrics=[make_metric("latency", threshold_max=0.5)])
    cluster = make_cluster(
        make_node("node-1", unschedulable=True),
        make_node("node-2", cpu=500),
        make_node("node-3"),
        make_node("node-4"),
    )
    view = make_view(policy_, {"latency": {"node-1": 0.1, "node-3": 0.7, "node-4": 0.9}})

    decision = schedule(pod=make_pod(cpu=1000), snapshot=cluster, policies=[policy_], metrics=view)

    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, "
        "2 node(s) exceeded threshold latency > 0.5. "
        "no new claims to deallocate, "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )


def test_verdicts_cover_every_node_in_name_order_with_joined_reasons(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy_ = make_policy(
        metrics=[
            make_metric("latency", threshold_max=0.5),
            make_metric("errors", threshold_max=0.1),
        ]
    )
    cluster = make_cluster(make_node("node-b"), make_node("node-a"), make_node("node-c", cpu=10))
    view = make_view(
        policy_,
        {"latency": {"node-a": 0.9, "node-b": 0.1}, "errors": {"node-a": 0.2, "node-b": 0.0}},
    )

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=view)

    assert [verdict.node for verdict in decision.verdicts] == ["node-a", "node-b", "node-c"]
    node_a, node_b, node_c = decision.verdicts
    assert node_a.reason == (
        "node(s) exceeded threshold latency > 0.5; node(s) exceeded threshold errors > 0.1"
    )
    assert [(score.metric, score.value) for score in node_a.metrics] == [
        ("latency", 0.9),
        ("errors", 0.2),
    ]
    assert (node_b.feasible, node_b.reason, node_b.score) == (True, "", 100.0)
    assert (node_c.feasible, node_c.reason, node_c.metrics) == (False, "Insufficient cpu", ())


def test_single_feasible_node_has_no_runner_up(
    *, make_node, make_cluster, make_pod, make_policy, make_view, schedule
):
    policy_ = make_policy()
    view = make_view(policy_, {"latency": {"node-1": 0.3}})
    decision = schedule(
        pod=make_pod(), snapshot=make_cluster(make_node("node-1")), policies=[policy_], metrics=view
    )
    assert "runner-up" not in decision.message
    assert decision.message.endswith("score 100 [latency 0.3 → 100])")


def test_pinned_policy_that_does_not_exist_leaves_the_pod_unschedulable(
    *, make_node, make_cluster, make_pod, schedule
):
    pod = make_pod(labels={policy_defaults.POLICY_LABEL: "foo"})

    decision = schedule(pod=pod, snapshot=make_cluster(make_node("node-1")))

    assert (decision.outcome, decision.policy, decision.verdicts) == (
        Outcome.UNSCHEDULABLE,
        "shop/foo",
        (),
    )
    assert decision.message == "policy shop/foo named by label metricsched.io/policy not found"


def test_pod_needing_an_unsupported_feature_is_told_so(
    *, make_node, make_cluster, make_pod, schedule
):
    pod = make_pod(unsupported=["volume topology"])

    decision = schedule(pod=pod, snapshot=make_cluster(make_node("node-1")))

    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message.startswith("metricsched does not support volume topology yet; ")


def test_empty_cluster_has_no_nodes_available(*, make_cluster, make_pod, schedule):
    decision = schedule(pod=make_pod(), snapshot=make_cluster())
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == "no nodes available to schedule pods"


def test_pods_that_are_not_ours_to_schedule_are_skipped(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = make_cluster(make_node("node-1"))
    cases = {
        "other scheduler": make_pod(scheduler_name="default-scheduler"),
        "bound": make_pod(node_name="node-1"),
        "deleting": make_pod(deleting=True),
        "gated": make_pod(scheduling_gates=["example.com/quota"]),
    }

    decisions = {name: schedule(pod=pod, snapshot=cluster) for name, pod in cases.items()}

    assert {name: d.outcome for name, d in decisions.items()} == dict.fromkeys(cases, Outcome.SKIP)
    assert all(d.node is None and d.verdicts == () for d in decisions.values())
    assert "default-scheduler" in decisions["other scheduler"].message
    assert "node-1" in decisions["bound"].message
    assert "deleted" in decisions["deleting"].message
    assert "example.com/quota" in decisions["gated"].message


def test_same_inputs_give_the_same_decision(
    *, make_node, make_cluster, make_pod, make_policy, make_view, schedule
):
    policy_ = make_policy(burst_penalty=5.0)
    cluster = make_cluster(*(make_node(f"node-{index}") for index in range(5)))
    view = make_view(policy_, {"latency": {f"node-{index}": 0.1 for index in range(5)}})

    first = schedule(pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=view)
    second = schedule(pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=view)

    assert first == second
    # The five nodes tie: the seed draws the winner, as kube-scheduler's selectHost does.
    drawn = {
        schedule(pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=view, seed=seed).node
        for seed in range(60)
    }
    assert drawn == {f"node-{index}" for index in range(5)}


def test_long_messages_are_cut_to_1024_bytes_like_kube_scheduler():
    message = "Successfully assigned " + "→" * 2000
    cut = api_formats.truncate_message(message)
    assert len(cut.encode()) <= 1024
    assert cut.endswith(" ...")
    assert api_formats.truncate_message("short") == "short"


@given(text=st.text(max_size=1500))
def test_truncated_messages_fit_and_keep_their_beginning(text):
    cut = api_formats.truncate_message(text)
    assert len(cut.encode()) <= 1024
    if cut != text:
        assert text.startswith(cut.removesuffix(" ..."))


@settings(max_examples=60, deadline=None)
@given(
    latencies=st.lists(st.floats(0, 5, allow_nan=False), min_size=3, max_size=3),
    cpus=st.lists(st.one_of(st.none(), st.floats(0, 1, allow_nan=False)), min_size=3, max_size=3),
    weights=st.tuples(st.integers(1, 100), st.integers(1, 100)),
    factor=st.integers(2, 1000),
    penalty=st.integers(0, 50),
    binds=st.lists(st.integers(0, 3), min_size=3, max_size=3),
)
def test_multiplying_all_weights_by_a_constant_changes_no_decision(
    *,
    make_node,
    make_cluster,
    make_pod,
    make_metric,
    make_policy,
    make_view,
    schedule,
    now,
    latencies,
    cpus,
    weights,
    factor,
    penalty,
    binds,
):
    names = ["node-1", "node-2", "node-3"]
    values = {
        "latency": dict(zip(names, latencies, strict=True)),
        "cpu": {name: cpu for name, cpu in zip(names, cpus, strict=True) if cpu is not None},
    }
    cluster = make_cluster(
        *(
            make_node(name, recent_binds=[now - 1] * count)
            for name, count in zip(names, binds, strict=True)
        )
    )

    def decide(scale):
        policy_ = make_policy(
            metrics=[
                make_metric("latency", weight=weights[0] * scale),
                make_metric("cpu", weight=weights[1] * scale),
            ],
            burst_penalty=float(penalty),
        )
        return schedule(
            pod=make_pod(), snapshot=cluster, policies=[policy_], metrics=make_view(policy_, values)
        )

    assert decide(factor) == decide(1)


def test_lean_decision_carries_only_the_winner_and_runner_up_with_their_details(
    *, make_node, make_cluster, make_pod, make_policy, make_view, now
):
    from metricsched.core import cycle as cycle_

    policy_ = make_policy()
    names = [f"node-{index}" for index in range(6)]
    view = make_view(policy_, {"latency": {name: index / 10 for index, name in enumerate(names)}})
    cluster = make_cluster(*(make_node(name) for name in names))

    def decide(detail):
        return cycle_.schedule_one(
            pod=make_pod(),
            snapshot=cluster,
            policies=[policy_],
            metrics=view,
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            now=now,
            scheduler_names=frozenset({"metricsched"}),
            rr_counter=0,
            seed=0,
            detail=detail,
        )

    full, lean = decide(True), decide(False)

    assert (lean.node, lean.message) == (full.node, full.message)
    by_node = {v.node: v for v in full.verdicts}
    assert [v.node for v in lean.verdicts] == ["node-0", "node-1"]
    assert list(lean.verdicts) == [by_node["node-0"], by_node["node-1"]]
    assert len(full.verdicts) == 6
    assert all(v.metrics for v in full.verdicts)
