"""The seeded scenarios of the placement-quality benchmark (bench/quality/scenarios.py)."""

from __future__ import annotations

import statistics

import pytest

from bench.quality import scenarios

FULL = scenarios.PLANS["full"]


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another() -> None:
    for key in scenarios.KEYS:
        assert scenarios.scenario(key, plan=FULL, seed=1) == scenarios.scenario(
            key, plan=FULL, seed=1
        )
        assert scenarios.scenario(key, plan=FULL, seed=1) != scenarios.scenario(
            key, plan=FULL, seed=2
        )


def test_nodes_mix_sizes_and_skew_background_low() -> None:
    nodes = scenarios.nodes(15, seed=1)
    assert {n.cpu for n in nodes} == {4, 8, 16}
    backgrounds = sorted(n.background for n in nodes)
    assert 0.05 <= backgrounds[0] < 0.06
    assert 0.6 < backgrounds[-1] <= 0.7
    assert statistics.median(backgrounds) < 0.3


def test_the_burst_fits_under_the_threshold_for_a_usage_aware_scheduler() -> None:
    nodes = scenarios.nodes(FULL.nodes, seed=1)
    room = sum((0.8 - n.background) * n.cpu for n in nodes)
    burst = scenarios.scenario("a", plan=FULL, seed=1)
    assert len(burst.pods) == FULL.burst_pods
    assert sum(p.cpu for p in burst.pods) < 0.85 * room


def test_usage_differs_from_requests_both_ways() -> None:
    burst = scenarios.scenario("a", plan=FULL, seed=1)
    by = {w.name: w for w in scenarios.WORKLOADS}
    ratios = {p.workload: p.cpu * 1000 / by[p.workload].request_cpu_m for p in burst.pods}
    assert ratios["api"] > 3
    assert ratios["batch"] < 0.3


def test_steady_arrivals_are_poisson_at_the_plans_rate_with_lifetimes() -> None:
    steady = scenarios.scenario("b", plan=FULL, seed=1)
    own = [p for p in steady.pods if p.node is None]
    assert len(own) == pytest.approx(FULL.steady_rate * FULL.steady_s, rel=0.2)
    assert all(FULL.life_s[0] <= (p.life or 0) <= FULL.life_s[1] for p in own)
    assert all(0 <= p.at < FULL.steady_s for p in steady.pods)
    assert steady.duration_s == FULL.steady_s + FULL.tail_s


def test_steady_scenarios_include_pods_another_scheduler_binds() -> None:
    steady = scenarios.scenario("b", plan=FULL, seed=1)
    other = [p for p in steady.pods if p.node is not None]
    assert len(other) >= FULL.other_initial
    body = scenarios.pod_body(other[0], "metricsched")
    assert body["spec"]["schedulerName"] == scenarios.OTHER_SCHEDULER
    assert body["spec"]["nodeName"] == other[0].node


def test_the_hot_spot_heats_the_coolest_nodes_a_third_of_the_way_in() -> None:
    hot = scenarios.scenario("c", plan=FULL, seed=1)
    nodes = sorted(scenarios.nodes(FULL.nodes, seed=1), key=lambda n: n.background)
    assert {h.node for h in hot.hotspots} == {n.name for n in nodes[: FULL.hotspot_nodes]}
    assert {h.at for h in hot.hotspots} == {round(FULL.steady_s / 3, 1)}
    assert scenarios.scenario("b", plan=FULL, seed=1).hotspots == ()


def test_a_pod_states_its_usage_for_the_load_model_and_stays_on_modelled_nodes() -> None:
    event = scenarios.scenario("a", plan=FULL, seed=1).pods[0]
    body = scenarios.pod_body(event, "bench-kube")
    assert body["spec"]["schedulerName"] == "bench-kube"
    assert body["spec"]["nodeSelector"] == {scenarios.MODELLED_LABEL: "true"}
    assert body["metadata"]["annotations"][scenarios.USAGE_CPU] == f"{event.cpu:.3f}"
    assert "nodeName" not in body["spec"]


def test_a_backlog_pod_uses_nothing() -> None:
    body = scenarios.backlog_pod_body(3, "metricsched")
    assert body["metadata"]["annotations"][scenarios.USAGE_CPU] == "0.000"
    assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "10m"


def test_a_modelled_node_carries_its_label_and_background() -> None:
    node = scenarios.nodes(3, seed=1)[0]
    body = scenarios.node_body(node, 0)
    assert body["metadata"]["labels"][scenarios.MODELLED_LABEL] == "true"
    assert body["metadata"]["annotations"][scenarios.BACKGROUND_CPU] == f"{node.background:.3f}"
    assert body["status"]["allocatable"]["cpu"] == str(node.cpu)


def test_unknown_scenario_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        scenarios.scenario("z", plan=FULL, seed=1)


def test_the_hot_spot_scenario_is_the_steady_one_plus_the_hot_spot() -> None:
    steady = scenarios.scenario("b", plan=FULL, seed=1)
    hot = scenarios.scenario("c", plan=FULL, seed=1)
    assert [(p.at, p.cpu, p.node) for p in steady.pods] == [(p.at, p.cpu, p.node) for p in hot.pods]
