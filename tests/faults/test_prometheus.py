"""Prometheus faults: a slow, refusing or refused metric source never stalls or kills the
operator, and pods are still placed (by the policy's fallback) meanwhile.

Each scenario puts a fault proxy (proxy.py) between the replicas and Prometheus. Beside
the suite's invariants (0 pods lost, 0 overcommitted nodes, 0 Bindings by a non-holder,
no crash loop), the replicas' ``/healthz`` is probed every second through the scenario:
liveness reflects the event loop, never Prometheus's speed, so it must never fail (the
chart's probe would kill the pod after 3 failures 10 s apart), and no replica may exit.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import apply_policy, condition, get_policy
from tests.faults import harness
from tests.faults import proxy as proxy_mod
from tests.faults.conftest import ScenarioFactory

METRIC = "faults_prometheus_latency_seconds"
METRICS = 10  # one policy with ten distinct queries: ten requests per refresh
FAULT_S = 30.0


def _prometheus_proxy(cluster: Cluster) -> tuple[proxy_mod.FaultProxy, str]:
    url = urllib.parse.urlsplit(cluster.prometheus_url)
    px = proxy_mod.FaultProxy(url.hostname or "127.0.0.1", url.port or 80, seed=7).start()
    return px, f"http://127.0.0.1:{px.port}"


def _policy_spec(scheduler: str, *, metrics: int = METRICS) -> dict[str, Any]:
    return {
        "schedulerName": scheduler,  # the scenario's replicas serve it; no other install does
        "metrics": [
            {
                "name": f"m{i}",
                "prometheus": {"query": f"max by (node) ({METRIC}) * {i + 1}", "nodeLabel": "node"},
                "weight": 1,
                "goal": "Minimize",
            }
            for i in range(metrics)
        ],
        "maxMetricAge": "15s",
        "burstPenalty": 0,
        "fallback": {"strategy": "LeastAllocated"},
    }


class _Liveness:
    """Probes every replica's /healthz once a second; counts the failures."""

    def __init__(self, s: harness.Scenario) -> None:
        self._s = s
        self.probes = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for rep in self._s.replicas:
                self.probes += 1
                url = f"http://127.0.0.1:{rep.health_port}/healthz"
                try:
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        if answer.status != 200:
                            self.failures.append(f"{rep.name}: HTTP {answer.status}")
                except (urllib.error.URLError, OSError) as e:
                    self.failures.append(f"{rep.name}: {e}")

    @contextmanager
    def running(self) -> Iterator[_Liveness]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=5)


def _ready(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return condition(get_policy(cluster, namespace, "latency"), "Ready")


def _start(
    s: harness.Scenario, cluster: Cluster, *, pods: int, extra: list[str] | None = None
) -> proxy_mod.FaultProxy:
    s.add_nodes(harness.nodes_for(pods))
    cluster.set_metric(METRIC, {node: 0.1 + 0.01 * i for i, node in enumerate(sorted(s.nodes))})
    px, url = _prometheus_proxy(cluster)
    s.start_replicas(2, prometheus_url=url, refresh="3s", extra=extra)
    apply_policy(cluster, s.namespace, "latency", _policy_spec(s.scheduler))
    return px


def _assert_never_killed(s: harness.Scenario, live: _Liveness) -> None:
    assert live.probes > 0
    assert live.failures == [], live.failures[:5]
    assert [(r.name, r.exits) for r in s.replicas if r.exits] == []


def test_a_slow_prometheus_never_fails_liveness_and_pods_are_placed_by_fallback(
    scenario: ScenarioFactory, cluster: Cluster
) -> None:
    s = scenario("prom-slow", "Prometheus answers after 20 s, a policy with 10 metrics")
    px = _start(s, cluster, pods=150)
    wait_for(
        "policy Ready", lambda: _ready(cluster, s.namespace).get("status") == "True", timeout=60
    )
    s.create_pods("before", 50)
    s.wait_bound_count(50)
    live = _Liveness(s)
    with live.running():
        with s.fault("Prometheus 10 s per chunk each way") as w:
            px.set_mode("delay", delay_ms=10_000)
            time.sleep(20)  # the values age past maxMetricAge (15 s)
            s.create_pods("during", 50)
            s.wait_bound_count(100, timeout=120)
            time.sleep(FAULT_S - 20)
        px.set_mode("pass")
        recovered = wait_for(
            "policy Ready again",
            lambda: _ready(cluster, s.namespace).get("status") == "True" and time.time(),
            timeout=120,
        )
        s.extra["metrics_recovered_s"] = round(recovered - (w.end or recovered), 1)
        s.create_pods("after", 50)
        s.verify(recover_from=w.end)
    _assert_never_killed(s, live)
    status = get_policy(cluster, s.namespace, "latency")["status"]
    assert status["fallbackPods"] >= 1  # the pods of the fault went by the fallback


def test_a_prometheus_refusing_then_returning_costs_no_pod_and_the_policy_recovers(
    scenario: ScenarioFactory, cluster: Cluster
) -> None:
    s = scenario("prom-refuse", "Prometheus refuses connections for 30 s, then returns")
    px = _start(s, cluster, pods=150)
    wait_for(
        "policy Ready", lambda: _ready(cluster, s.namespace).get("status") == "True", timeout=60
    )
    live = _Liveness(s)
    with live.running():
        with s.fault("Prometheus refusing") as w:
            px.set_mode("refuse")
            wait_for(
                "policy not Ready",
                lambda: _ready(cluster, s.namespace).get("status") == "False",
                timeout=60,
            )
            s.create_pods("during", 75)
            s.wait_bound_count(75, timeout=120)
        px.set_mode("pass")
        wait_for(
            "policy Ready again",
            lambda: _ready(cluster, s.namespace).get("status") == "True",
            timeout=120,
        )
        s.create_pods("after", 75)
        s.verify(recover_from=w.end)
    _assert_never_killed(s, live)
    reasons = {
        e.reason
        for e in s.core.list_namespaced_event(
            s.namespace, field_selector="involvedObject.name=latency"
        ).items
    }
    assert {"MetricQueryFailed", "MetricsRecovered"} <= reasons


def test_a_query_outside_the_allow_list_is_never_sent_and_pods_are_still_placed(
    scenario: ScenarioFactory, cluster: Cluster
) -> None:
    s = scenario("prom-refused-query", "A policy's query outside the admin's allow-list")
    px = _start(s, cluster, pods=50, extra=["--query-allowed-metric=faults_allowed_only"])
    ready = wait_for(
        "policy refused",
        lambda: (c := _ready(cluster, s.namespace)).get("status") == "False" and c,
        timeout=60,
    )
    assert ready["reason"] == "BadQuery", ready
    s.create_pods("pods", 50)
    s.verify()
    # Every byte to Prometheus goes through this proxy: the refused query never left.
    assert px.counters.accepted == 0
    assert px.counters.chunks_forwarded == 0
