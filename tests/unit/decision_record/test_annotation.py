"""The decision kept on the pod: compact, bounded, and read back as it was written."""

from __future__ import annotations

import json

import pytest

from metricsched.core import decision_record, model
from tests.unit.conftest import NOW, build_metric_spec

LEAST = model.FallbackStrategy.LEAST_ALLOCATED


@pytest.fixture
def web_latency(make_policy):
    return make_policy(
        "web-latency", metrics=[build_metric_spec("latency", weight=3), build_metric_spec("cpu")]
    )


@pytest.fixture
def four_nodes(make_node, make_cluster):
    return make_cluster(*(make_node(f"node-{i}") for i in range(1, 5)))


@pytest.fixture
def scored(make_pod, four_nodes, web_latency, make_view, schedule):
    values = {
        "latency": {"node-1": 0.3, "node-2": 0.12, "node-3": 0.2, "node-4": 0.5},
        "cpu": {"node-1": 0.2, "node-2": 0.35, "node-3": 0.3, "node-4": 0.9},
    }
    return schedule(
        pod=make_pod(),
        snapshot=four_nodes,
        policies=[web_latency],
        metrics=make_view(web_latency, values),
    )


def test_the_record_names_policy_winner_runner_up_values_and_time(scored):
    body = json.loads(decision_record.annotation(scored, fallback_strategy=LEAST, now=NOW))
    assert body["v"] == 1
    assert body["policy"] == "shop/web-latency"
    assert (body["node"], body["metrics"]) == ("node-2", {"latency": 0.12, "cpu": 0.35})
    assert body["runnerUp"]["node"] == "node-3"
    assert body["runnerUp"]["metrics"] == {"latency": 0.2, "cpu": 0.3}
    assert body["score"] > body["runnerUp"]["score"]
    assert body["fallback"] is None
    assert body["time"] == "2023-11-14T22:13:20Z"


def test_the_record_reads_back_as_written(scored):
    text = decision_record.annotation(scored, fallback_strategy=LEAST, now=NOW)
    record = decision_record.decode(text)
    assert record == decision_record.record_of(scored, fallback_strategy=LEAST, now=NOW)


def test_a_fallback_decision_records_the_strategy_and_why(
    make_pod, four_nodes, web_latency, make_view, schedule
):
    unreachable = {"latency": (model.QueryErrorKind.UNREACHABLE, "connection refused")}
    decision = schedule(
        pod=make_pod(),
        snapshot=four_nodes,
        policies=[web_latency],
        metrics=make_view(web_latency, {}, errors=unreachable),
    )
    body = json.loads(decision_record.annotation(decision, fallback_strategy=LEAST, now=NOW))
    assert body["fallback"]["strategy"] == "LeastAllocated"
    assert body["fallback"]["reason"].startswith("Prometheus unreachable")
    assert body["metrics"] == {}


def test_the_default_policy_is_recorded_as_a_null_policy_with_its_strategy(
    make_pod, four_nodes, schedule
):
    decision = schedule(pod=make_pod(), snapshot=four_nodes)
    body = json.loads(decision_record.annotation(decision, fallback_strategy=LEAST, now=NOW))
    assert body["policy"] is None
    assert body["fallback"] == {
        "strategy": "LeastAllocated",
        "reason": decision_record.DEFAULT_POLICY_REASON,
    }


def test_a_decision_not_to_bind_has_no_record(make_pod, make_cluster, schedule):
    decision = schedule(pod=make_pod(), snapshot=make_cluster())
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert decision_record.annotation(decision, fallback_strategy=LEAST, now=NOW) == ""


def test_ten_long_metric_names_on_long_node_names_stay_within_one_kib():
    names = [f"{chr(97 + i)}{'x' * 62}" for i in range(10)]
    node = "n" * 253

    def verdict(suffix: str, score: float) -> model.NodeVerdict:
        return model.NodeVerdict(
            node=model.NodeName(node[:-1] + suffix),
            feasible=True,
            reason="",
            metrics=tuple(model.MetricScore(n, 123456.789, 50.0) for n in names),
            burst_count=0,
            score=score,
        )

    decision = model.Decision(
        pod=model.PodKey("shop/web"),
        policy=model.PolicyKey(f"{'s' * 63}/{'p' * 63}"),
        outcome=model.Outcome.BIND,
        node=model.NodeName(node[:-1] + "a"),
        fallback_reason="x" * 900,
        verdicts=(verdict("a", 90.0), verdict("b", 80.0)),
        message="",
    )
    text = decision_record.annotation(decision, fallback_strategy=LEAST, now=NOW)
    assert len(text.encode()) <= decision_record.MAX_BYTES
    record = decision_record.decode(text)
    assert (record.winner.node, record.runner_up.node) == (decision.node, node[:-1] + "b")


@pytest.mark.parametrize("text", ["", "{", "[]", '{"v":2}', '{"v":1,"node":"n"}'])
def test_text_that_is_not_a_record_is_rejected(text):
    with pytest.raises(ValueError):
        decision_record.decode(text)
