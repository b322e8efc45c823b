"""Placement-quality figures computed from a load-model record (bench/quality/metrics.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.quality import metrics


def tick(t: float, **cpu: float) -> dict[str, Any]:
    """A tick record; latency follows the load model's curve, one pod per node."""
    return {
        "t": t,
        "nodes": {
            n: {"cpu": u, "memory": 0.1, "latency": 0.05 / (1 - min(u, 0.98)), "pods": 1}
            for n, u in cpu.items()
        },
    }


def bind(t: float, node: str, after: float, scheduler: str = "metricsched") -> dict[str, Any]:
    return {
        "t": t,
        "bind": f"ns/p-{t}",
        "node": node,
        "scheduler": scheduler,
        "cpu_before": after - 0.05,
        "cpu_after": after,
    }


def parsed(records: list[dict[str, Any]], nodes: tuple[str, ...] = ("n1", "n2")) -> Any:
    return metrics.parse(records, t0=100.0, t1=200.0, nodes=nodes)


def test_records_outside_the_window_or_of_other_nodes_are_left_out() -> None:
    ticks, binds = parsed(
        [
            tick(99.0, n1=0.9, n2=0.9),
            tick(100.0, n1=0.5, n2=0.2, x=1.0),
            bind(150.0, "n1", 0.6),
            bind(150.0, "x", 0.99),
            {"t": 160.0, "gone": "ns/p", "node": "n1"},
            tick(201.0, n1=0.9, n2=0.9),
        ]
    )
    assert [k.t for k in ticks] == [100.0]
    assert set(ticks[0].cpu) == {"n1", "n2"}
    assert [b.node for b in binds] == ["n1"]


def test_each_tick_stands_until_the_next_and_the_last_for_the_median() -> None:
    ticks, _ = parsed([tick(100.0, n1=0), tick(101.0, n1=0), tick(103.0, n1=0)])
    assert metrics.durations(ticks) == [1.0, 2.0, 1.5]


def test_a_gap_in_the_ticks_counts_at_most_five_median_intervals() -> None:
    records = [tick(100.0 + i, n1=0) for i in range(5)] + [tick(150.0, n1=0)]
    ticks, _ = parsed(records)
    assert metrics.durations(ticks)[4] == 5.0


def test_node_seconds_count_only_nodes_strictly_above_the_level() -> None:
    ticks, _ = parsed([tick(100.0, n1=0.8, n2=0.9), tick(102.0, n1=1.1, n2=0.85)])
    assert metrics.node_seconds_above(ticks, 0.8) == pytest.approx(2.0 + 4.0)
    assert metrics.node_seconds_above(ticks, 1.0) == pytest.approx(2.0)


def test_spread_is_the_time_averaged_standard_deviation_across_nodes() -> None:
    ticks, _ = parsed([tick(100.0, n1=0.5, n2=0.5), tick(101.0, n1=0.2, n2=0.8)])
    assert metrics.mean_spread(ticks) == pytest.approx((0.0 + 0.3) / 2)


def test_weighted_percentile_takes_the_value_where_the_weight_reaches_p() -> None:
    pairs = [(1.0, 98.0), (5.0, 1.0), (9.0, 1.0)]
    assert metrics.weighted_percentile(pairs, 50) == 1.0
    assert metrics.weighted_percentile(pairs, 99) == 5.0
    assert metrics.weighted_percentile(pairs, 100) == 9.0
    assert metrics.weighted_percentile([(1.0, 0.0)], 50) is None


def test_pod_latency_weights_each_node_by_the_pods_running_there() -> None:
    record = tick(100.0, n1=0.0, n2=0.9)
    record["nodes"]["n1"]["pods"] = 9
    ticks, _ = parsed([record, tick(101.0, n1=0.0, n2=0.9)])
    assert metrics.pod_latency(ticks, 50) == pytest.approx(0.05)
    # n2 (0.5 s) holds 2 of the 12 pod-ticks: above the 83rd percentile
    assert metrics.pod_latency(ticks, 90) == pytest.approx(0.5)


def test_an_empty_node_adds_nothing_to_pod_latency() -> None:
    record = tick(100.0, n1=0.1, n2=0.97)
    record["nodes"]["n2"]["pods"] = 0
    ticks, _ = parsed([record])
    assert metrics.pod_latency(ticks, 99) == pytest.approx(0.05 / 0.9)


def test_the_hottest_node_at_the_end_averages_the_last_window() -> None:
    records = [tick(100.0 + i, n1=0.5, n2=0.3) for i in range(30)]
    records[-1] = tick(129.0, n1=0.5, n2=2.0)  # one noisy tick does not win on its own
    ticks, _ = parsed(records)
    node, value = metrics.hottest_at(ticks, end=129.0, window=19.0)
    assert node == "n1"
    assert value == pytest.approx(0.5)


def test_overruns_are_the_schedulers_own_binds_that_ended_above_the_threshold() -> None:
    _, binds = parsed(
        [bind(110.0, "n1", 0.81), bind(111.0, "n1", 0.8), bind(112.0, "n2", 0.95, "other")]
    )
    assert metrics.overruns(binds, scheduler="metricsched") == 1
    assert metrics.overruns(binds, scheduler="other") == 1


def test_heat_map_bins_time_and_keeps_every_node() -> None:
    ticks, _ = parsed([tick(100.0 + i, n1=i / 10, n2=0.1) for i in range(10)])
    heat = metrics.heat(ticks, t0=100.0, columns=5)
    assert heat["nodes"] == ["n1", "n2"]
    assert len(heat["t"]) == 5
    assert heat["cpu"][0][0] == pytest.approx(0.05)
    assert heat["cpu"][1] == [0.1] * 5


def test_summary_of_a_burst_reads_every_figure() -> None:
    records = [tick(100.0 + i, n1=0.5 + i / 100, n2=0.2) for i in range(40)]
    records += [bind(101.0, "n1", 0.85), bind(101.5, "n2", 0.3, "bench-kube")]
    ticks, binds = parsed(records)
    s = metrics.summarise(ticks, binds, t0=100.0, scheduler="metricsched", burst_end=39.0)
    assert s["hottest_end_of_burst_node"] == "n1"
    assert s["hottest_end_of_burst"] == pytest.approx(0.5 + 0.29, abs=1e-3)  # i = 19..39
    assert s["node_seconds_above_80"] == pytest.approx(9.0)  # i = 31..39
    assert s["node_seconds"] == pytest.approx(80.0)
    assert (s["binds"], s["binds_all"], s["overruns"], s["overruns_all"]) == (1, 2, 1, 1)
    assert s["hottest_series"][0] == [0.0, 0.5]
    assert s["above_80_series"][-1] == [39.0, 1]


def test_summary_of_no_ticks_has_no_figures_and_does_not_fail() -> None:
    s = metrics.summarise([], [], t0=0.0, scheduler="x", burst_end=10.0)
    assert s["node_seconds"] == 0
    assert s["latency_p99_s"] is None
    assert s["stddev_mean"] is None


def test_pending_counts_a_pod_never_bound_until_the_end_without_a_cap() -> None:
    ticks, _ = parsed([tick(100.0 + i, n1=0.9, n2=0.9) for i in range(100)])
    pods = [metrics.Pending(100.0, 110.0, 0.4), metrics.Pending(100.0, None, 0.4)]
    p = metrics.pending(ticks, pods, node_cpu={"n1": 4, "n2": 4}, t1=200.0)
    assert p["pending_max_s"] == pytest.approx(100.0)
    assert p["still_pending"] == 1
    # Both nodes above 0.8 all along: no room, so nothing was held with room.
    assert (p["held_with_room_max_s"], p["held_with_room_over_limit"]) == (0.0, 0)
    assert p["pending_at_end_with_room"] == 0


def test_a_pod_held_while_a_node_had_room_for_its_usage_is_counted() -> None:
    # n2 (4 cpus at 0.5) has room for 1.2 cores under 0.8 from t=130 on; n1 never.
    records = [tick(100.0 + i, n1=0.9, n2=0.95 if i < 30 else 0.5) for i in range(100)]
    ticks, _ = parsed(records)
    pods = [
        metrics.Pending(100.0, None, 1.0),  # fits n2 from 130: held 70 s
        metrics.Pending(100.0, None, 2.0),  # never fits: not held with room
        metrics.Pending(100.0, 150.0, 1.0),  # bound after 20 s of room
    ]
    p = metrics.pending(ticks, pods, node_cpu={"n1": 4, "n2": 4}, t1=200.0)
    assert p["held_with_room_max_s"] == pytest.approx(70.0)
    assert p["held_with_room_over_limit"] == 1
    assert p["pending_at_end_with_room"] == 1
    held = metrics.held_with_room(ticks, pods, node_cpu={"n1": 4, "n2": 4}, t1=200.0)
    assert held == pytest.approx([70.0, 0.0, 20.0])


def test_room_is_the_most_any_one_node_can_take_under_the_level() -> None:
    ticks, _ = parsed([tick(100.0, n1=0.5, n2=0.7)])
    assert metrics.room(ticks, node_cpu={"n1": 4, "n2": 16}) == pytest.approx([1.6])


class TestOverrunRecords:
    """Each overrun is kept with what caused it and what the scheduler believed."""

    def test_names_the_cause_and_keeps_the_decision(self) -> None:
        binds = [
            metrics.Bind(100.0, "ns/a", "n1", "ms", 0.85, 0.9),
            metrics.Bind(101.0, "ns/b", "n2", "ms", 0.7, 0.82),
            metrics.Bind(102.0, "ns/c", "n2", "ms", 0.5, 0.6),
            metrics.Bind(103.0, "ns/d", "n2", "kube", 0.7, 0.95),
        ]
        rows = metrics.overrun_records(
            binds, scheduler="ms", t0=90.0, decisions={"b": '{"node":"n2"}'}
        )
        assert [(r["pod"], r["cause"]) for r in rows] == [
            ("a", "node undercounted"),
            ("b", "pod undercounted"),
        ]
        assert rows[0]["t"] == 10.0 and "decision" not in rows[0]
        assert rows[1]["decision"] == '{"node":"n2"}'
        assert len(rows) == metrics.overruns(binds, scheduler="ms")
