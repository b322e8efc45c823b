"""No herding: noise is not blown up into a gap, ties break at random, bursts spread."""

from __future__ import annotations

import collections
import dataclasses
import zlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from metricsched.core import model, scoring

MINIMIZE = model.Goal.MINIMIZE
MAXIMIZE = model.Goal.MAXIMIZE
NEUTRAL = model.OnMissing.NEUTRAL

magnitudes = st.floats(min_value=1e-6, max_value=1e12, allow_nan=False)
noise = st.lists(st.floats(min_value=-0.01, max_value=0.01), min_size=2, max_size=12)


def bind(snapshot: model.ClusterSnapshot, node: str, at: float) -> model.ClusterSnapshot:
    name = model.NodeName(node)
    nodes = dict(snapshot.nodes)
    nodes[name] = dataclasses.replace(nodes[name], recent_binds=(*nodes[name].recent_binds, at))
    return model.ClusterSnapshot(nodes=nodes)


def burst(*, schedule, make_pod, snapshot, policy, view, now, pods, spaced=False):
    """Place ``pods`` pods one after another, each seeded by its uid as the operator does.

    ``spaced``: each earlier bind lies beyond the burst window (pods arriving far apart,
    with metrics that stay as they are).
    """
    placed: list[str] = []
    for number in range(pods):
        pod = dataclasses.replace(make_pod(f"web-{number}"), uid=f"uid-{number}")
        decision = schedule(
            pod=pod,
            snapshot=snapshot,
            policies=[policy],
            metrics=view,
            now=now,
            seed=zlib.crc32(pod.uid.encode()),
        )
        assert decision.outcome is model.Outcome.BIND
        assert not decision.fallback_reason
        placed.append(decision.node)
        at = now - policy.burst_window_s - 1 if spaced else now
        snapshot = bind(snapshot, decision.node, at)
    return collections.Counter(placed)


# --- normalisation ---------------------------------------------------------------------


@settings(max_examples=300)
@given(best=magnitudes, offsets=noise, goal=st.sampled_from(list(model.Goal)))
def test_values_within_the_tolerance_of_the_best_all_score_100(best, offsets, goal):
    # 1 % noise around a value, tolerance 5 % of the best: every node counts as the best.
    column = tuple(best * (1 + 0.01 + offset) for offset in offsets)
    scores = scoring.normalise(column, goal=goal, on_missing=NEUTRAL, tolerance_percent=5.0)
    assert tuple(scores.tolist()) == (100.0,) * len(column)


@settings(max_examples=300)
@given(
    column=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=10),
    shifts=st.lists(st.floats(-1.0, 1.0), min_size=10, max_size=10),
    delta=st.floats(0.0, 10.0),
    value_range=st.floats(1.0, 1e6),
    tolerance=st.floats(0.0, 100.0),
    goal=st.sampled_from(list(model.Goal)),
)
def test_with_a_range_noise_moves_no_score_by_more_than_its_share_of_the_range(
    *, column, shifts, delta, value_range, tolerance, goal
):
    noisy = [value + shift * delta for value, shift in zip(column, shifts, strict=False)]

    def scores(values):
        return scoring.normalise(
            tuple(values),
            goal=goal,
            on_missing=NEUTRAL,
            tolerance=tolerance,
            tolerance_percent=0.0,
            value_range=value_range,
        )

    # Each value moves by at most delta and so does the best: distances by at most 2 delta.
    bound = 100.0 * 2 * delta / value_range + 1e-6
    for before, after in zip(scores(column), scores(noisy), strict=True):
        assert abs(before - after) <= bound


@settings(max_examples=200)
@given(
    column=st.lists(st.floats(-1e9, 1e9), min_size=2, max_size=10),
    goal=st.sampled_from(list(model.Goal)),
)
def test_without_tolerance_or_range_scores_are_min_max(column, goal):
    low, high = min(column), max(column)
    assume(high - low > 1e-3)
    scores = scoring.normalise(tuple(column), goal=goal, on_missing=NEUTRAL)
    for value, score in zip(column, scores, strict=True):
        share = (high - value) if goal is MINIMIZE else (value - low)
        assert score == pytest.approx(100 * share / (high - low), abs=1e-6)


def test_a_gap_beyond_the_tolerance_costs_only_what_exceeds_it():
    # best 0.100, tolerance 5 % = 0.005: 0.103 is within; 0.107 is 0.002 beyond, of 0.010.
    scores = scoring.normalise(
        (0.100, 0.103, 0.107, 0.110), goal=MINIMIZE, on_missing=NEUTRAL, tolerance_percent=5.0
    )
    assert tuple(scores.tolist()) == pytest.approx((100.0, 100.0, 80.0, 50.0))


def test_a_range_scores_by_distance_from_the_best_in_the_metrics_units():
    # latency in seconds with range 1 s: 0.2 s worse than the best loses 20 points.
    scores = scoring.normalise(
        (0.1, 0.3, 2.0), goal=MINIMIZE, on_missing=NEUTRAL, tolerance_percent=0.0, value_range=1.0
    )
    assert tuple(scores.tolist()) == pytest.approx((100.0, 80.0, 0.0))


# --- ties ------------------------------------------------------------------------------


@settings(max_examples=100)
@given(tied=st.integers(2, 12), others=st.integers(0, 5), seed=st.integers(0, 2**32 - 1))
def test_the_winner_of_a_tie_is_one_of_the_tied_nodes_drawn_by_the_seed(tied, others, seed):
    totals = [70.0] * tied + [50.0] * others
    first = scoring.ranking(totals=totals, burst_counts=[0] * len(totals), seed=seed)
    again = scoring.ranking(totals=totals, burst_counts=[0] * len(totals), seed=seed)
    assert first == again
    assert first[0] < tied and first[1] < tied and first[0] != first[1]


def test_every_tied_node_wins_for_some_seed():
    winners = {
        scoring.ranking(totals=[100.0] * 10, burst_counts=[0] * 10, seed=seed)[0]
        for seed in range(200)
    }
    assert winners == set(range(10))


# --- bursts and spaced pods through the cycle ------------------------------------------


def test_forty_pods_on_four_nodes_a_few_thousandths_apart_land_ten_each(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    # The report: 0.100..0.103 used to give 20/13/7/0.
    names = ["node-a", "node-b", "node-c", "node-d"]
    policy = make_policy(metrics=[make_metric("latency")])
    view = make_view(
        policy, {"latency": dict(zip(names, (0.100, 0.101, 0.102, 0.103), strict=True))}
    )
    counts = burst(
        schedule=schedule,
        make_pod=make_pod,
        snapshot=make_cluster(*(make_node(name) for name in names)),
        policy=policy,
        view=view,
        now=now,
        pods=40,
    )
    assert [counts[name] for name in names] == [10, 10, 10, 10]


@settings(max_examples=30, deadline=None)
@given(
    base=magnitudes, offsets=noise, pods=st.integers(10, 60), goal=st.sampled_from(list(model.Goal))
)
def test_a_burst_over_nodes_whose_values_differ_by_noise_spreads_evenly(
    *,
    make_node,
    make_cluster,
    make_pod,
    make_metric,
    make_policy,
    make_view,
    schedule,
    now,
    base,
    offsets,
    pods,
    goal,
):
    names = [f"node-{index:02}" for index in range(len(offsets))]
    policy = make_policy(metrics=[make_metric("latency", goal=goal)])
    values = {name: base * (1 + offset) for name, offset in zip(names, offsets, strict=True)}
    counts = burst(
        schedule=schedule,
        make_pod=make_pod,
        snapshot=make_cluster(*(make_node(name) for name in names)),
        policy=policy,
        view=make_view(policy, {"latency": values}),
        now=now,
        pods=pods,
    )
    per_node = [counts[name] for name in names]
    assert max(per_node) - min(per_node) <= 1


def test_a_much_better_node_takes_the_burst_until_the_penalty_levels_it(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    names = [f"node-{index}" for index in range(10)]
    values = {name: 0.1 * (1 + 0.001 * index) for index, name in enumerate(names)}
    values["node-0"] = 0.01  # ten times better
    policy = make_policy(metrics=[make_metric("latency")], burst_penalty=5.0)
    counts = burst(
        schedule=schedule,
        make_pod=make_pod,
        snapshot=make_cluster(*(make_node(name) for name in names)),
        policy=policy,
        view=make_view(policy, {"latency": values}),
        now=now,
        pods=100,
    )
    # node-0 scores 100 and the others under 2 (their gap to it is real, the noise among
    # them is within the tolerance): it takes pods while 100 - 5 k beats 2, that is 20, and
    # the others share the rest evenly.
    assert counts["node-0"] == 20
    others = [counts[name] for name in names[1:]]
    assert max(others) - min(others) <= 1
    assert sum(others) == 100 - counts["node-0"]


def test_equal_nodes_and_pods_spaced_beyond_the_burst_window_spread_like_kube_scheduler(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule, now
):
    names = [f"node-{index}" for index in range(10)]
    policy = make_policy(metrics=[make_metric("latency")], burst_window_s=60.0)
    counts = burst(
        schedule=schedule,
        make_pod=make_pod,
        snapshot=make_cluster(*(make_node(name) for name in names)),
        policy=policy,
        view=make_view(policy, {"latency": dict.fromkeys(names, 0.1)}),
        now=now,
        pods=200,
        spaced=True,  # every pod sees no recent bind: only the random tie-break spreads them
    )
    mean = 200 / len(names)
    assert all(0.5 * mean <= counts[name] <= 1.5 * mean for name in names), counts
