"""Issue 30's fairer benchmark, without a cluster: repeats interleaved and summarised as
median and range, CPU over the drain window, kube-scheduler's nodes evaluated per pod,
the all-nodes kube-scheduler row, and the CPU share each system is given."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from bench import env as env_mod
from bench import fairness, report, stats, systems

bench_main = importlib.import_module("bench.__main__")


def test_median_and_range_over_repeats() -> None:
    assert stats.median_range([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert stats.median_range([4.0, None, 1.0]) == (2.5, 1.0, 4.0)
    assert stats.median_range([None]) is None


def test_drain_cpu_leaves_start_up_out() -> None:
    # 5 s of start-up at 1 core, then 10 s of drain at 0.5 cores, then idle.
    samples = [(0.0, 0.0), (5.0, 5.0), (10.0, 7.5), (15.0, 10.0), (20.0, 10.0)]
    binds = [5.0 + i for i in range(11)]  # 11 pods, first at 5 s, last at 15 s
    drain = stats.drain_cpu(samples, binds)
    assert drain["cores_drain"] == 0.5
    assert drain["cpu_ms_per_pod_drain"] == 500.0  # 5 s of CPU over the 10 pods after the first
    assert stats.value_at(samples, 7.5) == 6.25
    assert stats.drain_cpu(samples, [25.0, 26.0])["cpu_ms_per_pod_drain"] is None


@pytest.mark.parametrize(
    ("nodes", "evaluated"), [(50, 50), (200, 100), (1000, 420), (2000, 680), (5000, 500)]
)
def test_kube_scheduler_default_samples_nodes(nodes: int, evaluated: int) -> None:
    assert systems.nodes_evaluated(systems.SYSTEMS["kube-open"], nodes) == evaluated


def test_all_nodes_row_and_metricsched_evaluate_every_node() -> None:
    assert systems.nodes_evaluated(systems.SYSTEMS["kube-open-all"], 5000) == 5000
    assert systems.nodes_evaluated(systems.SYSTEMS["metricsched"], 5000) == 5000
    assert systems.nodes_evaluated(systems.SYSTEMS["null"], 5000) == 0


def test_only_the_all_nodes_row_sets_percentage_of_nodes_to_score(tmp_path: Path) -> None:
    cluster = env_mod.ClusterEnv(
        "https://x", "t", tmp_path / "ca", tmp_path / "kc", "http://p", tmp_path
    )
    configs = {
        name: json.loads(
            systems._kube_scheduler_config(systems.SYSTEMS[name], cluster, tmp_path).read_text()
        )
        for name in ("kube-open", "kube-open-all")
    }
    assert configs["kube-open-all"]["percentageOfNodesToScore"] == 100
    assert "percentageOfNodesToScore" not in configs["kube-open"]
    assert configs["kube-open-all"]["clientConnection"]["qps"] == 5000


def test_repeats_are_interleaved_abba() -> None:
    order = bench_main.interleaved(("a", "b"), 3)
    assert order == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]


def test_full_plan_runs_three_repeats_and_the_takeover_trials() -> None:
    plan = bench_main.PLANS["full"]
    assert plan.repeats == 3
    specs = bench_main._specs(plan, 1000, None)
    backlog = [s for s in specs if s.scenario == "backlog"]
    assert {s.system.name for s in backlog} >= {"kube-open", "kube-open-all", "metricsched"}
    assert all(sum(1 for s in backlog if s.system == x.system) == 3 for x in backlog)
    for n in (1000, 5000):
        (take,) = [s for s in bench_main._specs(plan, n, None) if s.scenario == "takeover"]
        assert take.bound_before + take.pods == 10_000


def test_pinning_prefixes_taskset_and_the_opt_out_changes_nothing() -> None:
    pinned = fairness.Placement("pin", scheduler_cpus=(1,), other_cpus=(0,))
    assert pinned.wrap(["sched", "--x"]) == ["taskset", "-c", "1", "sched", "--x"]
    assert fairness.choose("none").wrap(["sched"]) == ["sched"]
    quota = fairness.Placement("quota", quota_cores=0.5, cgroup=Path("/cg/x"))
    assert quota.wrap(["sched"])[-1] == "sched"
    assert "/cg/x/cgroup.procs" in quota.wrap(["sched"])[2]


def test_quota_cgroup_v1_is_written(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    found = fairness.make_cgroup(0.5, root=tmp_path)
    assert found is not None
    path, version = found
    assert version == 1
    assert (path / "cpu.cfs_quota_us").read_text() == "50000"


def _backlog(system: str, tp: float, repeat: int, cpu: float) -> dict[str, Any]:
    return {
        "scenario": "backlog",
        "system": system,
        "nodes": 1000,
        "repeat": repeat,
        "bound": 10,
        "pods": 10,
        "complete": True,
        "nodes_evaluated": systems.nodes_evaluated(systems.SYSTEMS[system], 1000),
        "throughput": {"pods_per_s": tp},
        "resources": {"cpu_ms_per_pod": cpu, "cpu_ms_per_pod_drain": cpu / 2},
    }


def test_throughput_table_reports_median_range_and_ratio_of_medians() -> None:
    trials = [
        _backlog("metricsched", tp, r, cpu)
        for r, (tp, cpu) in enumerate([(100.0, 3.0), (300.0, 2.0), (200.0, 4.0)])
    ]
    trials += [_backlog("kube-open", tp, r, 2.0) for r, tp in enumerate([400.0, 100.0, 200.0])]
    trials += [_backlog("kube-open-all", 50.0, r, 9.0) for r in range(3)]
    lines = report.throughput_table({"trials": trials})
    (ms,) = [line for line in lines if "| metricsched |" in line]
    assert "| 200.0 [100.0-300.0] |" in ms
    assert "| 1.00x |" in ms  # 200 / 200: the medians, not the median trials' pairing
    assert "| 4.00x |" in ms  # against all nodes scored
    assert "| 1.50 [1.00-2.00] |" in ms  # CPU over the drain window
    assert "| 1000 | 3 |" in ms  # nodes evaluated (computed), runs
    (kube,) = [line for line in lines if "| kube-scheduler QPS 5000 |" in line]
    assert "| 420 | 3 |" in kube
    (row,) = [v for k, v in report.scale_rows({"trials": trials}) if "throughput" in k]
    assert row.startswith("200.0 / 200.0 / 50.0 / n/a pods/s (1.00x of kube QPS 5000, 4.00x")


def test_startup_table_reports_takeover_and_first_binding() -> None:
    trials = [
        {
            "scenario": "takeover",
            "system": "metricsched",
            "nodes": 1000,
            "bound_before": 9000,
            "pods": 1000,
            "bound": 1000,
            "takeover_s": 17.25,
            "first_leader_bind_s": 16.0,
            "lease_duration_s": 15.0,
            "throughput": {"pods_per_s": 150.0},
        },
        {
            "scenario": "memory",
            "system": "metricsched",
            "nodes": 5000,
            "bound_before": 9000,
            "pods": 1000,
            "start_to_first_bind_s": 3.5,
        },
    ]
    text = "\n".join(report.startup_table({"trials": trials}))
    assert "| 17.25 |" in text and "≤ lease 15 s + 3 s" in text
    assert "| 3.50 |" in text
    assert report.startup_table({"trials": []}) == [
        "(no memory or takeover trial in this results file)"
    ]


def test_opt_in_systems_run_only_when_named(tmp_path: Path) -> None:
    plan = bench_main.PLANS["full"]
    default = {s.system.name for s in bench_main._specs(plan, 1000, None)}
    assert default.isdisjoint(systems.OPT_IN)
    named = bench_main._specs(plan, 1000, {"null-256", "metricsched-events"})
    backlog = [s.system.name for s in named if s.scenario == "backlog"]
    assert backlog.count("null-256") == backlog.count("metricsched-events") == 3
    cluster = env_mod.ClusterEnv(
        "https://x", "t", tmp_path / "ca", tmp_path / "kc", "http://p", tmp_path
    )
    null = systems.command(systems.SYSTEMS["null-256"], cluster, tmp_path)
    assert "--concurrency=256" in null
    events = systems.command(systems.SYSTEMS["metricsched-events"], cluster, tmp_path)
    assert "--events-per-second=2000" in events and events[1] == "run"
