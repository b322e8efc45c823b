"""The benchmark's plan (5,000 nodes, per-size steady trials, memory trial) and
hack/cluster.py's bench-only --quiet-nodes option; no cluster needed."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _cluster_module() -> ModuleType:
    # hack/cluster.py imports hack/kwok_node.py by its name beside it (hack/ is not a package)
    sys.modules.setdefault("kwok_node", importlib.import_module("hack.kwok_node"))
    spec = importlib.util.spec_from_file_location("hack_cluster", ROOT / "hack" / "cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hack_cluster"] = module
    spec.loader.exec_module(module)
    return module


cluster = _cluster_module()
bench_main = importlib.import_module("bench.__main__")
contention = importlib.import_module("bench.contention")
scenarios = importlib.import_module("bench.quality.scenarios")


def test_full_plan_has_5000_nodes_steady_and_memory() -> None:
    plan = bench_main.PLANS["full"]
    assert 5000 in plan.nodes
    specs = bench_main._specs(plan, 5000, None)
    by = {(s.scenario, s.system.name): s for s in specs}
    assert by[("backlog", "metricsched")].pods == plan.backlog_size(5000) < plan.backlog_pods
    assert by[("steady", "metricsched")].rate == 50.0
    mem = by[("memory", "metricsched")]
    assert mem.bound_before + mem.pods == 10_000
    at_1000 = {(s.scenario, s.system.name): s for s in bench_main._specs(plan, 1000, None)}
    assert at_1000[("steady", "metricsched")].rate == 20.0
    assert at_1000[("backlog", "metricsched")].pods == 5000
    assert not any(s.scenario == "memory" for s in at_1000.values())


def test_default_cluster_keeps_kubelet_like_leases(tmp_path: Path) -> None:
    kcm = cluster.argv_for("kube-controller-manager", tmp_path, 6)
    assert not any(a.startswith("--node-monitor-grace-period") for a in kcm)


def test_quiet_nodes_turn_off_leases_and_widen_grace(tmp_path: Path) -> None:
    kcm = cluster.argv_for("kube-controller-manager", tmp_path, 5000, True)
    assert "--node-monitor-grace-period=1h" in kcm


def test_quiet_heartbeat_spreads_the_stock_stage() -> None:
    stock = (
        "spec:\n  delay:\n    durationMilliseconds: 600000\n"
        "    jitterDurationMilliseconds: 610000\n"
    )
    out = cluster.quiet_heartbeat(stock)
    assert "durationMilliseconds: 300000\n    jitterDurationMilliseconds: 900000" in out
    with pytest.raises(cluster.ClusterError):
        cluster.quiet_heartbeat("spec: {}\n")


@pytest.fixture
def kwok_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cluster's state in ``tmp_path``, with the stock kwok stage it tunes."""
    monkeypatch.setattr(cluster, "STATE", tmp_path)
    stages = tmp_path / "kwok-stages"
    stages.mkdir()
    (stages / "node-heartbeat-with-lease.yaml").write_text(
        "metadata:\n  name: node-heartbeat-with-lease\n  delay:\n"
        "    durationMilliseconds: 600000\n    jitterDurationMilliseconds: 610000\n"
    )
    return stages


def test_kwok_lease_flag_follows_the_option(tmp_path: Path, kwok_stages: Path) -> None:
    bin_dir = tmp_path / "bin"
    assert "--node-lease-duration-seconds=40" in cluster.argv_for("kwok", bin_dir, 6)
    quiet = cluster.argv_for("kwok", bin_dir, 5000, True)
    assert "--node-lease-duration-seconds=0" in quiet
    assert "jitterDurationMilliseconds: 900000" in (tmp_path / "kwok.yaml").read_text()


def test_kwok_takes_over_every_node_the_cluster_and_the_benchmarks_create(
    tmp_path: Path, kwok_stages: Path
) -> None:
    flag = "--manage-nodes-with-annotation-selector="
    argv = cluster.argv_for("kwok", tmp_path / "bin", 6)
    key, value = next(a.removeprefix(flag) for a in argv if a.startswith(flag)).split("=")
    bodies = [
        cluster.node_body(5),
        contention.node_body(0, 4),
        scenarios.node_body(scenarios.NodeSpec("q-1", 8, 0.2), 1),
    ]
    for body in bodies:
        name = body["metadata"]["name"]
        assert body["metadata"]["annotations"][key] == value
        assert body["metadata"]["labels"]["kubernetes.io/hostname"] == name
        assert body["status"]["allocatable"] == body["status"]["capacity"]


def test_rules_are_evaluated_fast_unless_the_benchmark_asks_for_its_pipelines_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(cluster.RULE_INTERVAL_ENV, raising=False)
    assert "  evaluation_interval: 2s\n" in cluster.prometheus_config_text()
    monkeypatch.setenv(cluster.RULE_INTERVAL_ENV, "15s")
    assert "  evaluation_interval: 15s\n" in cluster.prometheus_config_text()
