"""Prometheus faults: a slow, refusing, refused or oversized metric source never stalls or
kills the operator, and pods are still placed (by the policy's fallback) meanwhile.

Each scenario puts a fault proxy (proxy.py) between the replicas and Prometheus (the
oversized one also a shim that answers one metric with 500,000 series, huge_answer.py). Beside
the suite's invariants (0 pods lost, 0 overcommitted nodes, 0 Bindings by a non-holder,
no crash loop), the replicas' ``/healthz`` is probed every second through the scenario:
liveness reflects the event loop, never Prometheus's speed, so it must never fail (the
chart's probe would kill the pod after 3 failures 10 s apart), and no replica may exit.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from metricsched.core import model
from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import apply_policy, condition, get_policy
from tests.faults import harness, huge_answer, memcg
from tests.faults import proxy as proxy_mod
from tests.faults.conftest import ScenarioFactory

METRIC = "faults_prometheus_latency_seconds"
METRICS = 10  # one policy with ten distinct queries: ten requests per refresh
FAULT_S = 30.0


def _prometheus_proxy(prometheus_url: str) -> tuple[proxy_mod.FaultProxy, str]:
    url = urllib.parse.urlsplit(prometheus_url)
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
    s: harness.Scenario,
    cluster: Cluster,
    *,
    pods: int,
    extra: list[str] | None = None,
    prometheus_url: str | None = None,
    memory_limit_bytes: int | None = None,
) -> proxy_mod.FaultProxy:
    """Nodes, METRIC for them, 2 replicas behind a proxy to ``prometheus_url`` (default:
    the real Prometheus), and the "latency" policy."""
    s.add_nodes(harness.nodes_for(pods))
    cluster.set_metric(METRIC, {node: 0.1 + 0.01 * i for i, node in enumerate(sorted(s.nodes))})
    px, url = _prometheus_proxy(prometheus_url or cluster.prometheus_url)
    s.start_replicas(
        2, prometheus_url=url, refresh="3s", extra=extra, memory_limit_bytes=memory_limit_bytes
    )
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


HUGE_METRIC = "faults_huge_metric"
HUGE_SERIES = 500_000
HUGE_ANSWERS = 3  # answers served before memory is read
MiB = 1024 * 1024
MEMORY_LIMIT = 512 * MiB  # the chart's resources.limits.memory


def _huge_policy_spec(scheduler: str) -> dict[str, Any]:
    """One metric whose query lacks its ``by (node)``: every series of the metric."""
    return {
        "schedulerName": scheduler,
        "metrics": [
            {
                "name": "load",
                "prometheus": {"query": HUGE_METRIC, "nodeLabel": "node"},
                "weight": 1,
                "goal": "Minimize",
            }
        ],
        "maxMetricAge": "15s",
        "burstPenalty": 0,
        "fallback": {"strategy": "LeastAllocated"},
    }


class _StaysReady:
    """Reads the "latency" policy's Ready condition every 2 s; keeps what was not True."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self._cluster = cluster
        self._namespace = namespace
        self.polls = 0
        self.errors = 0  # API reads that failed (the API is not under fault here)
        self.not_ready: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            try:
                ready = _ready(self._cluster, self._namespace)
            except Exception:
                self.errors += 1
                continue
            self.polls += 1
            if ready.get("status") != "True":
                self.not_ready.append(ready)

    @contextmanager
    def running(self) -> Iterator[_StaysReady]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=10)


def test_a_500k_series_answer_stays_under_512_mib_and_other_policies_stay_ready(
    scenario: ScenarioFactory, cluster: Cluster
) -> None:
    s = scenario("prom-huge", "Prometheus answers one policy's query with 500,000 series")
    # The shim answers HUGE_METRIC with series naming the scenario's nodes (read at each
    # answer: _start adds them) among 5,000 fake ones; the rest goes to Prometheus.
    shim = huge_answer.HugeAnswerShim(
        cluster.prometheus_url, metric=HUGE_METRIC, series=HUGE_SERIES, nodes=s.nodes
    ).start()
    try:
        _start(s, cluster, pods=100, prometheus_url=shim.url, memory_limit_bytes=MEMORY_LIMIT)
        wait_for(
            "policy Ready", lambda: _ready(cluster, s.namespace).get("status") == "True", timeout=60
        )
        live = _Liveness(s)
        stays = _StaysReady(cluster, s.namespace)
        with live.running(), stays.running():
            apply_policy(cluster, s.namespace, "huge", _huge_policy_spec(s.scheduler))
            capped = wait_for(
                "the huge policy to report the cap",
                lambda: (
                    (
                        c := condition(get_policy(cluster, s.namespace, "huge"), "MetricsAvailable")
                    ).get("reason")
                    == model.QueryErrorKind.RESULT_TOO_LARGE.value
                    and c
                ),
                timeout=60,
            )
            huge_ready = condition(get_policy(cluster, s.namespace, "huge"), "Ready")
            wait_for(
                f"{HUGE_ANSWERS} huge answers served",
                lambda: shim.counters.huge_started >= HUGE_ANSWERS,
                timeout=60,
            )
            pinned = "metricsched.io/policy"
            s.create_pods("huge", 50, labels={pinned: "huge"})
            s.create_pods("latency", 50, labels={pinned: "latency"})
            s.wait_bound_count(100)
            time.sleep(10)  # more refreshes, more huge answers, more Ready polls
            leader = s.leader()
            hwm = {r.name: memcg.vm_hwm_bytes(r.pid) if r.pid else None for r in s.replicas}
            cgroups = {r.name: r.cgroup for r in s.replicas}
            enforced = all(cg is not None for cg in cgroups.values())
            oom_kills = {n: cg.oom_kills() for n, cg in cgroups.items() if cg is not None}
            s.extra["memory_limit"] = (
                f"{MEMORY_LIMIT // MiB} MiB per replica, enforced by a memory cgroup "
                f"({'v2' if all(cg.v2 for cg in cgroups.values() if cg) else 'v1'})"
                if enforced
                else f"{MEMORY_LIMIT // MiB} MiB, not enforced (no usable memory cgroup): "
                "peak RSS checked only"
            )
            s.extra["leader_peak_rss_mib"] = _mib(hwm.get(leader.name))
            s.extra["peak_rss_mib"] = {n: _mib(v) for n, v in hwm.items()}
            s.extra["cgroup_peak_mib"] = {
                n: _mib(cg.peak_bytes()) for n, cg in cgroups.items() if cg is not None
            }
            s.extra["oom_kills"] = oom_kills
            s.extra["huge_answers"] = dataclasses.asdict(shim.counters)
            s.extra["latency_ready_polls"] = f"{stays.polls} ({len(stays.not_ready)} not True)"
            s.extra["huge_condition"] = f"{capped['reason']}: {capped['message']}"
            failures = []
            if any(v is None or v >= MEMORY_LIMIT for v in hwm.values()):
                failures.append(f"peak RSS (VmHWM) not under {MEMORY_LIMIT // MiB} MiB: {hwm}")
            if any(oom_kills.values()):
                failures.append(f"OOM kills: {oom_kills}")
            if stays.not_ready:
                failures.append(f"the latency policy was not Ready: {stays.not_ready[:3]}")
            s.extra["failures"] = failures
            s.verify()
    finally:
        shim.close()
    _assert_never_killed(s, live)
    assert shim.counters.huge_started >= HUGE_ANSWERS, shim.counters
    # The operator stopped reading at its cap: no answer was read to its end.
    assert shim.counters.huge_finished == 0, shim.counters
    assert stays.polls >= 5, (stays.polls, stays.errors)
    assert capped["status"] == "False", capped
    assert "larger than the operator's cap" in capped["message"], capped
    assert huge_ready.get("status") == "False", huge_ready
    assert model.QueryErrorKind.RESULT_TOO_LARGE.value in huge_ready.get("message", "")
    assert get_policy(cluster, s.namespace, "huge")["status"]["fallbackPods"] >= 1


def _mib(v: int | None) -> float | None:
    return None if v is None else round(v / MiB, 1)
