"""Shadow evaluation: what the policy would have done with a pod another scheduler bound,
on the cluster as that scheduler saw it, and the summary a person reads."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import yaml

from metricsched.core import cycle, model, shadow
from tests.unit.conftest import NOW, build_metric_spec

LATENCY = {"node-1": 0.1, "node-2": 0.4, "node-3": 0.2}


@pytest.fixture
def trial(make_policy):
    return dataclasses.replace(
        # Plain min-max (no tolerance), so the gaps below are the textbook ones.
        make_policy("trial", metrics=[build_metric_spec("latency", tolerance_percent=0.0)]),
        mode=model.PolicyMode.SHADOW,
    )


@pytest.fixture
def three_nodes(make_node, make_cluster):
    return make_cluster(make_node("node-1"), make_node("node-2"), make_node("node-3"))


def asked(snapshot: model.ClusterSnapshot, metrics: model.MetricView) -> cycle.Inputs:
    """The cycle's inputs a shadow evaluation reads (it sets the policy, the strategy and
    the scheduler names itself)."""
    return cycle.Inputs(
        snapshot=snapshot,
        table=None,
        policies=(),
        metrics=metrics,
        default_fallback=model.FallbackStrategy.WAIT,
        scheduler_names=frozenset(),
        now=NOW,
    )


def bound(make_pod, node: str):
    return make_pod("web-1", scheduler_name="default-scheduler", node_name=node)


def test_a_pod_placed_elsewhere_records_the_policys_node_values_and_gap(
    make_pod, trial, three_nodes, make_view
):
    evaluation = shadow.evaluate(
        pod=bound(make_pod, "node-2"),
        policy=trial,
        inputs=asked(three_nodes, make_view(trial, {"latency": LATENCY})),
    )
    assert (evaluation.node, evaluation.policy_node, evaluation.agree) == (
        "node-2",
        "node-1",
        False,
    )
    assert evaluation.policy_values == {"latency": 0.1}
    assert evaluation.actual_values == {"latency": 0.4}
    assert evaluation.score_gap == pytest.approx(100.0)  # min-max: node-1 100, node-2 0
    assert evaluation.reason == "node-2 scores 0, node-1 100"


def test_a_pod_placed_where_the_policy_would_agrees(make_pod, trial, three_nodes, make_view):
    evaluation = shadow.evaluate(
        pod=bound(make_pod, "node-1"),
        policy=trial,
        inputs=asked(three_nodes, make_view(trial, {"latency": LATENCY})),
    )
    assert (evaluation.policy_node, evaluation.agree, evaluation.score_gap) == ("node-1", True, 0)
    assert evaluation.reason == ""


def test_a_tie_with_the_winner_counts_as_agreement(make_pod, trial, three_nodes, make_view):
    tied = {"node-1": 0.1, "node-2": 0.1, "node-3": 0.2}
    evaluation = shadow.evaluate(
        pod=bound(make_pod, "node-2"),
        policy=trial,
        inputs=asked(three_nodes, make_view(trial, {"latency": tied})),
    )
    assert evaluation.policy_node in {"node-1", "node-2"}  # drawn at random among the tie
    assert evaluation.agree
    assert evaluation.score_gap == 0


def test_the_pod_is_taken_off_its_node_before_the_policy_decides(
    make_pod, make_node, make_cluster, trial, make_view
):
    pod = bound(make_pod, "node-2")
    full = dataclasses.replace(
        make_node("node-2", cpu=pod.requests.milli_cpu),
        pods=(pod,),
        requested=pod.requests,
    )
    snapshot = make_cluster(make_node("node-1"), full)
    evaluation = shadow.evaluate(
        pod=pod,
        policy=trial,
        inputs=asked(snapshot, make_view(trial, {"latency": {"node-1": 0.3, "node-2": 0.1}})),
    )
    assert (evaluation.policy_node, evaluation.agree) == ("node-2", True)
    before, _ = shadow.without_pod(snapshot, None, pod)
    assert before.nodes["node-2"].requested.milli_cpu == 0


def test_a_pod_the_policy_would_not_place_is_unplaceable(
    make_pod, make_policy, three_nodes, make_view
):
    strict = dataclasses.replace(
        make_policy("trial", metrics=[build_metric_spec("latency", threshold_max=0.05)]),
        mode=model.PolicyMode.SHADOW,
    )
    evaluation = shadow.evaluate(
        pod=bound(make_pod, "node-2"),
        policy=strict,
        inputs=asked(three_nodes, make_view(strict, {"latency": LATENCY})),
    )
    assert (evaluation.policy_node, evaluation.agree) == (None, False)
    assert "exceeded threshold latency" in evaluation.reason
    assert evaluation.actual_values == {"latency": 0.4}


# --- the summary -------------------------------------------------------------------------


def evaluation(*, policy_node, node, policy_value, actual_value, gap=0.0):
    return shadow.Evaluation(
        pod=model.PodKey(f"shop/{node}-{policy_node}"),
        policy=model.PolicyKey("shop/trial"),
        node=model.NodeName(node),
        policy_node=policy_node,
        agree=policy_node == node,
        score_gap=gap,
        policy_values={"latency": policy_value} if policy_node else {},
        actual_values={"latency": actual_value},
        reason="",
        time=NOW,
    )


@pytest.fixture
def three_evaluations():
    return [
        evaluation(policy_node="node-1", node="node-2", policy_value=0.1, actual_value=0.4, gap=90),
        evaluation(policy_node="node-3", node="node-3", policy_value=0.2, actual_value=0.2),
        evaluation(policy_node=None, node="node-2", policy_value=None, actual_value=0.4),
    ]


def test_agreement_and_advantage_are_means_over_the_window(trial, three_evaluations):
    summary = shadow.summarize(three_evaluations, policy=trial)
    assert (summary.evaluated, summary.agreeing, summary.unplaceable) == (3, 1, 1)
    assert summary.agreement_percent == 33
    assert summary.average_score_gap == pytest.approx(45.0)
    (latency,) = summary.metrics
    assert latency.pods == 2
    assert latency.policy_mean == pytest.approx(0.15)
    assert latency.actual_mean == pytest.approx(0.3)
    assert latency.advantage_percent == pytest.approx(50.0)  # 50 % lower latency


def test_a_maximized_metric_counts_higher_values_as_the_advantage():
    assert shadow.advantage_percent(
        policy_mean=0.15, actual_mean=0.3, goal=model.Goal.MAXIMIZE
    ) == pytest.approx(-50.0)
    assert shadow.advantage_percent(policy_mean=1, actual_mean=0, goal=model.Goal.MINIMIZE) is None


def test_nothing_evaluated_yet_is_zero_agreement_without_means(trial):
    summary = shadow.summarize([], policy=trial)
    assert (summary.evaluated, summary.agreement_percent) == (0, 0)
    assert summary.metrics[0].advantage_percent is None


def schema_keys(node, value, path="status.shadow"):
    """Paths in ``value`` the CRD schema ``node`` does not declare."""
    unknown = []
    if isinstance(value, dict):
        props = node.get("properties")
        for key, child in value.items():
            if props is not None:
                if key not in props:
                    unknown.append(f"{path}.{key}")
                else:
                    unknown += schema_keys(props[key], child, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            unknown += schema_keys(node["items"], item, f"{path}[]")
    return unknown


def test_the_status_block_fits_the_crds_status_shadow_schema(trial, three_evaluations):
    crd = yaml.safe_load(
        (pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    node = schema["properties"]["status"]["properties"]["shadow"]
    block = shadow.status_block(
        summary=shadow.summarize(three_evaluations, policy=trial),
        recent=three_evaluations,
        window=100,
        dropped=2,
    )
    assert schema_keys(node, block) == []
    assert block["metrics"] == [
        {"name": "latency", "pods": 2, "policyMean": 0.15, "actualMean": 0.3,
         "advantagePercent": 50.0}
    ]  # fmt: skip
    assert (block["agreementPercent"], block["droppedPods"]) == (33, 2)
    assert len(block["recent"]) <= node["properties"]["recent"]["maxItems"]


def test_the_shadow_table_shows_each_pod_and_the_summary_in_words(trial, three_evaluations):
    block = shadow.status_block(
        summary=shadow.summarize(three_evaluations, policy=trial),
        recent=three_evaluations,
        window=100,
        dropped=0,
    )
    text = shadow.render(
        policy_key="shop/trial", mode="Shadow", block=block, goals={"latency": "Minimize"}
    )
    lines = text.splitlines()
    assert lines[2].split() == [
        "POD", "PLACED", "ON", "POLICY", "WOULD", "CHOOSE", "AGREE", "GAP",
        "LATENCY", "(POLICY/ACTUAL)",
    ]  # fmt: skip
    assert lines[3].split() == ["shop/node-2-node-1", "node-2", "node-1", "no", "90", "0.1/0.4"]
    assert lines[5].split()[:4] == ["shop/node-2-None", "node-2", "(none)", "no"]
    assert "Agreement: 1/3 pods (33 %)" in text
    assert "would have chosen nodes with 50 % lower latency" in text
