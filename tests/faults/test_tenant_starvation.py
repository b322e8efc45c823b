"""Tenant starvation: one namespace's slow queries do not starve another namespace's policy.

Namespace A (the scenario's) has 40 policies whose queries Prometheus answers in 2 s each
(a shim in front of the real Prometheus holds them: slow_query_shim below); namespace B
has one policy whose pods wait (fallback ``Wait``) unless its metric is fresh
(``maxMetricAge: 8s``). With one first-come-first-served set of 4 query slots, B's query
waited behind A's 40 every round (about 20 s) and B's pods waited with it (issue 24,
finding 9). Asserted beside the suite's invariants: B's query is answered at least every
10 s, every pod of B binds within 10 s of its creation, every replica's /healthz answers
each probe (one a second), and the leader does not change.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import itertools
import threading
import time
import urllib.parse
from typing import Any

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import apply_policy
from tests.faults import harness, huge_answer, test_prometheus
from tests.faults.conftest import ScenarioFactory

METRIC = "faults_tenant_load"
SLOW_POLICIES = 40
SLOW_S = 2.0
B_PODS = 30
MAX_GAP_S = 10.0


class SlowQueryShim(huge_answer.HugeAnswerShim):
    """Forwards every request to Prometheus; holds queries that carry ``slow!=`` for
    ``SLOW_S`` first, and notes when each query carrying ``tenant!="b"`` was answered."""

    def __init__(self, upstream_url: str) -> None:
        super().__init__(upstream_url, metric="no-metric-is-answered-huge-here", series=0)
        self.b_answers: list[float] = []

    def _handle(self, h: http.server.BaseHTTPRequestHandler, *, body: bytes) -> None:
        url = urllib.parse.urlsplit(h.path)
        params = urllib.parse.parse_qs(url.query)
        if h.command == "POST" and "form-urlencoded" in (h.headers.get("Content-Type") or ""):
            params |= urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        query = " ".join(params.get("query", []))
        if "slow!=" in query:
            time.sleep(SLOW_S)
        self._forward(h, body=body)
        if 'tenant!="b"' in query:
            with self._lock:
                self.b_answers.append(time.monotonic())


def _spec(scheduler: str, query: str, *, fallback: str, max_age: str) -> dict[str, Any]:
    return {
        "schedulerName": scheduler,
        "metrics": [
            {
                "name": "load",
                "prometheus": {"query": query, "nodeLabel": "node"},
                "weight": 1,
                "goal": "Minimize",
            }
        ],
        "maxMetricAge": max_age,
        "burstPenalty": 0,
        "fallback": {"strategy": fallback},
    }


class BindClock:
    """Polls a namespace's pods every 0.5 s from its start: when each was first seen bound."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self._core: Any = cluster.core
        self._namespace = namespace
        self.bound_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                listed = self._core.list_namespaced_pod(self._namespace, _request_timeout=10)
                now = time.monotonic()
                for pod in listed.items:
                    if pod.spec.node_name:
                        self.bound_at.setdefault(pod.metadata.name, now)

    def start(self) -> BindClock:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _create_b_pods(
    s: harness.Scenario, cluster: Cluster, namespace: str
) -> dict[str, float | None]:
    """B's pods, one a second; seconds from each one's creation to its bind (None: unbound
    60 s after the last was created)."""
    core: Any = cluster.core
    created: dict[str, float] = {}
    clock = BindClock(cluster, namespace).start()
    try:
        for i in range(B_PODS):
            body = s.pod_body(f"b-{i}")
            harness.retry(functools.partial(core.create_namespaced_pod, namespace, body))
            created[f"b-{i}"] = time.monotonic()
            time.sleep(1.0)
        with contextlib.suppress(AssertionError):  # reported by the caller, pod by pod
            wait_for(
                "B's pods bound",
                lambda: set(created) <= set(clock.bound_at),
                timeout=60,
                interval=1.0,
            )
    finally:
        clock.stop()
    latencies: dict[str, float | None] = {}
    for name, at in created.items():
        bound = clock.bound_at.get(name)
        latencies[name] = None if bound is None else bound - at
    return latencies


def test_one_namespaces_slow_queries_do_not_starve_another_namespaces_policy(
    scenario: ScenarioFactory, cluster: Cluster
) -> None:
    s = scenario("tenant-starve", "Tenant starvation: 40 slow queries of one namespace")
    s.add_nodes(harness.nodes_for(60))
    cluster.set_metric(METRIC, {node: 0.1 + 0.01 * i for i, node in enumerate(sorted(s.nodes))})
    shim = SlowQueryShim(cluster.prometheus_url)
    shim.start()
    other = f"{s.namespace}-b"
    core: Any = cluster.core
    harness.retry(lambda: core.create_namespace({"metadata": {"name": other}}))
    harness.retry(
        lambda: core.create_namespaced_service_account(other, {"metadata": {"name": "default"}})
    )
    try:
        s.start_replicas(2, prometheus_url=shim.url, refresh="3s")
        holder = s.holder()
        live = test_prometheus._Liveness(s)
        with live.running():
            for i in range(SLOW_POLICIES):  # A's first: first come first served puts B last
                query = f'max by (node) ({METRIC}{{slow!="{i}"}})'
                spec = _spec(s.scheduler, query, fallback="LeastAllocated", max_age="2m")
                apply_policy(cluster, s.namespace, f"slow-{i}", spec)
            b_query = f'max by (node) ({METRIC}{{tenant!="b"}})'
            b_spec = _spec(s.scheduler, b_query, fallback="Wait", max_age="8s")
            apply_policy(cluster, other, "only", b_spec)
            # B's query waits one turn per other waiting namespace, not behind A's 40: its
            # first answer comes within seconds (behind them, it did not in 60 s).
            wait_for("B's query answered", lambda: shim.b_answers, timeout=60)
            s.create_pods("a", 30)  # A's pods: the suite's invariants hold for them
            latencies = _create_b_pods(s, cluster, other)
        gaps = [b - a for a, b in itertools.pairwise(list(shim.b_answers))]
        s.extra["tenant_b_query_gap_max_s"] = round(max(gaps, default=0.0), 1)
        known = [v for v in latencies.values() if v is not None]
        s.extra["tenant_b_bind_latency_max_s"] = round(max(known, default=0.0), 1)
        s.verify()
        test_prometheus._assert_never_killed(s, live)  # /healthz never failed, no exit
        assert s.holder() == holder, "the load changed the leader"
        assert max(gaps) <= MAX_GAP_S, f"B's query waited {max(gaps):.1f}s between answers"
        slow = {n: v for n, v in latencies.items() if v is None or v > MAX_GAP_S}
        assert slow == {}, f"B's pods bound later than {MAX_GAP_S:g}s after creation: {slow}"
    finally:
        shim.close()
        with contextlib.suppress(Exception):
            core.delete_namespace(other)
