"""Which pods a policy moves off nodes past its rebalance trigger, and which it leaves."""

from __future__ import annotations

import dataclasses

import hypothesis
import hypothesis.strategies as st
import pytest

from metricsched.core import cycle, model, rebalance
from tests.unit.conftest import (
    NOW,
    build_metric_spec,
    build_metric_view,
    build_node_state,
    build_pod_info,
    build_policy,
    build_snapshot,
)

SCHEDULERS = frozenset({"metricsched"})
SPEC = model.RebalanceSpec(
    mode=model.RebalanceMode.EVICT,
    metric="latency",
    above=0.5,
    below=None,
    window_s=300.0,
    interval_s=60.0,
    max_per_node=1,
    max_total=5,
    min_pod_age_s=300.0,
    margin=0.05,
    # the per-workload limit has its own tests (test_workload_limit.py): off here, so
    # these pods (all of one ReplicaSet) show the other limits alone
    max_per_workload=1000,
)
POLICY = dataclasses.replace(
    build_policy(metrics=[build_metric_spec("latency", threshold_max=0.5)]), rebalance=SPEC
)


def placed(
    name: str,
    node: str,
    *,
    owner: str = "ReplicaSet",
    placed_by: str = "shop/web-latency",
    created: float = NOW - 3600,
    priority: int = 0,
    phase: str = "Running",
) -> model.PodInfo:
    return dataclasses.replace(
        build_pod_info(name, node_name=node),
        phase=phase,
        owner=f"{owner}/web" if owner else "",
        placed_by=placed_by,
        creation_timestamp=created,
        priority=priority,
        bound_at=created + 1,
    )


def node_with(name: str, *pods: model.PodInfo, cpu: int = 4000) -> model.NodeState:
    state = build_node_state(name, cpu=cpu)
    requested = model.Resources(
        milli_cpu=sum(p.requests.milli_cpu for p in pods),
        memory=sum(p.requests.memory for p in pods),
        pods=len(pods),
    )
    return dataclasses.replace(state, pods=pods, requested=requested)


def run(
    snapshot: model.ClusterSnapshot,
    latency: dict[str, float],
    *,
    policy: model.Policy = POLICY,
    since: dict[str, float] | None = None,
    history: tuple[rebalance.Eviction, ...] = (),
    policies: tuple[model.Policy, ...] | None = None,
    view: model.MetricView | None = None,
) -> rebalance.Plan:
    spec = policy.rebalance or SPEC
    outside = {
        model.NodeName(n): t
        for n, t in (
            since
            if since is not None
            else {n: NOW - 600 for n, v in latency.items() if spec.outside(v)}
        ).items()
    }
    return rebalance.plan(
        policy=policy,
        inputs=cycle.Inputs(
            snapshot=snapshot,
            table=None,
            policies=policies or (policy,),
            metrics=view or build_metric_view(policy, {"latency": latency}),
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            scheduler_names=SCHEDULERS,
            now=NOW,
        ),
        outside_since=outside,
        values={model.NodeName(n): v for n, v in latency.items()},
        history=history,
    )


def moved(plan: rebalance.Plan) -> list[tuple[str, str, str]]:
    return [(m.pod.name, m.node, m.target) for m in plan.moves]


def skipped(plan: rebalance.Plan) -> dict[str, rebalance.Skip]:
    return {key.split("/")[1]: reason for key, reason in plan.skipped}


HOT_AND_COOL = {"hot": 0.8, "warm": 0.48, "cool": 0.2}


@pytest.fixture
def one_hot_pod():
    return build_snapshot(
        node_with("hot", placed("web-1", "hot")), node_with("warm"), node_with("cool")
    )


# --- what moves ------------------------------------------------------------------------


def test_a_pod_on_a_node_past_the_trigger_for_the_window_moves_to_the_dry_runs_node(
    one_hot_pod,
):
    plan = run(one_hot_pod, HOT_AND_COOL)

    assert moved(plan) == [("web-1", "hot", "cool")]
    (move,) = plan.moves
    assert (move.value, move.target_value) == (0.8, 0.2)
    assert (plan.nodes_outside, plan.nodes_due) == (1, 1)
    text = rebalance.message(move, policy=POLICY, dry_run=False)
    assert text.startswith(
        "evicted shop/web-1 of ReplicaSet/web from hot (policy shop/web-latency: latency 0.8"
    )
    assert "above 0.5 for 5m" in text and "dry run placed it on cool (latency 0.2" in text
    assert rebalance.message(move, policy=POLICY, dry_run=True).startswith("would evict")


def test_a_node_past_the_trigger_for_less_than_the_window_keeps_its_pods(one_hot_pod):
    plan = run(one_hot_pod, HOT_AND_COOL, since={"hot": NOW - 299})

    assert moved(plan) == []
    assert (plan.nodes_outside, plan.nodes_due) == (1, 0)


@pytest.mark.parametrize("owner", sorted(rebalance.RECREATING_OWNERS))
def test_pods_whose_controller_recreates_them_move(owner):
    snapshot = build_snapshot(
        node_with("hot", placed("web-1", "hot", owner=owner)), node_with("cool")
    )
    assert moved(run(snapshot, {"hot": 0.8, "cool": 0.1})) == [("web-1", "hot", "cool")]


@pytest.mark.parametrize("owner", ["", "DaemonSet", "Node", "CronJob"])
def test_pods_no_controller_recreates_never_move(owner):
    snapshot = build_snapshot(
        node_with("hot", placed("web-1", "hot", owner=owner)), node_with("cool")
    )
    plan = run(snapshot, {"hot": 0.8, "cool": 0.1})
    assert moved(plan) == []
    assert skipped(plan) == {"web-1": rebalance.Skip.NO_CONTROLLER}


@pytest.mark.parametrize("placed_by", ["", "shop/other-policy", "other/web-latency"])
def test_pods_placed_by_kube_scheduler_or_another_policy_are_never_candidates(placed_by):
    snapshot = build_snapshot(
        node_with("hot", placed("web-1", "hot", placed_by=placed_by)), node_with("cool")
    )
    plan = run(snapshot, {"hot": 0.8, "cool": 0.1})
    assert (moved(plan), plan.skipped) == ([], ())


def test_pods_younger_than_min_pod_age_stay():
    snapshot = build_snapshot(
        node_with("hot", placed("young", "hot", created=NOW - 299), placed("old", "hot")),
        node_with("cool"),
    )
    plan = run(snapshot, {"hot": 0.8, "cool": 0.1})
    assert moved(plan) == [("old", "hot", "cool")]
    assert skipped(plan) == {"young": rebalance.Skip.TOO_YOUNG}


def test_pods_not_running_or_being_deleted_stay():
    going = dataclasses.replace(placed("going", "hot"), deleting=True)
    snapshot = build_snapshot(
        node_with("hot", placed("starting", "hot", phase="Pending"), going), node_with("cool")
    )
    plan = run(snapshot, {"hot": 0.8, "cool": 0.1})
    assert moved(plan) == []
    assert set(skipped(plan).values()) == {rebalance.Skip.NOT_RUNNING}


def test_a_pod_evicted_within_the_window_is_not_evicted_again(one_hot_pod):
    within = rebalance.Eviction(
        pod=model.PodKey("shop/web-1"), node=model.NodeName("other"), time=NOW - 299
    )
    before = dataclasses.replace(within, time=NOW - 301)

    assert moved(run(one_hot_pod, HOT_AND_COOL, history=(within,))) == []
    assert moved(run(one_hot_pod, HOT_AND_COOL, history=(before,))) == [("web-1", "hot", "cool")]


def test_a_pod_a_budget_refused_is_tried_again_after_the_interval(one_hot_pod):
    refused = rebalance.Eviction(
        pod=model.PodKey("shop/web-1"), node=model.NodeName("hot"), time=NOW - 59, blocked=True
    )
    plan = run(one_hot_pod, HOT_AND_COOL, history=(refused,))
    assert skipped(plan) == {"web-1": rebalance.Skip.NODE_LIMIT}  # the interval's attempt
    later = dataclasses.replace(refused, time=NOW - 61)
    assert moved(run(one_hot_pod, HOT_AND_COOL, history=(later,))) == [("web-1", "hot", "cool")]


def test_lowest_priority_then_oldest_goes_first():
    snapshot = build_snapshot(
        node_with(
            "hot",
            placed("important", "hot", priority=10, created=NOW - 9000),
            placed("newer", "hot", created=NOW - 1000),
            placed("older", "hot", created=NOW - 2000),
        ),
        node_with("cool"),
    )
    plan = run(snapshot, {"hot": 0.8, "cool": 0.1})
    assert moved(plan) == [("older", "hot", "cool")]
    assert skipped(plan) == {
        "newer": rebalance.Skip.NODE_LIMIT,
        "important": rebalance.Skip.NODE_LIMIT,
    }


def test_the_node_furthest_past_the_trigger_is_served_first_when_max_total_binds():
    policy = dataclasses.replace(POLICY, rebalance=dataclasses.replace(SPEC, max_total=1))
    snapshot = build_snapshot(
        node_with("hot", placed("a", "hot")),
        node_with("hotter", placed("b", "hotter")),
        node_with("cool"),
    )
    plan = run(snapshot, {"hot": 0.7, "hotter": 0.9, "cool": 0.1}, policy=policy)
    assert moved(plan) == [("b", "hotter", "cool")]
    assert skipped(plan) == {"a": rebalance.Skip.TOTAL_LIMIT}


def test_dry_runs_per_pass_are_bounded():
    policy = dataclasses.replace(POLICY, rebalance=dataclasses.replace(SPEC, max_per_node=1000))
    crowd = [placed(f"web-{i}", "hot") for i in range(rebalance.MAX_DRY_RUNS + 3)]
    snapshot = build_snapshot(node_with("hot", *crowd), node_with("other"))
    plan = run(snapshot, {"hot": 0.8, "other": 0.7}, policy=policy)  # nowhere better
    reasons = list(skipped(plan).values())
    assert reasons.count(rebalance.Skip.NO_BETTER_NODE) == rebalance.MAX_DRY_RUNS
    assert reasons.count(rebalance.Skip.BUDGET) == 3


# --- hysteresis: the dry run must find a node inside the trigger by the margin -------


@pytest.mark.parametrize(
    ("best", "moves"), [(0.44, True), (0.45, True), (0.46, False), (0.5, False), (0.7, False)]
)
def test_the_dry_runs_node_must_be_inside_the_trigger_by_the_margin(best, moves):
    snapshot = build_snapshot(node_with("hot", placed("web-1", "hot")), node_with("other"))
    plan = run(snapshot, {"hot": 0.8, "other": best})
    assert bool(plan.moves) is moves
    if not moves:
        assert skipped(plan) == {"web-1": rebalance.Skip.NO_BETTER_NODE}


def test_when_every_node_is_hot_nothing_moves():
    snapshot = build_snapshot(
        node_with("hot", placed("web-1", "hot")), node_with("also-hot", placed("web-2", "also-hot"))
    )
    plan = run(snapshot, {"hot": 0.8, "also-hot": 0.7})
    assert moved(plan) == []
    assert set(skipped(plan).values()) == {rebalance.Skip.NO_BETTER_NODE}


def test_a_below_trigger_moves_pods_off_nodes_under_it():
    metric = build_metric_spec("free", goal=model.Goal.MAXIMIZE, threshold_min=0.2)
    spec = dataclasses.replace(SPEC, metric="free", above=None, below=0.2, margin=0.1)
    policy = dataclasses.replace(build_policy(metrics=[metric]), rebalance=spec)
    snapshot = build_snapshot(
        node_with("starved", placed("web-1", "starved")), node_with("roomy"), node_with("tight")
    )
    values = {"starved": 0.1, "roomy": 0.9, "tight": 0.25}
    plan = run(snapshot, values, policy=policy, view=build_metric_view(policy, {"free": values}))
    assert moved(plan) == [("web-1", "starved", "roomy")]


def test_moves_of_one_pass_count_on_each_other():
    # "cool" has room for one more pod only: the second pod must go elsewhere or stay.
    tight = dataclasses.replace(build_pod_info(), requests=model.Resources(milli_cpu=1000, pods=1))
    a = dataclasses.replace(placed("a", "hot-1"), requests=tight.requests)
    b = dataclasses.replace(placed("b", "hot-2"), requests=tight.requests)
    snapshot = build_snapshot(
        node_with("hot-1", a), node_with("hot-2", b), node_with("cool", cpu=1000)
    )
    plan = run(snapshot, {"hot-1": 0.9, "hot-2": 0.8, "cool": 0.1})
    assert moved(plan) == [("a", "hot-1", "cool")]
    assert skipped(plan) == {"b": rebalance.Skip.NO_BETTER_NODE}


def test_a_pod_the_cycle_would_place_under_another_policy_stays(one_hot_pod):
    other = dataclasses.replace(
        build_policy("urgent", metrics=[build_metric_spec("latency")]), priority=100
    )
    plan = run(one_hot_pod, HOT_AND_COOL, policies=(POLICY, other))
    assert skipped(plan) == {"web-1": rebalance.Skip.OTHER_POLICY}


def test_a_pod_the_cycle_would_place_by_fallback_stays(one_hot_pod):
    view = build_metric_view(
        POLICY,
        {"latency": HOT_AND_COOL},
        errors={"latency": (model.QueryErrorKind.UNREACHABLE, "connection refused")},
    )
    plan = run(one_hot_pod, HOT_AND_COOL, view=view)
    assert skipped(plan) == {"web-1": rebalance.Skip.FALLBACK}


def test_a_policy_without_rebalance_plans_nothing(one_hot_pod):
    plan = run(one_hot_pod, HOT_AND_COOL, policy=dataclasses.replace(POLICY, rebalance=None))
    assert plan == rebalance.Plan(moves=(), nodes_outside=0, nodes_due=0, skipped=())


# --- the outside-since record ----------------------------------------------------------


def test_outside_since_is_kept_while_past_and_dropped_when_inside_or_missing():
    previous = {model.NodeName("a"): NOW - 100, model.NodeName("b"): NOW - 100}
    values = {model.NodeName("a"): 0.9, model.NodeName("b"): 0.3, model.NodeName("c"): 0.6}
    assert rebalance.track_outside(spec=SPEC, previous=previous, values=values, now=NOW) == {
        "a": NOW - 100,
        "c": NOW,
    }
    # "a" has no fresh value: it starts over once it has one again.
    assert rebalance.track_outside(spec=SPEC, previous=previous, values={}, now=NOW) == {}


def test_a_move_starts_its_nodes_window_over():
    since = {model.NodeName("a"): NOW - 600, model.NodeName("b"): NOW - 600}
    assert rebalance.restart_after_move(since, model.NodeName("a"), now=NOW) == {
        "a": NOW,
        "b": NOW - 600,
    }
    assert rebalance.restart_after_move(since, model.NodeName("c"), now=NOW) == since


def test_trigger_values_are_the_fresh_samples(one_hot_pod):
    nodes = [state.node for state in one_hot_pod.nodes.values()]
    stale = build_metric_view(POLICY, {"latency": HOT_AND_COOL}, refreshed_at=NOW - 121)
    fresh = build_metric_view(POLICY, {"latency": {"hot": 0.8}})
    assert rebalance.trigger_values(policy=POLICY, nodes=nodes, metrics=stale, now=NOW) == {}
    assert rebalance.trigger_values(policy=POLICY, nodes=nodes, metrics=fresh, now=NOW) == {
        "hot": 0.8
    }


# --- the limits, for any history -------------------------------------------------------


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    pods_per_node=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    past=st.lists(st.tuples(st.integers(0, 3), st.floats(0, 400)), max_size=8),
    max_per_node=st.integers(0, 3),
    max_total=st.integers(0, 6),
)
def test_limits_hold_for_any_history(pods_per_node, past, max_per_node, max_total):
    spec = dataclasses.replace(SPEC, max_per_node=max_per_node, max_total=max_total)
    policy = dataclasses.replace(POLICY, rebalance=spec)
    hot = [f"hot-{i}" for i in range(len(pods_per_node))]
    states = [
        node_with(name, *(placed(f"{name}-pod-{j}", name) for j in range(count)))
        for name, count in zip(hot, pods_per_node, strict=True)
    ]
    history = tuple(
        rebalance.Eviction(
            pod=model.PodKey(f"shop/gone-{k}"),
            node=model.NodeName(hot[index % len(hot)]),
            time=NOW - age,
        )
        for k, (index, age) in enumerate(past)
    )
    latency = {name: 0.9 for name in hot} | {"cool": 0.0}
    plan = run(
        build_snapshot(*states, node_with("cool", cpu=64000)),
        latency,
        policy=policy,
        history=history,
    )

    recent = [e for e in history if e.time > NOW - spec.interval_s]
    assert len(plan.moves) <= max(0, max_total - len(recent))
    for name in hot:
        before = sum(e.node == name for e in recent)
        assert sum(m.node == name for m in plan.moves) <= max(0, max_per_node - before)
    keys = [m.pod.key for m in plan.moves]
    assert len(keys) == len(set(keys))
    # Below every limit, every candidate moves: the limits are the only brake here.
    room = min(
        max(0, max_total - len(recent)),
        sum(
            min(count, max(0, max_per_node - sum(e.node == name for e in recent)))
            for name, count in zip(hot, pods_per_node, strict=True)
        ),
    )
    assert len(plan.moves) == room
