"""The burst penalty: recent binds cost points, so a burst of pods does not herd."""

from __future__ import annotations

import collections
import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import columns, model, scoring
from tests.unit import conftest


def bind(snapshot: model.ClusterSnapshot, node: str, at: float) -> model.ClusterSnapshot:
    """The snapshot after this scheduler bound a pod to ``node`` at ``at``."""
    name = model.NodeName(node)
    state = snapshot.nodes[name]
    nodes = dict(snapshot.nodes)
    nodes[name] = dataclasses.replace(state, recent_binds=(*state.recent_binds, at))
    return model.ClusterSnapshot(nodes=nodes)


def place(schedule, *, pods, snapshot, policy, view, now):
    """Schedule ``pods`` pods one after another, one second apart, recording each bind."""
    placed: list[str] = []
    for number in range(pods):
        pod = schedule.pod(f"web-{number}")
        decision = schedule.run(
            pod=pod, snapshot=snapshot, policies=[policy], metrics=view, now=now + number
        )
        assert decision.outcome is model.Outcome.BIND
        placed.append(decision.node)
        snapshot = bind(snapshot, decision.node, now + number)
    return placed


class Scheduler:
    def __init__(self, run, make_pod):
        self.run = run
        self.pod = make_pod


def _table(*recent_binds: tuple[float, ...]) -> columns.NodeTable:
    return columns.NodeTable.build(
        conftest.build_node_state(f"n{i}", recent_binds=binds)
        for i, binds in enumerate(recent_binds)
    )


def _counts(table: columns.NodeTable, *, now: float, window_s: float) -> list[int]:
    return scoring.burst_counts(table, now=now, window_s=window_s).tolist()


def test_burst_count_counts_binds_within_the_window_only():
    # 101: a bind the clock has not caught up with
    table = _table((39.0, 40.0, 99.0, 100.0, 101.0), (), (10.0,), (101.0, 50.0))
    assert _counts(table, now=100.0, window_s=60.0) == [4, 0, 0, 2]
    assert _counts(table, now=100.0, window_s=1.0) == [3, 0, 0, 1]
    assert _counts(table, now=200.0, window_s=60.0) == [0, 0, 0, 0]


def test_zero_window_disables_the_burst_count():
    assert _counts(_table((100.0,)), now=100.0, window_s=0.0) == [0]


def test_burst_counts_stay_right_when_a_row_needs_more_room():
    table = _table((1.0,), (2.0,))
    state = table.states[1]
    table.update(dataclasses.replace(state, recent_binds=(2.0, 3.0, 4.0, 5.0)))
    assert table.bind_times.shape[0] >= 4
    assert _counts(table, now=5.0, window_s=3.0) == [0, 4]
    table.update(dataclasses.replace(state, recent_binds=(5.0,)))
    assert _counts(table, now=5.0, window_s=3.0) == [0, 1]


def test_penalty_takes_points_per_recent_bind_and_floors_at_zero(make_metric, make_policy):
    policy = make_policy(metrics=[make_metric("latency")], burst_penalty=30.0)
    scores = scoring.score_nodes(policy=policy, columns=[(0.1, 0.1, 0.1)], burst_counts=[0, 1, 4])
    assert tuple(scores.totals.tolist()) == (100.0, 70.0, 0.0)
    assert tuple(scores.penalties.tolist()) == (0.0, 30.0, 120.0)


def test_ties_go_to_the_node_with_fewest_recent_binds_then_to_a_random_one_of_those_left():
    winners = {
        scoring.ranking(totals=[90, 90, 90], burst_counts=[2, 1, 1], seed=seed)[0]
        for seed in range(50)
    }
    assert winners == {1, 2}
    assert scoring.ranking(totals=[90, 91, 90], burst_counts=[0, 5, 0], seed=0) == [
        1,
        0,
    ]


def test_the_runner_up_of_a_tie_is_another_tied_node():
    for seed in range(20):
        top = scoring.ranking(totals=[90, 90, 80], burst_counts=[0, 0, 0], seed=seed)
        assert sorted(top) == [0, 1]


def test_burst_penalty_spreads_pods_that_would_herd_on_the_best_looking_node(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    cluster = make_cluster(make_node("node-a"), make_node("node-b"), make_node("node-c"))
    latencies = {"latency": {"node-a": 0.10, "node-b": 0.11, "node-c": 0.12}}
    # Plain min-max (no tolerance): the gaps between the nodes are real, not noise.
    latency = make_metric("latency", tolerance_percent=0.0)
    herding = make_policy(metrics=[latency], burst_penalty=0.0)
    spreading = make_policy(metrics=[latency], burst_penalty=20.0)
    scheduler = Scheduler(schedule, make_pod)

    # The metrics cannot react within the burst: every pod sees the same values.
    herd = place(
        scheduler,
        pods=6,
        snapshot=cluster,
        policy=herding,
        view=make_view(herding, latencies),
        now=now,
    )
    spread = place(
        scheduler,
        pods=6,
        snapshot=cluster,
        policy=spreading,
        view=make_view(spreading, latencies),
        now=now,
    )

    assert set(herd) == {"node-a"}
    # node-a scores 100 - 20 per bind, node-b 50 - 20 per bind, node-c 0.
    assert spread == ["node-a", "node-a", "node-a", "node-b", "node-a", "node-b"]


def test_binds_older_than_the_window_no_longer_cost_points(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    policy = make_policy(metrics=[make_metric("latency")], burst_penalty=50.0, burst_window_s=60)
    cluster = make_cluster(
        make_node("node-a", recent_binds=[now - 61, now - 61]),
        make_node("node-b", recent_binds=[now - 1]),
    )
    view = make_view(policy, {"latency": {"node-a": 0.1, "node-b": 0.1}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    by_node = {verdict.node: verdict for verdict in decision.verdicts}
    assert decision.node == "node-a"
    assert (by_node["node-a"].burst_count, by_node["node-a"].score) == (0, 100.0)
    assert (by_node["node-b"].burst_count, by_node["node-b"].score) == (1, 50.0)


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 6),
    pods=st.integers(1, 25),
    penalty=st.integers(1, 100),
    latency=st.floats(0, 10, allow_nan=False),
)
def test_burst_penalty_spreads_a_burst_evenly_over_equal_nodes(
    *,
    make_node,
    make_cluster,
    make_pod,
    make_metric,
    make_policy,
    make_view,
    schedule,
    now,
    nodes,
    pods,
    penalty,
    latency,
):
    names = [f"node-{index}" for index in range(nodes)]
    policy = make_policy(metrics=[make_metric("latency")], burst_penalty=float(penalty))
    view = make_view(policy, {"latency": dict.fromkeys(names, latency)})
    cluster = make_cluster(*(make_node(name) for name in names))

    placed = place(
        Scheduler(schedule, make_pod),
        pods=pods,
        snapshot=cluster,
        policy=policy,
        view=view,
        now=now,
    )

    counts = collections.Counter(placed)
    per_node = [counts.get(name, 0) for name in names]
    assert max(per_node) - min(per_node) <= 1


@settings(max_examples=40, deadline=None)
@given(
    latencies=st.lists(st.floats(0, 10, allow_nan=False), min_size=2, max_size=5),
    pods=st.integers(1, 30),
    penalty=st.integers(5, 100),
)
def test_a_burst_never_piles_more_than_100_over_penalty_pods_on_one_node(
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
    pods,
    penalty,
):
    names = [f"node-{index}" for index in range(len(latencies))]
    policy = make_policy(metrics=[make_metric("latency")], burst_penalty=float(penalty))
    view = make_view(policy, {"latency": dict(zip(names, latencies, strict=True))})
    cluster = make_cluster(*(make_node(name) for name in names))

    placed = place(
        Scheduler(schedule, make_pod),
        pods=pods,
        snapshot=cluster,
        policy=policy,
        view=view,
        now=now,
    )

    # Once a node is 100/penalty + 1 binds ahead its score is 0, and ties go to fewer binds.
    counts = collections.Counter(placed)
    per_node = [counts.get(name, 0) for name in names]
    assert max(per_node) - min(per_node) <= -(-100 // penalty) + 1
