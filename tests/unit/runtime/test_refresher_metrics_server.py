"""The refresher and metricsServer metrics: one NodeMetrics LIST per round whatever the
number of policies and resources; values stored per metric; an absent or unavailable
metrics API reported on status and by event, and the policies fall back."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import kubernetes
from aiohttp import web

from metricsched.core import model, policy, promql_guard, scoring
from metricsched.edges import kube_http, metric_store, metrics_api, observe
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import refresher as refresher_mod
from metricsched.runtime import status as status_mod

from . import test_policy_lifecycle as lifecycle


class NoPrometheus:
    """A cluster without Prometheus: a query sent to it is a test failure."""

    guard = promql_guard.Guard(promql_guard.Rules())

    def query_nodes_report(self, query: str, **_: Any) -> prom.QueryReport:
        raise AssertionError(f"a Prometheus query was sent: {query}")


def usage_policy(name: str, *resources: str) -> model.Policy:
    return policy.policy_from_body(
        {
            "metadata": {"name": name, "namespace": "shop", "uid": name, "generation": 1},
            "spec": {
                "metrics": [
                    {
                        "name": resource,
                        "metricsServer": {"resource": resource},
                        "weight": 1,
                        "goal": "Minimize",
                        "threshold": {"max": 0.8},
                    }
                    for resource in resources
                ],
                "fallback": {"strategy": "LeastAllocated"},
            },
        }
    )


def node(name: str) -> model.NodeInfo:
    return model.NodeInfo(
        name=model.NodeName(name),
        labels={},
        annotations={},
        taints=(),
        unschedulable=False,
        allocatable=model.Resources(milli_cpu=4000, memory=8 << 30, pods=110),
        addresses=(),
    )


class Rig:
    """A refresher whose metrics API is a loopback server answering ``status``/``items``."""

    def __init__(self) -> None:
        self.cache = cache_mod.ClusterCache()
        self.store = metric_store.MetricStore()
        metrics = observe.Metrics()
        self.status = status_mod.PolicyStatus(
            api=None,  # type: ignore[arg-type]
            policies=lambda: self.cache.policies,
            nodes=self.cache.nodes,
            counters=lambda key: (0, 0),
            metrics=metrics,
            gates=gates_mod.Gates(),
            interval_s=15.0,
        )
        self.events: list[tuple[str, str]] = []
        self.lists = 0
        self.answer_status = 200
        self.items: list[dict[str, Any]] = []
        self.cache.upsert_node(node("n1"))
        self.cache.upsert_node(node("n2"))
        self._metrics = metrics

    def add(self, p: model.Policy) -> None:
        self.cache.upsert_policy(p)
        self.status.records[p.key] = status_mod.PolicyRecord()

    async def _list(self, request: web.Request) -> web.Response:
        self.lists += 1
        if self.answer_status != 200:
            return web.json_response(
                {"kind": "Status", "message": "service unavailable"}, status=self.answer_status
            )
        return web.json_response({"kind": "NodeMetricsList", "items": self.items})

    def round(self) -> None:
        async def main() -> None:
            app = web.Application()
            app.router.add_get(metrics_api.NODES_PATH, self._list)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            cfg = kubernetes.client.Configuration()
            cfg.host = f"http://127.0.0.1:{port}"
            api = kube_http.AsyncApi(kubernetes.client.ApiClient(cfg))
            refresher = refresher_mod.Refresher(
                source=NoPrometheus(),  # type: ignore[arg-type]
                store=self.store,
                cache=self.cache,
                queue=queue_mod.SchedulingQueue(),
                keep_result=lifecycle.owner(self.cache, self.status).refreshed,
                metrics=self._metrics,
                gates=gates_mod.Gates(),
                post_event=lambda key, **kw: self.events.append((kw["reason"], kw["message"])),
                interval_s=15.0,
                deadline_s=5.0,
                kube=api,
            )
            try:
                await refresher.refresh_once()
            finally:
                await api.close()
                await runner.cleanup()

        asyncio.run(main())


def sample(name: str, *, cpu: str, memory: str) -> dict[str, Any]:
    now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name},
        "timestamp": now,
        "window": "10s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def test_one_list_serves_every_metrics_server_metric_of_every_policy() -> None:
    rig = Rig()
    rig.add(usage_policy("web", "cpu", "memory"))
    rig.add(usage_policy("batch", "cpu"))
    rig.items = [sample("n1", cpu="3", memory="2Gi"), sample("n2", cpu="1", memory="4Gi")]
    rig.round()
    assert rig.lists == 1
    view = rig.store.view()
    web_cpu = view[model.MetricKey(model.PolicyKey("shop/web"), "cpu")]
    web_memory = view[model.MetricKey(model.PolicyKey("shop/web"), "memory")]
    batch_cpu = view[model.MetricKey(model.PolicyKey("shop/batch"), "cpu")]
    assert {n: s.value for n, s in web_cpu.values.items()} == {"n1": 0.75, "n2": 0.25}
    assert {n: s.value for n, s in web_memory.values.items()} == {"n1": 0.25, "n2": 0.5}
    assert batch_cpu.values == web_cpu.values
    result = rig.status.records[model.PolicyKey("shop/web")].metrics["cpu"]
    assert (result.nodes_reporting, result.nodes_missing, result.error) == (2, 0, None)
    assert [reason for reason, _ in rig.events] == ["MetricsRecovered"] * 3


def test_no_list_is_sent_while_no_policy_reads_metrics_server() -> None:
    rig = Rig()
    rig.round()
    assert rig.lists == 0


def test_an_unavailable_metrics_api_is_a_condition_an_event_and_a_fallback() -> None:
    rig = Rig()
    chosen = usage_policy("web", "cpu")
    rig.add(chosen)
    rig.answer_status = 503
    rig.round()
    result = rig.status.records[chosen.key].metrics["cpu"]
    assert result.error is model.QueryErrorKind.METRICS_API_UNAVAILABLE
    ((reason, message),) = rig.events
    assert reason == "MetricQueryFailed"
    assert message.startswith(
        "metric cpu: MetricsAPIUnavailable: 503: the metrics.k8s.io APIService is not available"
    )
    status = rig.status.status_of(chosen.key, rig.status.records[chosen.key])
    available = next(c for c in status["conditions"] if c["type"] == "MetricsAvailable")
    assert (available["status"], available["reason"]) == ("False", "MetricsAPIUnavailable")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MetricsUnavailable")
    # The cycle's fallback reads the same error: the policy's fallback decides.
    why = scoring.unreachable_error(policy=chosen, metrics=rig.store.view())
    assert why is not None and "503" in why


def test_a_missing_metrics_api_reads_as_metrics_server_not_installed() -> None:
    rig = Rig()
    rig.add(usage_policy("web", "memory"))
    rig.answer_status = 404
    rig.round()
    result = rig.status.records[model.PolicyKey("shop/web")].metrics["memory"]
    assert result.error is model.QueryErrorKind.METRICS_API_UNAVAILABLE
    assert "is metrics-server installed?" in result.error_message
