"""The series the chart's alerts read that the scheduling loop sets: the oldest pending
pod's age and whether a policy's latest decision was taken by its fallback."""

from __future__ import annotations

import argparse

from metricsched import config as config_mod
from metricsched.core import model, parse
from metricsched.edges import events, metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import scheduler as scheduler_mod


def _scheduler(metrics: observe.Metrics, cache: cache_mod.ClusterCache) -> scheduler_mod.Scheduler:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return scheduler_mod.Scheduler(
        config=config_mod.from_args(parser.parse_args([]), {}),
        cache=cache,
        queue=queue_mod.SchedulingQueue(),
        store=metric_store.MetricStore(),
        http=None,  # type: ignore[arg-type]
        recorder=events.EventRecorder(None, component="metricsched"),  # type: ignore[arg-type]
        metrics=metrics,
        gates=gates_mod.Gates.open(),
    )


def _pending(name: str, *, created: str) -> model.PodInfo:
    return parse.pod_from_body(
        {
            "metadata": {
                "name": name,
                "namespace": "shop",
                "uid": f"uid-{name}",
                "creationTimestamp": created,
            },
            "spec": {"schedulerName": "metricsched", "containers": [{"name": "c"}]},
        }
    )


def _decision(*, policy: str, fallback_reason: str) -> model.Decision:
    return model.Decision(
        pod=model.PodKey("shop/web"),
        policy=model.PolicyKey(policy),
        outcome=model.Outcome.BIND,
        node=model.NodeName("node-a"),
        fallback_reason=fallback_reason,
        verdicts=(),
        message="",
    )


def test_the_oldest_pending_pod_age_counts_from_its_creation() -> None:
    metrics, cache = observe.Metrics(), cache_mod.ClusterCache()
    scheduler = _scheduler(metrics, cache)
    old = _pending("old", created="2026-01-01T00:00:00Z")
    new = _pending("new", created="2026-01-01T00:09:00Z")
    cache.upsert_pod(old, ours=True)
    cache.upsert_pod(new, ours=True)
    scheduler.export_backlog(old.creation_timestamp + 600)
    value = metrics.registry.get_sample_value
    assert value("metricsched_pending_pods") == 2
    assert value("metricsched_oldest_pending_pod_age_seconds") == 600


def test_the_oldest_pending_pod_age_is_zero_when_none_waits_and_walks_once_a_second() -> None:
    metrics, cache = observe.Metrics(), cache_mod.ClusterCache()
    scheduler = _scheduler(metrics, cache)
    pod = _pending("old", created="2026-01-01T00:00:00Z")
    cache.upsert_pod(pod, ours=True)
    now = pod.creation_timestamp + 60
    scheduler.export_backlog(now)
    cache.pending.clear()
    scheduler.export_backlog(now + 0.5)  # within the second: the count moves, the age waits
    value = metrics.registry.get_sample_value
    assert value("metricsched_pending_pods") == 0
    assert value("metricsched_oldest_pending_pod_age_seconds") == 60
    scheduler.export_backlog(now + 1.5)
    assert value("metricsched_oldest_pending_pod_age_seconds") == 0


def test_a_policy_on_its_fallback_is_exported_until_its_metrics_decide_again() -> None:
    metrics = observe.Metrics()
    scheduler = _scheduler(metrics, cache_mod.ClusterCache())
    value = metrics.registry.get_sample_value
    labels = {"policy": "shop/latency"}
    scheduler._track_fallback(_decision(policy="shop/latency", fallback_reason=""))
    assert value("metricsched_policy_fallback_active", labels) is None
    scheduler._track_fallback(_decision(policy="shop/latency", fallback_reason="stale metrics"))
    assert value("metricsched_policy_fallback_active", labels) == 1
    scheduler._track_fallback(_decision(policy="shop/latency", fallback_reason=""))
    assert value("metricsched_policy_fallback_active", labels) == 0
    metrics.forget_policy("shop/latency")
    assert value("metricsched_policy_fallback_active", labels) is None
