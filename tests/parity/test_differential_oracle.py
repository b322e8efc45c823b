"""metricsched's filters and FailedScheduling messages equal kube-scheduler's.

A bounded run of the differential oracle (tests/parity/oracle.py): random scenarios,
each pending pod asked of kube-scheduler v1.35.4's own framework (sched-oracle) and of
metricsched's core. ``make parity N=5000`` runs a longer one. sched-oracle comes from
``make tools``, which ``make test`` runs first, so a missing binary fails the test.
"""

from __future__ import annotations

import random

import pytest

from tests.parity import generator, oracle

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


def test_random_pods_get_the_same_feasible_nodes_reasons_and_message(harness):
    report = oracle.run(pods=BOUNDED_PODS, seed=SEED, harness=harness)
    assert report.pods >= 200
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
    ours = oracle.metricsched_answers(scenario)
    theirs = harness.ask(scenario)
    assert oracle.compare(scenario, ours, theirs) == []
    wrong = [
        oracle.Answer(feasible=a.feasible ^ {"node-0"}, rejected=a.rejected, message=a.message)
        for a in ours
    ]
    assert {d.kind for d in oracle.compare(scenario, wrong, theirs)} == {"feasible"}


def test_shrinking_keeps_a_disagreement_and_drops_what_does_not_matter():
    scenario = {"incoming": [{"a": 1, "b": [1, 2, 3]}], "nodes": [{"keep": True}, {"x": 1}]}

    def still_fails(candidate):
        return any(node.get("keep") for node in candidate["nodes"])

    assert oracle.shrink(scenario, still_fails=still_fails) == {
        "incoming": [{}],
        "nodes": [{"keep": True}],
    }
