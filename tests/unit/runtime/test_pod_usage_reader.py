"""The per-pod usage reader: while a metric's estimate is Measured, each round reads the
running pods' usage once (never a tenant's query, outside the tenants' slots), and the
answer rides on every Measured metric's series to the cycle; an error keeps the last."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from metricsched.core import model, policy
from metricsched.edges import observe
from metricsched.edges import prometheus as prom
from metricsched.runtime import pod_usage
from tests.unit.conftest import build_pod_info
from tests.unit.runtime import test_refresher_rounds as rounds


class UsageSource(rounds.FakeSource):
    """Answers the per-pod queries too: ``cpu`` in cores and ``memory`` in bytes by pod."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu = {"shop/web-1": 0.4}
        self.memory = {"shop/web-1": 300.0 * 2**20}
        self.failing = False
        self.pod_queries: list[str] = []

    def query_by_pod(self, query: str, **_: Any) -> dict[str, float]:
        self.pod_queries.append(query)
        if self.failing:
            raise prom.PodQueryError("Unreachable: connection refused")
        return dict(self.cpu if "cpu" in query else self.memory)


def _threshold_policy(name: str, query: str) -> model.Policy:
    return policy.policy_from_body(
        {
            "metadata": {"name": name, "namespace": "shop", "uid": name, "generation": 1},
            "spec": {
                "metrics": [
                    {
                        "name": "m",
                        "prometheus": {"query": query, "nodeLabel": "node"},
                        "threshold": {"max": 0.8},
                    }
                ]
            },
        }
    )


def _rig() -> tuple[rounds.Rig, UsageSource]:
    rig = rounds.Rig()
    source = UsageSource()
    rig.source = source
    rig.refresher._source = source  # type: ignore[assignment]
    rig.refresher._pod_usage = pod_usage.PodUsageReader(
        source=source,  # type: ignore[arg-type]
        queries=pod_usage.Queries(cpu="cpu_query", memory="memory_query", max_pods=1000),
        cache=rig.cache,
        store=rig.store,
        queue=rig.queue,
        metrics=observe.Metrics(),
    )
    node = model.NodeInfo(
        name=model.NodeName("n1"),
        labels={},
        annotations={},
        taints=(),
        unschedulable=False,
        allocatable=model.Resources(milli_cpu=4000, memory=2**34, pods=110),
        addresses=(),
    )
    rig.cache.upsert_node(node)
    pod = dataclasses.replace(
        build_pod_info("web-1", labels={"app": "web"}),
        node_name="n1",
        phase="Running",
        bound_at=1.0,  # long settled
        owner="StatefulSet/web",
    )
    rig.cache.upsert_pod(pod, ours=False)
    for name, query in (("cpu", "instance:node_cpu_utilisation:rate5m"), ("lat", "latency")):
        p = _threshold_policy(name, query)
        rig.cache.upsert_policy(p)
        rig.status.records[p.key] = rounds.status_mod.PolicyRecord()
    return rig, source


def _refresh(rig: rounds.Rig) -> None:
    asyncio.run(rig.refresher.refresh_once())


def _usage(rig: rounds.Rig, name: str) -> model.PodUsage | None:
    series = rig.store.view().get(model.MetricKey(model.PolicyKey(f"shop/{name}"), "m"))
    return None if series is None else series.usage


def test_a_round_reads_pod_usage_once_onto_the_measured_metrics_only() -> None:
    rig, source = _rig()
    _refresh(rig)
    assert source.pod_queries == ["cpu_query", "memory_query"]
    found = _usage(rig, "cpu")
    assert found is not None
    assert found.cpu == {"shop/web-1": 400.0}  # millicores
    assert found.workload_cpu == {"shop/StatefulSet/web": 400.0}
    assert _usage(rig, "lat") is None  # a latency threshold counts no pod usage


def test_no_measured_metric_no_pod_query() -> None:
    rig, source = _rig()
    rig.cache.remove_policy(model.PolicyKey("shop/cpu"))
    _refresh(rig)
    assert source.pod_queries == []


def test_a_failing_answer_keeps_the_last_one() -> None:
    rig, source = _rig()
    _refresh(rig)
    first = _usage(rig, "cpu")
    source.failing = True
    _refresh(rig)
    assert _usage(rig, "cpu") is first
