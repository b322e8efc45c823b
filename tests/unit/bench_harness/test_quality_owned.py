"""The rebalance pair's workloads (bench/quality/owned.py): ReplicaSets and budgets, and
the ledger of evictions, moves and budget violations read from pod watch events; the
hot-spot figures (what moving the scheduler's own pods cannot change)."""

from __future__ import annotations

from typing import Any

from bench.quality import metrics, owned, scenarios


def pod(
    name: str,
    workload: str,
    *,
    node: str = "",
    running: bool = False,
    evicted: bool = False,
    app: str = "web",
) -> dict[str, Any]:
    conditions = []
    if evicted:
        conditions.append(
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        )
    if running:
        conditions.append({"type": "Ready", "status": "True"})
    return {
        "metadata": {"name": name, "labels": {"app": app, owned.WORKLOAD_LABEL: workload}},
        "spec": {"nodeName": node},
        "status": {"phase": "Running" if running else "Pending", "conditions": conditions},
    }


def test_a_workload_is_one_replica_of_its_events_pod_under_a_replicaset() -> None:
    event = scenarios.PodEvent(3.0, "c-0007-api", "api", 0.3, 12.0, 90.0)
    body = owned.replicaset_body(event, "metricsched")
    assert body["kind"] == "ReplicaSet" and body["spec"]["replicas"] == 1
    template = body["spec"]["template"]
    selector = body["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    assert template["metadata"]["annotations"][scenarios.USAGE_CPU] == "0.300"
    assert template["spec"]["schedulerName"] == "metricsched"
    assert owned.workload_of({"metadata": {"name": "c-0007-api-x2k4", **template["metadata"]}})
    assert owned.workload_of(template) == "c-0007-api"


def test_each_workload_kind_has_a_budget_selecting_only_its_own_pods() -> None:
    budgets = owned.budget_bodies()
    kinds = (*scenarios.WORKLOADS, scenarios.SURGE)
    assert {b["metadata"]["name"] for b in budgets} == {w.name for w in kinds}
    for b in budgets:
        assert b["spec"]["maxUnavailable"] == owned.MAX_UNAVAILABLE
        assert b["spec"]["selector"]["matchLabels"]["app"] == b["metadata"]["name"]


def test_an_evicted_pod_replaced_on_another_node_is_one_move() -> None:
    ledger = owned.Ledger()
    ledger.see(1.0, "MODIFIED", pod("w1-a", "w1", node="n1", running=True))
    ledger.see(5.0, "MODIFIED", pod("w1-a", "w1", node="n1", running=True, evicted=True))
    ledger.see(5.1, "DELETED", pod("w1-a", "w1", node="n1", running=True, evicted=True))
    ledger.see(5.2, "ADDED", pod("w1-b", "w1"))
    ledger.see(5.5, "MODIFIED", pod("w1-b", "w1", node="n2"))
    ledger.see(6.0, "MODIFIED", pod("w1-b", "w1", node="n2", running=True))
    got = ledger.figures()
    assert got["evictions"] == 1 and got["pods_moved"] == 1
    assert got["evictions_per_pod_moved"] == 1.0
    assert got["budget_violations"] == 0 and got["still_down_at_end"] == 0


def test_a_workload_evicted_twice_counts_two_evictions_for_one_pod_moved() -> None:
    ledger = owned.Ledger()
    for first, second, src, dst, t in (("a", "b", "n1", "n2", 5.0), ("b", "c", "n2", "n1", 9.0)):
        ledger.see(t, "DELETED", pod(first, "w1", node=src, running=True, evicted=True))
        ledger.see(t + 1, "MODIFIED", pod(second, "w1", node=dst, running=True))
    got = ledger.figures()
    assert got["evictions"] == 2 and got["pods_moved"] == 1
    assert got["evictions_per_pod_moved"] == 2.0 and got["workloads_evicted_twice"] == 1


def test_a_workload_evicted_again_within_its_limit_is_over_the_limit_and_later_is_not() -> None:
    times = {"again-soon": [10.0, 200.0], "again-later": [10.0, 320.0], "once": [50.0]}
    assert owned.over_limit(times, interval_s=300.0, most=1) == ["again-soon"]
    assert owned.over_limit(times, interval_s=300.0, most=2) == []
    assert owned.over_limit({"w": [0.0, 100.0, 250.0]}, interval_s=300.0, most=2) == ["w"]
    assert owned.over_limit({"w": [0.0, 100.0, 350.0]}, interval_s=300.0, most=2) == []


def test_the_ledger_reports_workloads_moved_again_within_the_policys_limit() -> None:
    ledger = owned.Ledger()
    for first, second, src, dst, t in (("a", "b", "n1", "n2", 5.0), ("b", "c", "n2", "n1", 90.0)):
        ledger.see(t, "DELETED", pod(first, "w1", node=src, running=True, evicted=True))
        ledger.see(t + 1, "MODIFIED", pod(second, "w1", node=dst, running=True))
    assert ledger.figures(workload_interval_s=60.0)["workloads_over_limit"] == 0
    got = ledger.figures(workload_interval_s=300.0, max_per_workload=1)
    assert got["workloads_over_limit"] == 1 and got["workload_limit"] == [300.0, 1]


def test_more_of_a_budgets_workloads_down_by_evictions_than_it_allows_is_a_violation() -> None:
    ledger = owned.Ledger()
    for i in range(owned.MAX_UNAVAILABLE + 1):
        ledger.see(float(i), "DELETED", pod(f"w{i}-a", f"w{i}", node="n1", evicted=True))
    ledger.see(9.0, "DELETED", pod("x-a", "x", node="n1", evicted=True, app="api"))
    got = ledger.figures()
    assert got["budget_violations"] == 1  # the last web one; the api budget had room
    assert got["most_down_at_once"] == owned.MAX_UNAVAILABLE + 1


def test_a_pod_deleted_by_the_end_of_its_workload_is_no_eviction() -> None:
    ledger = owned.Ledger()
    ledger.see(1.0, "MODIFIED", pod("w1-a", "w1", node="n1", running=True))
    ledger.end("w1")
    ledger.see(1.2, "DELETED", pod("w1-a", "w1", node="n1", running=True))
    assert ledger.figures()["evictions"] == 0


def test_the_floor_is_the_hot_spot_and_the_other_schedulers_pods() -> None:
    node = scenarios.NodeSpec("q-01", 4, 0.1)
    other = scenarios.PodEvent(0.0, "o", "other", 0.8, 10.0, 100.0, node="q-01")
    mine = scenarios.PodEvent(0.0, "m", "web", 2.0, 1.0, None)
    sc = scenarios.Scenario(
        "c", "t", (other, mine), (scenarios.HotSpot(50.0, "q-01", 0.75),), 200.0, None
    )
    assert scenarios.floor(sc, node, 5.0) == 0.1 + 0.4 / 4
    assert scenarios.floor(sc, node, 60.0) == 0.75 + 0.8 / 4
    assert scenarios.floor(sc, node, 150.0) == 0.75


def test_after_the_hot_spot_only_node_seconds_from_it_count_and_avoidable_ones_apart() -> None:
    ticks = [
        metrics.Tick(float(t), {"hot": 0.9, "cool": 0.9 if t >= 12 else 0.2}, {}, {})
        for t in range(20)
    ]
    got = metrics.after_hotspot(
        ticks, since=10.0, hot_nodes=["hot"], floor=lambda n, _t: 0.85 if n == "hot" else 0.3
    )
    assert got["node_seconds_above_80"] == 10 + 8
    assert got["avoidable_node_seconds_above_80"] == 8
    assert got["per_hot_node"] == {"hot": 10}


def test_after_the_heat_node_seconds_above_100_count_only_from_it_on() -> None:
    # A node of our own pods over 100 % from t=5 to 14, back to 0.7 from 15: heat at 8.
    ticks = [
        metrics.Tick(float(t), {"n1": 1.2 if 5 <= t < 15 else 0.7, "n2": 0.5}, {}, {})
        for t in range(30)
    ]
    got = metrics.after_hotspot(ticks, since=8.0, hot_nodes=[], floor=lambda _n, _t: 0.1)
    assert got["node_seconds_above_100"] == 7
    assert got["node_seconds_above_80"] == 7
    assert got["avoidable_node_seconds_above_80"] == 7
    assert got["per_hot_node"] == {}
