"""kube-scheduler's scores in a decision: they decide between equal metrics, and the
Scheduled event and the explain table show them beside the metric terms."""

from __future__ import annotations

from typing import Any

from metricsched.core import explain, model, policy
from metricsched.core.plugins import kube_scores
from tests.unit.conftest import run_cycle
from tests.unit.kube_scores.conftest import make_cluster, make_node, make_pod

PRICE = "example.com/price"
X = "\N{MULTIPLICATION SIGN}"


def price_policy(kube: dict[str, int] | None = None) -> model.Policy:
    spec: dict[str, Any] = {
        "metrics": [{"name": "price", "nodeAnnotation": PRICE}],
        "burstPenalty": 0,
    }
    if kube is not None:
        spec["kubeScores"] = kube
    return policy.policy_from_body(
        {"metadata": {"name": "cheap", "namespace": "shop"}, "spec": spec}
    )


def equal_price_nodes() -> list[model.NodeInfo]:
    soft_taint = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}
    return [
        make_node("node-a", annotations={PRICE: "1"}, taints=[soft_taint]),
        make_node("node-b", annotations={PRICE: "1"}),
    ]


def test_with_equal_metrics_a_prefer_no_schedule_taint_decides_and_the_event_says_so():
    scene = make_cluster(equal_price_nodes())
    decision = run_cycle(
        pod=make_pod(cpu="100m", memory="64Mi"), snapshot=scene, policies=[price_policy()]
    )

    assert decision.node == "node-b"
    # (1 x 100 + 3 x 100) / 4 = 100 against (1 x 100 + 3 x 0) / 4 = 25; LeastAllocated and
    # BalancedAllocation are equal on both empty nodes and left out.
    assert decision.message == (
        "Successfully assigned shop/incoming to node-b (policy shop/cheap: score 100 "
        f"[price 1 → 100; kube: TaintToleration 100{X}3]; runner-up node-a 25)"
    )


def test_explain_shows_a_column_per_blended_kube_score():
    scene = make_cluster(equal_price_nodes())
    decision = run_cycle(
        pod=make_pod(cpu="100m", memory="64Mi"), snapshot=scene, policies=[price_policy()]
    )

    table = explain.render(decision, policy_metrics=["price"])
    header, first, second = table.splitlines()[-3:]
    assert header.split() == [
        "NODE",
        "FEASIBLE",
        "REASON",
        "PRICE",
        "TAINTTOLERATION",
        "BURST",
        "SCORE",
    ]
    assert first.split() == ["*", "node-b", "yes", "1→100", f"100{X}3", "0", "100"]
    assert second.split() == ["node-a", "yes", "1→100", f"0{X}3", "0", "25"]


def test_a_policy_with_all_kube_weights_zero_ignores_them():
    scene = make_cluster(equal_price_nodes())
    zero = price_policy(dict.fromkeys(kube_scores.PLUGINS, 0))
    nodes = {
        run_cycle(
            pod=make_pod(cpu="100m", memory="64Mi"), snapshot=scene, policies=[zero], seed=seed
        ).node
        for seed in range(20)
    }
    assert nodes == {"node-a", "node-b"}  # a tie, drawn at random as before


def test_least_allocated_prefers_the_emptier_node_when_metrics_are_equal():
    nodes = [make_node(name, annotations={PRICE: "1"}) for name in ("node-a", "node-b")]
    busy = make_pod("busy", node_name="node-a", cpu="2", memory="2Gi")
    scene = make_cluster(nodes, [busy])
    decision = run_cycle(
        pod=make_pod(cpu="1", memory="1Gi"), snapshot=scene, policies=[price_policy()]
    )

    assert decision.node == "node-b"
    winner = next(v for v in decision.verdicts if v.node == "node-b")
    assert [term.plugin for term in winner.kube] == [
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
    ]
