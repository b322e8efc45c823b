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


def test_the_scale_out_grows_deployments_with_history_several_fold_at_once() -> None:
    d = scenarios.scenario("d", plan=FULL, seed=1)
    assert d == scenarios.scenario("d", plan=FULL, seed=1)
    assert d != scenarios.scenario("d", plan=FULL, seed=2)
    assert d.pods == () and d.hotspots == ()
    assert len(d.deployments) == FULL.scale_deployments
    assert all(x.replicas == FULL.scale_from for x in d.deployments)
    assert {(s.at, s.replicas) for s in d.scales} == {(FULL.scale_at_s, FULL.scale_to)}
    assert {s.deployment for s in d.scales} == {x.name for x in d.deployments}
    assert FULL.scale_to >= 4 * FULL.scale_from
    assert d.burst_end_s == d.duration_s == FULL.scale_at_s + FULL.scale_observe_s


def test_the_scale_outs_pods_use_several_times_their_request_with_a_known_mean() -> None:
    for seed in (1, 2, 3):
        d = scenarios.scenario("d", plan=FULL, seed=seed)
        assert statistics.fmean(x.cpu for x in d.deployments) == pytest.approx(0.4)
        assert all(x.cpu * 1000 >= 6 * x.request_cpu_m for x in d.deployments)
    assert scenarios.typical_usage_m("d") == 400
    assert scenarios.typical_usage_m("a") == 200


def test_the_scale_out_fits_under_the_threshold_for_a_usage_aware_scheduler() -> None:
    for seed in (1, 2, 3):
        nodes = scenarios.nodes(FULL.nodes, seed=seed)
        room = sum((0.8 - n.background) * n.cpu for n in nodes)
        d = scenarios.scenario("d", plan=FULL, seed=seed)
        assert sum(x.cpu * FULL.scale_to for x in d.deployments) < 0.85 * room


def test_a_deployment_carries_its_usage_in_the_pod_template() -> None:
    dep = scenarios.scenario("d", plan=FULL, seed=1).deployments[0]
    body = scenarios.deployment_body(dep, "metricsched")
    template = body["spec"]["template"]
    assert body["spec"]["replicas"] == dep.replicas
    assert body["spec"]["selector"]["matchLabels"] == {"app": dep.name}
    assert template["metadata"]["labels"]["app"] == dep.name
    assert template["metadata"]["annotations"][scenarios.USAGE_CPU] == f"{dep.cpu:.3f}"
    assert template["spec"]["schedulerName"] == "metricsched"
    assert template["spec"]["nodeSelector"] == {scenarios.MODELLED_LABEL: "true"}
    requests = template["spec"]["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "50m"


def test_a_nodes_exporter_instance_is_its_internal_ip() -> None:
    node = scenarios.nodes(3, seed=1)[2]
    body = scenarios.node_body(node, 2)
    ip = next(a["address"] for a in body["status"]["addresses"] if a["type"] == "InternalIP")
    assert scenarios.instance(2) == f"{ip}:9100"


def test_the_smoke_plan_is_the_scale_out_on_few_nodes() -> None:
    smoke = scenarios.PLANS["smoke"]
    assert smoke.scenarios == ("d",)
    assert smoke.nodes <= 6
    assert smoke.scale_at_s + smoke.scale_observe_s <= 180


def test_the_scheduler_places_its_own_events_and_every_scaled_replica() -> None:
    d = scenarios.scenario("d", plan=FULL, seed=1)
    assert scenarios.own_pods(d) == FULL.scale_deployments * FULL.scale_to
    b = scenarios.scenario("b", plan=FULL, seed=1)
    assert scenarios.own_pods(b) == sum(1 for e in b.pods if e.node is None)


# --- scenario e: only our own pods heat up ------------------------------------------------


def test_in_scenario_e_only_our_own_pods_exist_and_the_surge_rises_after_all_arrived() -> None:
    sc = scenarios.scenario("e", plan=FULL, seed=1)
    assert sc.hotspots == () and all(p.node is None for p in sc.pods)
    surge = [p for p in sc.pods if p.workload == scenarios.SURGE.name]
    assert len(surge) == FULL.rise_surge and len(sc.pods) == FULL.rise_surge + FULL.rise_mix
    assert sc.pods[: FULL.rise_surge] == tuple(surge)  # first, onto the coolest nodes
    assert all(p.rise_at == FULL.rise_at_s and p.rise == FULL.rise_factor for p in surge)
    assert all(p.rise_at is None and p.rise == 1.0 for p in sc.pods if p not in surge)
    assert all(p.life is None and p.at + p.ramp < FULL.rise_at_s for p in sc.pods)
    assert sc.heat_at_s == FULL.rise_at_s
    assert sc.duration_s == FULL.rise_at_s + FULL.rise_observe_s


def test_scenario_e_leaves_room_under_0_7_cluster_wide_after_the_rise() -> None:
    # Heat a scheduler can undo: the surge adds several cores, and the cluster as a whole
    # stays under 0.7 (rebalancing has somewhere to put them), for every seed.
    for seed in (1, 2, 3):
        nodes = scenarios.nodes(FULL.nodes, seed=seed)
        sc = scenarios.scenario("e", plan=FULL, seed=seed)
        before = sum(p.cpu for p in sc.pods)
        after = sum(p.cpu * p.rise for p in sc.pods)
        total = sum(n.cpu for n in nodes)
        background = sum(n.background * n.cpu for n in nodes)
        assert after - before > 0.1 * total
        assert (background + after) / total < 0.7


def test_a_rising_pod_carries_a_step_at_the_scenarios_clock_time_and_others_none() -> None:
    sc = scenarios.scenario("e", plan=FULL, seed=1)
    surge, mix = sc.pods[0], sc.pods[-1]
    body = scenarios.pod_body(surge, "metricsched", t0=1_000_000.0)
    annotations = body["metadata"]["annotations"]
    assert annotations[scenarios.CPU_PATTERN] == f"step({1_000_000.0 + FULL.rise_at_s:.1f}, 5)"
    assert scenarios.CPU_PATTERN not in scenarios.pod_body(mix, "x")["metadata"]["annotations"]


def test_the_heat_appears_at_the_hot_spot_in_c_and_never_in_b() -> None:
    c = scenarios.scenario("c", plan=FULL, seed=1)
    assert c.heat_at_s == min(h.at for h in c.hotspots)
    assert scenarios.scenario("b", plan=FULL, seed=1).heat_at_s is None


def test_a_plan_plays_a_to_d_unless_told_and_scenario_e_only_when_asked() -> None:
    assert FULL.scenarios == ("a", "b", "c", "d") and "e" in scenarios.KEYS
