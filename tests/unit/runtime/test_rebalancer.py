"""The rebalancing loop: DryRun records and evicts nothing; Evict goes through the Eviction
API, fenced; a PodDisruptionBudget's refusal is recorded, not an error; status, events and
/metrics say what happened."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import pathlib
from typing import Any

import pytest
import yaml

from metricsched import config as config_mod
from metricsched.core import model
from metricsched.edges import events, kube_http, metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import rebalancer as rebalancer_mod
from tests.unit.conftest import (
    NOW,
    build_metric_spec,
    build_metric_view,
    build_node_state,
    build_pod_info,
    build_policy,
)

SPEC = model.RebalanceSpec(
    mode=model.RebalanceMode.DRY_RUN,
    metric="latency",
    above=0.5,
    below=None,
    window_s=60.0,
    interval_s=30.0,
    max_per_node=1,
    max_total=5,
    min_pod_age_s=0.0,
    margin=0.05,
    max_per_workload=1000,  # the pods here are of one ReplicaSet: the limit's own tests say
)
LATENCY = {"hot": 0.9, "cool": 0.1}


class FakeApi:
    """``kube_http.AsyncApi``'s request, for the Eviction: the gate (the fence) is read
    as the real one reads it, right before sending; ``status`` decides the answer."""

    def __init__(self) -> None:
        self.status = 201
        self.evicted: list[str] = []

    async def request(
        self, method: str, path: str, *, gate: kube_http.Gate | None = None, **_: Any
    ) -> kube_http.Answer:
        assert method == "POST" and path.endswith("/eviction"), (method, path)
        if gate is not None:
            gate()
        namespace, name = path.split("/")[4], path.split("/")[6]
        self.evicted.append(f"{namespace}/{name}")
        body = {"kind": "Status", "message": "TooManyRequests"}
        return kube_http.Answer(self.status, json.dumps(body).encode())


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def post(
        self, ref: events.ObjectRef, *, event_type: str, reason: str, message: str, action: str = ""
    ) -> None:
        self.events.append((ref.kind, ref.name, f"{event_type} {reason}", message))


def config() -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args([]), {})


class Rig:
    def __init__(self, spec: model.RebalanceSpec = SPEC, *, budget: int | None = None) -> None:
        self.cache = cache_mod.ClusterCache()
        for name in LATENCY:
            self.cache.upsert_node(build_node_state(name).node)
        self.policy = dataclasses.replace(
            build_policy(metrics=[build_metric_spec("latency", threshold_max=0.5)]),
            rebalance=spec,
        )
        self.cache.upsert_policy(self.policy)
        self.pod = dataclasses.replace(
            build_pod_info("web-1", node_name="hot"),
            phase="Running",
            owner="ReplicaSet/web",
            placed_by="shop/web-latency",
            creation_timestamp=NOW - 3600,
            bound_at=NOW - 3600,
        )
        self.cache.upsert_pod(self.pod, ours=True)
        self.store = metric_store.MetricStore()
        self.now = NOW
        self.mono = 500.0  # the monotonic clock: moves with the wall clock unless stepped
        self.set_latency(LATENCY)
        self.metrics = observe.Metrics()
        self.api = FakeApi()
        self.recorder = FakeRecorder()
        self.marked: list[model.PolicyKey] = []
        self.fence_left = 10.0
        self.rebalancer = rebalancer_mod.Rebalancer(
            config=config(),
            cache=self.cache,
            store=self.store,
            http=self.api,  # type: ignore[arg-type]
            recorder=self.recorder,  # type: ignore[arg-type]
            metrics=self.metrics,
            gates=gates_mod.Gates.open(),
            policy_ref=lambda key: events.ObjectRef.policy(
                namespace="shop", name="web-latency", uid="uid-policy"
            ),
            mark=self.marked.append,
            monotonic=lambda: self.mono,
        )
        self.rebalancer.gates.leading.set()
        self.rebalancer.gates.fence = lambda: self.fence_left
        if budget is not None:
            self.rebalancer.budget = budget

    def set_latency(self, values: dict[str, float]) -> None:
        for key, series in build_metric_view(
            self.policy, {"latency": values}, refreshed_at=self.now - 1
        ).items():
            self.store.update(key, series)

    def run(self, at: float, *, elapsed: float | None = None) -> int:
        """A pass at wall time ``at``, ``elapsed`` seconds after the previous one (by
        default as much as the wall clock moved: no step)."""
        self.mono += at - self.now if elapsed is None else elapsed
        self.now = at
        self.set_latency(LATENCY)
        return asyncio.run(self.rebalancer.run_pass(at))

    def counted(self, result: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            "metricsched_rebalance_evictions_total",
            {"policy": "shop/web-latency", "result": result},
        )


def test_nothing_moves_before_the_node_has_been_past_the_trigger_for_the_window():
    rig = Rig()
    assert rig.run(NOW) == 0
    assert rig.run(NOW + 59) == 0
    block = rig.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    assert block is not None
    assert (block["nodesOutside"], block["nodesDue"]) == (1, 0)


def test_dry_run_reports_what_it_would_do_and_evicts_nothing():
    rig = Rig()
    rig.run(NOW)
    assert rig.run(NOW + 60) == 1

    assert rig.api.evicted == []
    assert rig.counted("WouldEvict") == 1
    assert rig.counted("Evicted") == 0
    kinds = [(kind, reason) for kind, _, reason, _ in rig.recorder.events]
    assert kinds == [
        ("Pod", "Normal WouldRebalance"),
        ("SchedulingPolicy", "Normal WouldRebalance"),
    ]
    message = rig.recorder.events[0][3]
    assert message.startswith("would evict shop/web-1 of ReplicaSet/web from hot")
    assert "dry run placed it on cool" in message
    block = rig.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    assert block is not None
    assert (block["mode"], block["wouldEvictPods"], block["evictedPods"]) == ("DryRun", 1, 0)
    (recent,) = block["recent"]  # type: ignore[misc]
    assert recent["pod"] == "shop/web-1" and recent["targetNode"] == "cool"
    assert recent["result"] == "WouldEvict" and recent["value"] == 0.9
    # Counted as if it had happened: the same pod is not reported again within the window.
    assert rig.run(NOW + 90) == 0
    assert rig.counted("WouldEvict") == 1


def test_evict_mode_evicts_through_the_eviction_api_and_says_so_on_pod_and_policy():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    rig.run(NOW)
    assert rig.run(NOW + 60) == 1

    assert rig.api.evicted == ["shop/web-1"]
    assert rig.counted("Evicted") == 1
    reasons = [(kind, reason) for kind, _, reason, _ in rig.recorder.events]
    assert reasons == [("Pod", "Normal Rebalanced"), ("SchedulingPolicy", "Normal Rebalanced")]
    assert rig.recorder.events[0][3].startswith("evicted shop/web-1 of ReplicaSet/web from hot")
    block = rig.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    assert block is not None and block["evictedPods"] == 1
    assert (
        rig.metrics.registry.get_sample_value("metricsched_api_writes_total", {"kind": "eviction"})
        == 1
    )


def test_a_disruption_budgets_refusal_is_recorded_and_retried_after_the_interval():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    rig.api.status = 429
    rig.run(NOW)
    assert rig.run(NOW + 60) == 0

    assert rig.counted("Blocked") == 1
    reasons = [reason for _, _, reason, _ in rig.recorder.events]
    assert reasons == ["Normal RebalanceBlocked"]  # no warning: a budget is not an error
    block = rig.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    assert block is not None and (block["blockedPods"], block["evictedPods"]) == (1, 0)
    rig.run(NOW + 89)
    assert rig.api.evicted == ["shop/web-1"]  # once per interval (30 s)
    rig.api.status = 201
    rig.run(NOW + 91)
    assert rig.api.evicted == ["shop/web-1", "shop/web-1"]
    assert rig.counted("Evicted") == 1


def test_after_a_move_its_node_waits_a_whole_window_again():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    second = dataclasses.replace(rig.pod, name="web-2", uid="uid-web-2")
    rig.cache.upsert_pod(second, ours=True)
    rig.rebalancer.states.clear()
    rig.run(NOW)
    rig.run(NOW + 60)
    assert rig.api.evicted == ["shop/web-1"]
    rig.cache.remove_pod(rig.pod.uid)  # the watch sees it go
    rig.run(NOW + 91)  # the interval allows another, but the node's window started over
    assert rig.api.evicted == ["shop/web-1"]
    rig.run(NOW + 119)
    assert rig.api.evicted == ["shop/web-1"]
    rig.run(NOW + 120)
    assert rig.api.evicted == ["shop/web-1", "shop/web-2"]


def test_a_wall_clock_step_forward_does_not_end_a_window_early():
    rig = Rig()
    rig.run(NOW)
    assert rig.run(NOW + 3600, elapsed=10) == 0  # NTP stepped the clock an hour ahead
    assert rig.run(NOW + 3649, elapsed=49) == 0
    assert rig.run(NOW + 3650, elapsed=1) == 1  # 60 s past the trigger, by the monotonic clock


def test_a_wall_clock_step_back_neither_stalls_a_window_nor_an_interval():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    second = dataclasses.replace(rig.pod, name="web-2", uid="uid-web-2")
    rig.cache.upsert_pod(second, ours=True)
    rig.rebalancer.states.clear()
    rig.run(NOW)
    assert rig.run(NOW - 3540, elapsed=60) == 1  # stepped an hour back: still 60 s past
    rig.cache.remove_pod(rig.pod.uid)
    # The node's window started over at the move: 60 s later (monotonic) it moves again.
    assert rig.run(NOW - 3481, elapsed=59) == 0
    assert rig.run(NOW - 3480, elapsed=1) == 1
    assert rig.api.evicted == ["shop/web-1", "shop/web-2"]


def test_a_workload_moved_once_waits_its_interval_though_its_next_pod_has_another_name():
    spec = dataclasses.replace(
        SPEC, mode=model.RebalanceMode.EVICT, max_per_workload=1, workload_interval_s=300.0
    )
    rig = Rig(spec)
    second = dataclasses.replace(rig.pod, name="web-2", uid="uid-web-2")
    rig.cache.upsert_pod(second, ours=True)
    rig.rebalancer.states.clear()
    rig.run(NOW)
    rig.run(NOW + 60)
    assert rig.api.evicted == ["shop/web-1"]
    rig.cache.remove_pod(rig.pod.uid)
    rig.run(NOW + 299)  # the node's window and the interval allow it; the workload does not
    assert rig.api.evicted == ["shop/web-1"]
    rig.run(NOW + 361)
    assert rig.api.evicted == ["shop/web-1", "shop/web-2"]


def test_the_operator_wide_budget_holds_across_policies_and_passes():
    spec = dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT, max_per_node=10, max_total=10)
    rig = Rig(spec, budget=2)
    for i in range(2, 6):
        extra = dataclasses.replace(rig.pod, name=f"web-{i}", uid=f"uid-web-{i}")
        rig.cache.upsert_pod(extra, ours=True)
    rig.rebalancer.states.clear()
    rig.run(NOW)
    rig.run(NOW + 60)
    assert len(rig.api.evicted) == 2  # five pods would go: the budget lets two
    skipped = rig.metrics.registry.get_sample_value(
        "metricsched_rebalance_skipped_total",
        {"policy": "shop/web-latency", "reason": "OPERATOR_BUDGET"},
    )
    assert skipped == 3
    rig.run(NOW + 90, elapsed=30)  # the minute is not over
    assert len(rig.api.evicted) == 2


def test_a_budget_of_zero_evicts_nothing():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT), budget=0)
    rig.run(NOW)
    rig.run(NOW + 60)
    assert rig.api.evicted == []


def test_the_eviction_budget_is_a_flag_with_a_default_of_ten_per_minute():
    assert config().rebalance_eviction_budget == 10
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    args = parser.parse_args(["--rebalance-eviction-budget", "3"])
    assert config_mod.from_args(args, {}).rebalance_eviction_budget == 3


def test_a_fenced_replica_sends_no_eviction_and_counts_none():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    rig.fence_left = 1.0
    rig.run(NOW)
    assert rig.run(NOW + 60) == 0
    assert rig.api.evicted == []
    assert rig.counted("Fenced") == 1
    assert rig.recorder.events == []
    rig.fence_left = 10.0
    assert rig.run(NOW + 61) == 1  # the next leader (or this one, renewed) goes on


def test_a_replica_that_does_not_lead_does_not_rebalance():
    rig = Rig(dataclasses.replace(SPEC, mode=model.RebalanceMode.EVICT))
    rig.run(NOW)
    rig.rebalancer.gates.leading.clear()
    assert rig.run(NOW + 60) == 0
    assert rig.api.evicted == []


def test_a_policy_that_stops_rebalancing_loses_its_status_block_and_series():
    rig = Rig()
    rig.run(NOW)
    rig.cache.upsert_policy(dataclasses.replace(rig.policy, rebalance=None))
    rig.run(NOW + 1)
    key = model.PolicyKey("shop/web-latency")
    assert rig.rebalancer.status_block(key) is None
    assert rig.marked[-1] == key
    assert rig.counted("WouldEvict") is None


@pytest.mark.parametrize("mode", list(model.RebalanceMode))
def test_the_status_block_fits_the_crds_status_rebalance_schema(mode):
    rig = Rig(dataclasses.replace(SPEC, mode=mode))
    rig.run(NOW)
    rig.run(NOW + 60)
    block = rig.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    crd = yaml.safe_load(
        (pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "properties"
    ]["rebalance"]
    assert block is not None
    assert set(block) <= set(schema["properties"])
    entry = schema["properties"]["recent"]["items"]["properties"]
    for recent in block["recent"]:  # type: ignore[attr-defined]
        assert set(recent) <= set(entry)
