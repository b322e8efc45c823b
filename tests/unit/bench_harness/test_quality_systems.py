"""The quality benchmark's systems, metric pipelines, policies and run selection
(bench/quality/systems.py, runner.py, loadmodel.py); no cluster needed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from bench import env as env_mod
from bench import systems as bench_systems
from bench.quality import loadmodel, runner, scenarios
from bench.quality import systems as qsys

REALISTIC = qsys.PIPELINES["realistic"]
GAUGE = qsys.PIPELINES["gauge"]


def metric(system: str, key: str = "a", pipeline: qsys.Pipeline = REALISTIC) -> dict[str, Any]:
    spec = qsys.policy(system, scenario=key, pipeline=pipeline)
    assert len(spec["metrics"]) == 1
    found: dict[str, Any] = spec["metrics"][0]
    return found


def test_the_default_policy_is_the_first_row_and_declares_nothing() -> None:
    assert qsys.ORDER[0] == qsys.DEFAULT
    assert qsys.CHOSEN[0] == qsys.DEFAULT
    m = metric(qsys.DEFAULT)
    assert "estimate" not in m
    assert m["threshold"] == {"max": 0.8}


def test_the_rows_differ_only_in_their_estimate() -> None:
    base = qsys.policy(qsys.DEFAULT, scenario="d")
    for system in (qsys.MEASURED, qsys.ESTIMATE, qsys.AMOUNT_HALF, qsys.AMOUNT_DOUBLE):
        other = qsys.policy(system, scenario="d")
        other["metrics"][0].pop("estimate")
        assert other == base, system


def test_declared_amounts_are_the_scenarios_true_mean_its_half_and_its_double() -> None:
    amounts = {
        (s, k): metric(s, k)["estimate"]["amount"]
        for s in (qsys.ESTIMATE, qsys.AMOUNT_HALF, qsys.AMOUNT_DOUBLE)
        for k in ("a", "d")
    }
    assert amounts == {
        (qsys.ESTIMATE, "a"): "200m",
        (qsys.AMOUNT_HALF, "a"): "100m",
        (qsys.AMOUNT_DOUBLE, "a"): "400m",
        (qsys.ESTIMATE, "d"): "400m",
        (qsys.AMOUNT_HALF, "d"): "200m",
        (qsys.AMOUNT_DOUBLE, "d"): "800m",
    }
    assert metric(qsys.ESTIMATE)["estimate"]["settleTime"] == REALISTIC.amount_settle


def test_measured_is_declared_and_estimate_off_is_none() -> None:
    assert metric(qsys.MEASURED)["estimate"] == {"from": "Measured", "resource": "cpu"}
    assert metric(qsys.NO_ESTIMATE)["estimate"] == {"from": "None"}


def test_the_realistic_pipeline_reads_the_recording_rule_at_15_s() -> None:
    m = metric(qsys.DEFAULT)
    assert m["prometheus"] == {
        "query": 'max by (instance) (instance:node_cpu_utilisation:rate5m{job="node-exporter"})',
        "nodeLabel": "instance",
    }
    assert (REALISTIC.scrape, REALISTIC.rule_interval, REALISTIC.refresh) == ("15s",) * 3
    assert not REALISTIC.best_case
    assert GAUGE.best_case
    assert metric(qsys.DEFAULT, pipeline=GAUGE)["prometheus"]["query"] == (
        "max by (node) (node_cpu_utilisation)"
    )


def test_the_per_pod_query_uses_the_rules_window() -> None:
    rules = (env_mod.ROOT / "hack" / "prometheus-rules.yml").read_text()
    assert f'mode=~"idle|iowait|steal"}}[{REALISTIC.window}]' in rules
    args = REALISTIC.operator_args()
    assert args[0].startswith("--pod-usage-cpu-query=sum by (namespace, pod)")
    assert f"[{REALISTIC.window}]" in args[0]
    assert args[1] == f"--pod-usage-settle-time={REALISTIC.pod_settle}"


def test_metricsched_runs_with_the_pipelines_refresh_and_per_pod_flags(tmp_path: Path) -> None:
    cluster = env_mod.ClusterEnv(
        "https://x", "t", tmp_path, tmp_path / "kc", "http://prom", tmp_path / "bin"
    )
    systems = qsys.catalogue(REALISTIC)
    argv = bench_systems.command(systems[qsys.DEFAULT], cluster, tmp_path)
    assert "--refresh-interval=15s" in argv
    assert argv[-2:] == list(REALISTIC.operator_args())
    kube = bench_systems.command(systems[qsys.KUBE], cluster, tmp_path)
    assert not any(a.startswith("--pod-usage") for a in kube)
    gauge = qsys.catalogue(GAUGE)[qsys.NO_ESTIMATE]
    assert gauge.refresh_interval == "5s"


def test_only_metricsched_rows_get_a_policy_and_the_pair_plays_c_and_e_only() -> None:
    assert not qsys.is_metricsched(qsys.KUBE)
    assert not qsys.is_metricsched(qsys.RANDOM)
    assert all(qsys.is_metricsched(s) for s in qsys.ORDER if s not in (qsys.KUBE, qsys.RANDOM))
    assert qsys.plays(qsys.REBALANCE, "c") and qsys.plays(qsys.OWNED, "c")
    assert qsys.plays(qsys.REBALANCE, "e") and qsys.plays(qsys.OWNED, "e")
    assert not qsys.plays(qsys.REBALANCE, "d")
    assert not set(qsys.PAIR) & set(qsys.CHOSEN)


def test_the_rebalance_pair_declares_no_estimate_as_the_default_row() -> None:
    """The pair's policy is the default's plus spec.rebalance: the scheduler counts a
    replacement as the default counts it, not at a declared amount."""
    default = qsys.policy(qsys.DEFAULT, scenario="e")
    for system in qsys.PAIR:
        spec = qsys.policy(system, scenario="e")
        assert "estimate" not in spec["metrics"][0]
        assert {k: v for k, v in spec.items() if k != "rebalance"} == default
    assert "rebalance" in qsys.policy(qsys.REBALANCE, scenario="e")
    assert "rebalance" not in qsys.policy(qsys.OWNED, scenario="e")


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_smoke_plan_plays_the_scale_out_with_the_default_and_kube_scheduler() -> None:
    plan, keys, chosen = runner.selection(args("--plan", "smoke"))
    assert plan is scenarios.PLANS["smoke"]
    assert keys == ("d",)
    assert chosen == qsys.SMOKE == (qsys.DEFAULT, qsys.KUBE)


def test_the_full_plan_plays_every_scenario_and_system_but_the_pair() -> None:
    _, keys, chosen = runner.selection(args())
    assert keys == ("a", "b", "c", "d")
    assert chosen == qsys.CHOSEN
    assert len(chosen) == 8


def test_systems_and_scenarios_can_be_chosen_and_unknown_ones_are_refused() -> None:
    _, keys, chosen = runner.selection(args("--scenarios", "a,d", "--systems", "random"))
    assert (keys, chosen) == (("a", "d"), ("random",))
    with pytest.raises(SystemExit, match="unknown"):
        runner.selection(args("--systems", "metricsched-estimate-learn"))
    with pytest.raises(SystemExit, match="unknown"):
        runner.selection(args("--scenarios", "f"))


def test_seeds_are_taken_in_order_once_each_else_the_single_seed() -> None:
    assert runner.seeds_of(args("--seeds", "1,2,3")) == (1, 2, 3)
    assert runner.seeds_of(args("--seeds", "3,1,3")) == (3, 1)
    assert runner.seeds_of(args("--seed", "7")) == (7,)
    assert runner.seeds_of(args()) == (1,)


def test_the_realistic_pipeline_is_the_default_and_the_gauge_has_its_own_file() -> None:
    assert args().pipeline == "realistic"
    assert runner.results_path("full").name == "quality-full.json"
    assert runner.results_path("full", "gauge").name == "quality-full-gauge.json"


def test_an_old_clusters_prometheus_gets_the_rules_and_the_exporters_jobs() -> None:
    old = "global:\n  scrape_interval: 2s\nscrape_configs:\n  - job_name: node-exporter-sim\n"
    new = loadmodel.with_own_jobs(old, 44101, scrape="15s")
    assert new.index("rule_files:") < new.index("scrape_configs:")
    assert str(loadmodel.RULES) in new
    for job in ("loadmodel", "node-exporter", "kubelet", "kube-state-metrics"):
        assert f"job_name: {job}\n" in new
    assert "metrics_path: /metrics/cadvisor" in new
    assert "target_label: metrics_path" in new
    assert "metrics_path: /kube-state-metrics/metrics" in new
    assert new.count("scrape_interval: 15s") == 4
    assert loadmodel.with_own_jobs(new, 44101, scrape="15s") == new


def test_an_eviction_budget_given_reaches_the_rebalance_system_only(tmp_path: Path) -> None:
    cluster = env_mod.ClusterEnv(
        "https://x", "t", tmp_path, tmp_path / "kc", "http://prom", tmp_path / "bin"
    )
    parsed = args("--rebalance-eviction-budget", "0")
    assert parsed.rebalance_eviction_budget == 0

    def run(budget: int | None) -> runner.Run:
        fields: Any = dict.fromkeys(("kube", "model"))
        return runner.Run(
            scenarios.PLANS["full"], "full", 1, cluster, nodes=(), results={}, out=tmp_path,
            pipeline=REALISTIC, eviction_budget=budget, **fields,
        )  # fmt: skip

    flag = "--rebalance-eviction-budget=0"
    assert flag in bench_systems.command(run(0).system(qsys.REBALANCE), cluster, tmp_path)
    assert flag not in bench_systems.command(run(0).system(qsys.OWNED), cluster, tmp_path)
    unset = bench_systems.command(run(None).system(qsys.REBALANCE), cluster, tmp_path)
    assert not any("eviction-budget" in a for a in unset)
