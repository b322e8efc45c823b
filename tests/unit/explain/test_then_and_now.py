"""Explaining a bound pod: the decision recorded at bind time first, then what the policy
would decide now and what changed."""

from __future__ import annotations

import pytest

from metricsched.core import decision_record, explain, model
from tests.unit.conftest import NOW, build_metric_spec

LEAST = model.FallbackStrategy.LEAST_ALLOCATED


@pytest.fixture
def web_latency(make_policy):
    return make_policy("web-latency", metrics=[build_metric_spec("latency", tolerance_percent=0.0)])


@pytest.fixture
def three_nodes(make_node, make_cluster):
    return make_cluster(make_node("node-1"), make_node("node-2"), make_node("node-3"))


@pytest.fixture
def decide(schedule, make_pod, three_nodes, web_latency, make_view):
    """Decides for the pod of shop with the given latency per node."""

    def run(latency):
        return schedule(
            pod=make_pod(),
            snapshot=three_nodes,
            policies=[web_latency],
            metrics=make_view(web_latency, {"latency": latency}),
        )

    return run


@pytest.fixture
def then(decide):
    decision = decide({"node-1": 0.1, "node-2": 0.2, "node-3": 0.5})
    return decision_record.record_of(decision, fallback_strategy=LEAST, now=NOW)


def test_the_recorded_decision_shows_policy_winner_and_runner_up(then):
    text = explain.render_recorded(then, bound_to="node-1")
    assert text.splitlines() == [
        "Decision at bind time (2023-11-14T22:13:20Z, as recorded on the pod,"
        " which its author can edit):",
        "  Policy:    shop/web-latency",
        "  Placed on: node-1  score 100  [latency 0.1]",
        "  Runner-up: node-2  score 75  [latency 0.2]",
    ]


def test_a_pod_bound_elsewhere_than_recorded_is_pointed_out(then):
    assert "bound to node-3, not to the recorded node" in explain.render_recorded(
        then, bound_to="node-3"
    )


def test_after_the_metric_changed_the_new_winner_and_both_values_are_shown(then, decide):
    latency_now = {"node-1": 0.9, "node-2": 0.2, "node-3": 0.5}
    now = decide(latency_now)
    text = explain.render_changes(
        record=then,
        now=now,
        now_values={node: {"latency": value} for node, value in latency_now.items()},
        capacity={"node-1": "cpu 0m/4000m", "node-2": "cpu 100m/4000m"},
    )
    lines = text.splitlines()
    assert lines[1] == "  The policy would now place the pod on node-2, not node-1."
    rows = [line.split() for line in lines[3:]]
    assert rows[0][:4] == ["node-1", "placed", "then", "0.1→0.9"]
    assert rows[1][:6] == ["node-2", "runner-up", "then,", "winner", "now", "0.2→0.2"]
    assert rows[1][6:] == ["100", "yes", "cpu", "100m/4000m"]
