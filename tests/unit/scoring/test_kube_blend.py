"""Blending kube-scheduler's scores with the metric scores (spec.kubeScores)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import model, scoring
from tests.unit.conftest import as_lists, build_metric_spec, build_policy

TERM = scoring.KubeTerm


def policy(weight: int = 1, burst_penalty: float = 0.0) -> model.Policy:
    return build_policy(
        metrics=[build_metric_spec("latency", weight=weight, tolerance_percent=0.0)],
        burst_penalty=burst_penalty,
    )


def test_the_score_is_the_weighted_mean_of_metric_and_kube_scores():
    # latency 0.1 vs 0.2: 100 and 0; TaintToleration (weight 3): 0 and 100.
    scores = scoring.score_nodes(
        policy=policy(),
        columns=[(0.1, 0.2)],
        burst_counts=[0, 0],
        kube=[TERM("TaintToleration", 3, (0.0, 100.0))],
    )
    assert tuple(scores.totals.tolist()) == (25.0, 75.0)
    assert [term.plugin for term in scores.kube] == ["TaintToleration"]


def test_a_kube_term_equal_on_every_node_is_left_out():
    scores = scoring.score_nodes(
        policy=policy(),
        columns=[(0.1, 0.2)],
        burst_counts=[0, 0],
        kube=[TERM("TaintToleration", 3, (100.0, 100.0))],
    )
    assert tuple(scores.totals.tolist()) == (100.0, 0.0)
    assert scores.kube == ()


def test_kube_weights_of_zero_score_exactly_as_metrics_alone():
    alone = scoring.score_nodes(policy=policy(), columns=[(0.1, 0.15, 0.2)], burst_counts=[1, 0, 0])
    zero = scoring.score_nodes(
        policy=policy(),
        columns=[(0.1, 0.15, 0.2)],
        burst_counts=[1, 0, 0],
        kube=[TERM("NodeAffinity", 0, (0.0, 50.0, 100.0))],
    )
    assert as_lists(zero) == as_lists(alone)


def test_the_burst_penalty_is_taken_from_the_metric_part_only():
    # Metrics equal (100 each), one recent bind on the first node (penalty 10), and
    # LeastAllocated of weight 1: (90 + 50) / 2 and (100 + 60) / 2.
    scores = scoring.score_nodes(
        policy=policy(burst_penalty=10.0),
        columns=[(0.1, 0.1)],
        burst_counts=[1, 0],
        kube=[TERM("NodeResourcesFit", 1, (50.0, 60.0))],
    )
    assert tuple(scores.totals.tolist()) == (70.0, 80.0)
    assert tuple(scores.penalties.tolist()) == (
        5.0,
        0.0,
    )  # the points it took from the blended score


@settings(max_examples=200)
@given(
    factor=st.integers(min_value=1, max_value=20),
    scores=st.lists(st.integers(min_value=0, max_value=100), min_size=2, max_size=6),
)
def test_scaling_every_weight_by_a_constant_changes_no_score(factor, scores):
    columns = [tuple(0.1 + 0.01 * index for index in range(len(scores)))]
    term = TERM("PodTopologySpread", 2, tuple(float(s) for s in scores))
    base = scoring.score_nodes(
        policy=policy(1), columns=columns, burst_counts=[0] * len(scores), kube=[term]
    )
    scaled = scoring.score_nodes(
        policy=policy(factor),
        columns=columns,
        burst_counts=[0] * len(scores),
        kube=[dataclasses.replace(term, weight=2 * factor)],
    )
    assert scaled.totals.tolist() == base.totals.tolist()


@settings(max_examples=200)
@given(noise=st.lists(st.floats(min_value=0.0, max_value=0.004), min_size=2, max_size=10))
def test_noise_within_the_tolerance_stays_a_tie_beside_kube_terms_equal_everywhere(noise):
    # Values within 5 % of the best all score 100; TaintToleration 100 everywhere has no say.
    spec = build_metric_spec("latency", tolerance_percent=5.0)
    columns = [tuple(0.1 + n for n in noise)]
    scores = scoring.score_nodes(
        policy=build_policy(metrics=[spec]),
        columns=columns,
        burst_counts=[0] * len(noise),
        kube=[TERM("TaintToleration", 3, (100.0,) * len(noise))],
    )
    assert set(scores.totals) == {100.0}


def test_the_readmes_worked_example():
    # latency weight 3 (0.1 and 0.2 s with range 0.25: 100 and 60); TaintToleration 3,
    # LeastAllocated 1, BalancedAllocation 1 (equal: left out); two recent binds on node-b.
    spec = build_metric_spec("latency", weight=3, tolerance_percent=0.0, value_range=0.25)
    kube = [
        TERM("TaintToleration", 3, (0.0, 100.0)),
        TERM("NodeResourcesFit", 1, (80.0, 90.0)),
        TERM("NodeResourcesBalancedAllocation", 1, (95.0, 95.0)),
    ]
    calm = scoring.score_nodes(
        policy=build_policy(metrics=[spec]), columns=[(0.1, 0.2)], burst_counts=[0, 0], kube=kube
    )
    assert [scoring.format_score(total) for total in calm.totals] == ["54", "81"]
    busy = scoring.score_nodes(
        policy=build_policy(metrics=[spec], burst_penalty=5.0),
        columns=[(0.1, 0.2)],
        burst_counts=[0, 2],
        kube=kube,
    )
    assert scoring.format_score(busy.totals[1]) == "77"
