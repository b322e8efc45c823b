"""A pod whose terms would make one attempt stall the shared event loop is refused with a
FailedScheduling message naming the cap, before any node is evaluated (issue 24,
finding 2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from metricsched.core import model, pod_budget, profile


def anti_affinity_term(values: int) -> dict[str, Any]:
    return {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {
            "matchExpressions": [
                {"key": "app", "operator": "In", "values": [f"v{i}" for i in range(values)]}
            ]
        },
    }


def toleration(i: int) -> model.Toleration:
    return model.Toleration(key=f"k{i}", operator="Equal", value="v", effect="NoSchedule")


def spread(i: int) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": f"zone-{i}", "whenUnsatisfiable": "DoNotSchedule"}


HEAVY = {
    "1,000 anti-affinity terms": (
        {"pod_anti_affinity": tuple(anti_affinity_term(100) for _ in range(1_000))},
        "1000 required pod anti-affinity terms (metricsched's limit is 32)",
    ),
    "10,000 tolerations": (
        {"tolerations": tuple(toleration(i) for i in range(10_000))},
        "10000 tolerations (metricsched's limit is 256)",
    ),
    "500 spread constraints": (
        {"topology_spread": tuple(spread(i) for i in range(500))},
        "500 topology spread constraints (metricsched's limit is 16)",
    ),
    "few terms with huge selectors": (
        {"pod_anti_affinity": tuple(anti_affinity_term(400) for _ in range(3))},
        "1203 label selector values in its pod affinity terms (metricsched's limit is 1024)",
    ),
}


class FeasibilityCounter:
    def __init__(self) -> None:
        self.calls = 0
        self.real = profile.find_feasible

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> FeasibilityCounter:
    counter = FeasibilityCounter()
    monkeypatch.setattr(profile, "find_feasible", counter)
    return counter


@pytest.fixture
def cluster(make_node, make_cluster) -> model.ClusterSnapshot:  # type: ignore[no-untyped-def]
    return make_cluster(*(make_node(f"node-{i}") for i in range(20)))


@pytest.mark.parametrize("case", list(HEAVY))
def test_a_pod_past_a_cap_is_unschedulable_without_evaluating_any_node(
    case: str, make_pod, cluster, schedule, evaluations: FeasibilityCounter
) -> None:
    fields, named = HEAVY[case]
    pod = dataclasses.replace(make_pod(), **fields)
    decision = schedule(pod=pod, snapshot=cluster)
    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert decision.message == (
        f"pod is too expensive to evaluate: {named}; simplify the pod, or let another"
        " scheduler place it (spec.schedulerName)"
    )
    assert evaluations.calls == 0


def test_a_pod_at_every_cap_is_evaluated_as_usual(
    make_pod, cluster, schedule, evaluations: FeasibilityCounter
) -> None:
    pod = dataclasses.replace(
        make_pod(),
        tolerations=tuple(toleration(i) for i in range(pod_budget.MAX_TOLERATIONS)),
        pod_anti_affinity=tuple(anti_affinity_term(2) for _ in range(8)),
        topology_spread=(),
    )
    assert pod_budget.refusal(pod) is None
    decision = schedule(pod=pod, snapshot=cluster)
    assert decision.outcome is model.Outcome.BIND
    assert evaluations.calls == 1


def test_an_ordinary_pod_is_far_within_every_cap(make_pod) -> None:
    pod = dataclasses.replace(
        make_pod(),
        tolerations=tuple(toleration(i) for i in range(3)),
        pod_anti_affinity=(anti_affinity_term(1),),
        topology_spread=(spread(0), spread(1)),
    )
    assert pod_budget.refusal(pod) is None
