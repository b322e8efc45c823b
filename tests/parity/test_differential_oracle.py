"""metricsched's filters, FailedScheduling messages and score plugins equal kube-scheduler's.

A bounded run of the differential oracle (tests/parity/oracle.py): random scenarios
(labelled namespaces, claims and volumes, priorities, required and preferred affinities:
see tests/parity/generator.py), each pending pod asked of kube-scheduler v1.35.4's own
framework (sched-oracle) and of metricsched's core; every feature the generator makes is
asked about at least once, and every score plugin metricsched blends (LeastAllocated,
BalancedAllocation, TaintToleration, NodeAffinity, InterPodAffinity, PodTopologySpread) is
compared, normalised, on every feasible node, with scores that differ from node to node
for some pod. ``make parity N=5000`` runs a longer one. sched-oracle comes from
``make tools``, which ``make test`` runs first, so a missing binary fails the test.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import yaml

from metricsched.core.plugins import kube_scores, taint_toleration
from tests.parity import coverage, generator, oracle

pytestmark = pytest.mark.parity

BOUNDED_PODS = 240
SEED = 20261123


@pytest.fixture(scope="module")
def harness():
    binary = oracle.harness_binary()
    if not binary.exists():
        pytest.fail(f"{binary} is not built: run `make tools`")
    with oracle.Harness(binary) as running:
        yield running


def test_random_pods_get_the_same_feasible_nodes_reasons_message_and_scores(harness):
    report = oracle.run(pods=BOUNDED_PODS, seed=SEED, harness=harness)
    assert report.pods >= 200
    # Every feature the generator makes is asked about at least once.
    assert {feature for feature in coverage.FEATURES if not report.coverage[feature]} == set(), (
        report.coverage_summary()
    )
    # Every blended score plugin is compared where its scores tell nodes apart.
    assert {p for p in kube_scores.PLUGINS if not report.scores_varied[p]} == set(), (
        report.scores_summary()
    )
    if report.disagreements:
        kind, scenario = sorted(report.first_of_kind.items())[0]
        listing = "\n".join(
            f"scenario {SEED}/{index} {d.kind} {d.pod}: {d.detail}"
            for index, d in report.disagreements[:20]
        )
        repro = oracle.shrunk_reproduction(scenario, kind, harness)
        pytest.fail(f"{report.summary()}\n{listing}\n--- # minimal reproduction\n{repro}")


def test_the_oracle_sees_a_disagreement_when_metricsched_is_wrong(harness):
    # The comparator is not vacuous: a doctored answer from our side is caught.
    scenario = generator.scenario(random.Random(7), pods=3)
    ours = oracle.metricsched_answers(scenario, rules=harness.rules)
    theirs = harness.ask(scenario)
    assert oracle.compare(scenario, ours, theirs) == []
    wrong = [
        oracle.Answer(feasible=a.feasible ^ {"node-0"}, rejected=a.rejected, message=a.message)
        for a in ours
    ]
    assert {d.kind for d in oracle.compare(scenario, wrong, theirs)} == {"feasible"}


def test_the_oracle_sees_a_score_that_differs_from_kube_schedulers(harness):
    scenario = generator.scenario(random.Random(7), pods=3)
    ours = oracle.metricsched_answers(scenario, rules=harness.rules)
    theirs = harness.ask(scenario)
    scored = next(answer for answer in ours if answer.scores)
    node = min(scored.scores)
    off = {
        **scored.scores,
        node: {
            **scored.scores[node],
            "NodeResourcesFit": scored.scores[node]["NodeResourcesFit"] + 1,
        },
    }
    wrong = [dataclasses.replace(a, scores=off) if a is scored else a for a in ours]
    found = oracle.compare(scenario, wrong, theirs)
    assert [d.kind for d in found] == ["scores"]
    assert f"{node} NodeResourcesFit" in found[0].detail
    # A plugin scored on one side only is a disagreement as well.
    skipped = {n: {p: s for p, s in by.items() if p != "NodeResourcesFit"} for n, by in off.items()}
    missing = [dataclasses.replace(a, scores=skipped) if a is scored else a for a in ours]
    assert "metricsched -" in oracle.compare(scenario, missing, theirs)[0].detail


def test_shrinking_keeps_a_disagreement_and_drops_what_does_not_matter():
    scenario = {"incoming": [{"a": 1, "b": [1, 2, 3]}], "nodes": [{"keep": True}, {"x": 1}]}

    def still_fails(candidate):
        return any(node.get("keep") for node in candidate["nodes"])

    assert oracle.shrink(scenario, still_fails=still_fails) == {
        "incoming": [{}],
        "nodes": [{"keep": True}],
    }


def test_a_disagreement_is_shrunk_to_a_minimal_yaml_reproduction(harness, monkeypatch):
    # Plant a wrong reason string in metricsched and let the oracle find and shrink it.
    monkeypatch.setattr(
        taint_toleration.filtering, "REASON_UNTOLERATED_TAINT", "node(s) had a taint"
    )
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    scenario = {
        "namespaces": [{"metadata": {"name": "default", "labels": {"team": "a"}}}],
        "nodes": [_node("n1"), _node("n2", taints=[taint]), _node("n3")],
        "pods": [_pod("old", node="n1"), _pod("older", node="n3")],
        "incoming": [_pod("new")],
    }
    assert [d.kind for d in oracle.check(scenario, harness)] == ["reasons"]

    found = yaml.safe_load(oracle.shrunk_reproduction(scenario, "reasons", harness))

    # Left with the tainted node alone, the FailedScheduling message differs as well.
    assert [d["kind"] for d in found["disagreements"]] == ["reasons", "message"]
    assert [n["metadata"]["name"] for n in found["scenario"]["nodes"]] == ["n2"]
    assert found["scenario"]["pods"] == []
    assert found["kube-scheduler"][0]["rejected"] == {"n2": ["node(s) had untolerated taint(s)"]}
    assert found["metricsched"][0]["rejected"] == {"n2": ["node(s) had a taint"]}


def _node(name, *, taints=()):
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": list(taints)},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def _pod(name, *, node=""):
    spec = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}
