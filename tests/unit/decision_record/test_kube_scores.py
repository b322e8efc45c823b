"""The decision record keeps the kube-scheduler scores blended into each placement."""

from __future__ import annotations

import dataclasses
import json

from metricsched.core import decision_record, explain, model
from tests.unit.conftest import NOW

LEAST = model.FallbackStrategy.LEAST_ALLOCATED


def decision(*, winner_kube, runner_kube=(), metric_name="price") -> model.Decision:
    def verdict(node, score, kube):
        return model.NodeVerdict(
            node=model.NodeName(node),
            feasible=True,
            reason="",
            metrics=(model.MetricScore(metric_name, 1.0, 100.0),),
            burst_count=0,
            score=score,
            kube=tuple(model.KubeScore(plugin, value, weight) for plugin, value, weight in kube),
        )

    return model.Decision(
        pod=model.PodKey("shop/web"),
        policy=model.PolicyKey("shop/cheap"),
        outcome=model.Outcome.BIND,
        node=model.NodeName("node-b"),
        fallback_reason="",
        verdicts=(verdict("node-b", 100.0, winner_kube), verdict("node-a", 25.0, runner_kube)),
        message="",
    )


TAINT = ("TaintToleration", 100.0, 3)
FIT = ("NodeResourcesFit", 62.4, 1)


def test_each_placement_records_its_kube_scores_and_reads_back():
    made = decision(winner_kube=[TAINT, FIT], runner_kube=[("TaintToleration", 0.0, 3)])
    text = decision_record.annotation(made, fallback_strategy=LEAST, now=NOW)
    body = json.loads(text)
    assert body["kube"] == {"TaintToleration": 100, "NodeResourcesFit": 62.4}
    assert body["runnerUp"]["kube"] == {"TaintToleration": 0}
    assert decision_record.decode(text) == decision_record.record_of(
        made, fallback_strategy=LEAST, now=NOW
    )


def test_a_record_without_kube_scores_has_no_kube_key():
    body = json.loads(
        decision_record.annotation(decision(winner_kube=[]), fallback_strategy=LEAST, now=NOW)
    )
    assert "kube" not in body and "kube" not in body["runnerUp"]


def test_kube_scores_are_the_first_left_out_when_the_record_is_too_long():
    made = decision(winner_kube=[TAINT, FIT], runner_kube=[TAINT, FIT], metric_name="m" * 420)
    body = json.loads(decision_record.annotation(made, fallback_strategy=LEAST, now=NOW))
    assert "kube" not in body and "kube" not in body["runnerUp"]
    assert body["metrics"] and body["runnerUp"]["metrics"]  # still kept


def test_explain_shows_the_recorded_kube_scores():
    record = decision_record.record_of(
        decision(winner_kube=[TAINT, FIT]), fallback_strategy=LEAST, now=NOW
    )
    text = explain.render_recorded(record, bound_to="node-b")
    assert "node-b  score 100  [price 1; kube: TaintToleration 100, LeastAllocated 62]" in text
    without = dataclasses.replace(record.winner, metrics={})
    assert "[kube: TaintToleration 100, LeastAllocated 62]" in explain.render_recorded(
        dataclasses.replace(record, winner=without), bound_to="node-b"
    )
