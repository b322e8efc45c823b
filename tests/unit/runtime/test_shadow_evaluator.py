"""The shadow evaluator: pods of other schedulers evaluated once, when just bound; a
bounded queue that drops and counts; status and /metrics per policy."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
from typing import Any

import pytest

from metricsched import config as config_mod
from metricsched.core import model
from metricsched.edges import metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import shadow as shadow_mod
from metricsched.runtime import status as status_mod
from tests.unit.conftest import NOW, build_metric_view, build_node_state, build_policy
from tests.unit.conftest import build_pod_info as make_pod

LATENCY = {"node-1": 0.1, "node-2": 0.4}


class Rig:
    def __init__(self, *, capacity: int = 10, **timing: Any) -> None:
        self.cache = cache_mod.ClusterCache()
        for name in LATENCY:
            self.cache.upsert_node(build_node_state(name).node)
        self.policy = dataclasses.replace(build_policy("trial"), mode=model.PolicyMode.SHADOW)
        self.cache.upsert_policy(self.policy)
        self.store = metric_store.MetricStore()
        for key, series in build_metric_view(self.policy, {"latency": LATENCY}).items():
            self.store.update(key, series)
        self.metrics = observe.Metrics()
        self.marked: list[model.PolicyKey] = []
        parser = argparse.ArgumentParser()
        config_mod.add_run_arguments(parser)  # the defaults: scheduler name metricsched
        self.evaluator = shadow_mod.ShadowEvaluator(
            cache=self.cache,
            store=self.store,
            metrics=self.metrics,
            config=config_mod.from_args(parser.parse_args([]), {}),
            mark=self.marked.append,
            capacity=capacity,
            clock=lambda: NOW,
            **timing,
        )

    def see(self, pod: model.PodInfo, *, bound_at: float = NOW - 1) -> None:
        """What the pod watch does: the hook, then the cache."""
        conditions = []
        if pod.node_name:
            moment = datetime.datetime.fromtimestamp(bound_at, datetime.UTC)
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": f"{moment:%Y-%m-%dT%H:%M:%SZ}",
                }
            )
        self.evaluator.on_pod(pod, {"status": {"conditions": conditions}})
        self.cache.upsert_pod(pod, ours=False)

    def drain(self) -> None:
        async def go() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(self.evaluator.run(stop))
            while not self.evaluator._queue.empty():
                await asyncio.sleep(0)
            await asyncio.sleep(0)
            stop.set()
            await task

        asyncio.run(go())

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


def scheduled(name: str, node: str = "", scheduler: str = "default-scheduler") -> model.PodInfo:
    return make_pod(name, scheduler_name=scheduler, node_name=node)


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_a_pod_just_bound_is_evaluated_once(rig: Rig) -> None:
    rig.see(scheduled("web-1"))
    rig.see(scheduled("web-1", "node-2"))
    rig.see(scheduled("web-1", "node-2"))  # a later update of the bound pod
    rig.drain()
    (evaluation,) = rig.evaluator.policies[rig.policy.key].evaluations
    assert (evaluation.node, evaluation.policy_node, evaluation.agree) == (
        "node-2",
        "node-1",
        False,
    )
    assert rig.marked == [rig.policy.key]
    labels = {"policy": "shop/trial"}
    assert rig.sample("metricsched_shadow_evaluations_total", **labels, result="disagree") == 1
    assert rig.sample("metricsched_shadow_agreement_ratio", **labels) == 0
    advantage = rig.sample("metricsched_shadow_metric_advantage_ratio", **labels, metric="latency")
    assert advantage == pytest.approx(0.75)  # 0.1 instead of 0.4


def test_a_pod_bound_long_ago_or_not_yet_is_not_evaluated(rig: Rig) -> None:
    rig.see(scheduled("web-1", "node-2"), bound_at=NOW - shadow_mod.RECENT_BIND_S - 1)
    rig.see(scheduled("web-2"))
    rig.drain()
    assert rig.evaluator.policies == {}


def test_pods_of_metricsched_and_of_unnamed_schedulers_are_not_evaluated(rig: Rig) -> None:
    for pod in (scheduled("ours", scheduler="metricsched"), scheduled("v", scheduler="volcano")):
        rig.see(pod)
        rig.see(dataclasses.replace(pod, node_name="node-1"))
    rig.drain()
    assert rig.evaluator.policies == {}


def test_a_full_queue_drops_the_pod_and_counts_it() -> None:
    rig = Rig(capacity=1)
    for name in ("web-1", "web-2"):
        rig.see(scheduled(name))
        rig.see(scheduled(name, "node-1"))
    assert rig.sample("metricsched_shadow_dropped_total") == 1
    rig.drain()
    block = rig.evaluator.status_block(rig.policy.key)
    assert block is not None
    assert (block["evaluatedPods"], block["agreeingPods"], block["droppedPods"]) == (1, 1, 1)


def test_an_active_policy_has_no_shadow_status(rig: Rig) -> None:
    active = dataclasses.replace(rig.policy, mode=model.PolicyMode.ACTIVE)
    rig.cache.upsert_policy(active)
    assert rig.evaluator.status_block(active.key) is None


def policy_status(rig: Rig) -> status_mod.PolicyStatus:
    return status_mod.PolicyStatus(
        api=None,  # type: ignore[arg-type]
        policies=lambda: rig.cache.policies,
        nodes=rig.cache.nodes,
        counters=lambda key: (0, 0),
        metrics=rig.metrics,
        gates=gates_mod.Gates(),
        interval_s=15.0,
        shadow=rig.evaluator.status_block,
    )


def test_the_policy_status_carries_the_shadow_block(rig: Rig) -> None:
    status = policy_status(rig)
    rig.see(scheduled("web-1"))
    rig.see(scheduled("web-1", "node-1"))
    rig.drain()
    record, _ = status.observe(rig.policy.key, {"metadata": {"uid": "u", "generation": 1}})
    written = status.status_of(rig.policy.key, record)
    assert written["shadow"]["agreementPercent"] == 100
    assert written["shadow"]["recent"][0]["pod"] == "shop/web-1"
    assert written["scheduledPods"] == 0  # metricsched bound nothing


def test_a_policy_switched_to_active_has_its_shadow_block_removed(rig: Rig) -> None:
    status = policy_status(rig)
    rig.cache.upsert_policy(dataclasses.replace(rig.policy, mode=model.PolicyMode.ACTIVE))
    record, _ = status.observe(rig.policy.key, {"metadata": {"uid": "u", "generation": 2}})
    written = status.status_of(rig.policy.key, record)
    assert "shadow" in written
    assert written["shadow"] is None  # merge-patch null: the old block goes


def test_a_failing_hook_never_reaches_the_watch(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(shadow_mod.policy_selection, "shadow_policy_for", broken)
    rig.see(scheduled("web-1", "node-1"))  # raises nothing
    assert rig.cache.snapshot(now=NOW).nodes[model.NodeName("node-1")].pods


def test_each_evaluation_is_followed_by_a_pause_four_times_as_long() -> None:
    ticks = iter([10.0, 10.5, 20.0, 20.25])  # two evaluations: 0.5 s and 0.25 s of CPU
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await asyncio.sleep(0)

    rig = Rig(timer=lambda: next(ticks), sleep=pause)
    for name in ("web-1", "web-2"):
        rig.see(scheduled(name))
        rig.see(scheduled(name, "node-1"))
    rig.drain()
    assert pauses == [pytest.approx(2.0), pytest.approx(1.0)]
    assert shadow_mod.CPU_SHARE == 0.2
