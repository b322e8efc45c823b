"""A pod whose terms would make one attempt stall the shared event loop is refused with a
FailedScheduling message naming the cap, before any node is evaluated (issue 24,
finding 2)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from metricsched.core import framework, model, pod_budget, profile, selectors
from metricsched.core.plugins import inter_pod_affinity


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


# --- heavy pods already bound (by another scheduler): not capped, so not walked -------


def unique_term(i: int) -> dict[str, Any]:
    return {
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": ["shop"],
        "labelSelector": {"matchLabels": {"app": f"x{i}"}},
    }


class TermTests:
    """Counts ``PodAffinityTerm.matches`` calls (the work per placed term)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = selectors.PodAffinityTerm.matches

        def counting(term: selectors.PodAffinityTerm, *args: Any, **kwargs: Any) -> bool:
            self.calls += 1
            return real(term, *args, **kwargs)

        monkeypatch.setattr(selectors.PodAffinityTerm, "matches", counting)


def test_a_new_pod_class_does_not_test_every_term_of_heavy_bound_pods(
    make_pod, make_node, make_cluster, schedule, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 28 (residual of issue 24's finding 2): a pod the cap would refuse may still be
    # bound by another scheduler; 20 of them with 1,000 anti-affinity terms each were
    # tested term by term for every new pod class (20,000 tests a class).
    heavy = [
        dataclasses.replace(
            make_pod(f"heavy-{i}", labels={}),
            namespace="other",
            node_name=f"node-{i}",
            phase="Running",
            pod_anti_affinity=tuple(unique_term(1000 * i + k) for k in range(1000)),
        )
        for i in range(20)
    ]
    nodes = [
        dataclasses.replace(make_node(f"node-{i}"), pods=(heavy[i],) if i < 20 else ())
        for i in range(25)
    ]
    snapshot = make_cluster(*nodes)
    tests = TermTests(monkeypatch)
    placed = [
        schedule(pod=make_pod(f"p{k}", labels={"app": f"unique-{k}"}), snapshot=snapshot)
        for k in range(5)
    ]
    assert all(d.outcome is model.Outcome.BIND for d in placed)
    assert tests.calls < 100  # was 5 x 20,000
    # A pod one of those terms does select is still kept off that node's domain.
    target = make_pod("target", labels={"app": "x3007"})
    decision = schedule(pod=target, snapshot=snapshot, detail=True)
    assert decision.outcome is model.Outcome.BIND
    assert decision.node != "node-3"
    refused = {v.node: v.reason for v in decision.verdicts if not v.feasible}
    assert refused == {"node-3": "node(s) didn't satisfy existing pods anti-affinity rules"}


@pytest.mark.parametrize("seed", range(20))
def test_the_term_index_offers_every_term_that_matches(seed: int, make_pod, make_node) -> None:
    # The index only narrows: every placed term that matches a pod is among those offered.
    rng = random.Random(seed)
    keys, values = ("app", "tier", "team"), ("a", "b", "c")

    def raw_term() -> dict[str, Any]:
        key, value = rng.choice(keys), rng.choice(values)
        selector: dict[str, Any] = rng.choice(
            [
                {"matchLabels": {key: value}},
                {"matchLabels": {key: value, rng.choice(keys): rng.choice(values)}},
                {"matchExpressions": [{"key": key, "operator": "In", "values": [value, "c"]}]},
                {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]},
                {"matchExpressions": [{"key": key, "operator": "Exists"}]},
                {},
            ]
        )
        return {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}

    placed = [
        dataclasses.replace(
            make_pod(f"b{i}", labels={}),
            node_name="node-1",
            phase="Running",
            pod_anti_affinity=tuple(raw_term() for _ in range(10)),
        )
        for i in range(3)
    ]
    state = dataclasses.replace(make_node("node-1"), pods=tuple(placed))
    memo = framework.Memo()
    every = inter_pod_affinity.filtering.node_anti_affinity(memo, state)
    assert len(every) == 30
    for _ in range(30):
        pod = make_pod("p", labels={k: rng.choice(values) for k in keys if rng.random() < 0.6})
        offered = inter_pod_affinity.filtering.node_anti_affinity_for(memo, state, pod)
        matching = [t for t in every if t.matches(pod, None, unknown=True)]
        assert all(any(t is o for o in offered) for t in matching)
