"""What one tenant can write does not stop scheduling for the others (issue 24).

One namespace's hostile input, with the admin's query rules on: a policy whose query is
nested hundreds deep (the guard's walk was cubic in depth, 40 s of loop per round), pods
with 1,000 required anti-affinity terms and pods with 10,000 tolerations (seconds of
loop per attempt at a few hundred nodes). Meanwhile ordinary pods arrive in waves.

Beside the four invariants (Scenario.verify): the ordinary pods keep binding with no gap
longer than ``MAX_GAP_S`` while any of them waits; the Lease stays with the same replica
(no leader change caused by load); no replica's ``/healthz`` fails three probes in a
row; each replica's RSS stays under ``MAX_RSS_MIB``. The heavy pods are unschedulable by
design: each gets a FailedScheduling naming the cap it exceeds (core/pod_budget.py).
"""

from __future__ import annotations

import functools
import itertools
import threading
import urllib.request
from typing import Any

import kubernetes

from tests.faults import harness, replicas
from tests.faults.conftest import ScenarioFactory

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
MAX_GAP_S = 10.0
MAX_RSS_MIB = 400.0
DEPTH = 300  # abs(abs(...)): a 2,400-character query


def _hostile_policy(scheduler: str) -> dict[str, Any]:
    query = "abs(" * DEPTH + "node_latency_seconds" + ")" * DEPTH
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "hostile"},
        "spec": {
            "schedulerName": scheduler,
            "podSelector": {"matchLabels": {"tenant": "hostile"}},
            "metrics": [
                {
                    "name": "deep",
                    "prometheus": {"query": query, "nodeLabel": "node"},
                    "goal": "Minimize",
                }
            ],
            "fallback": {"strategy": "LeastAllocated"},
        },
    }


def _heavy(s: harness.Scenario, name: str, *, kind: str) -> dict[str, Any]:
    body = s.pod_body(name, labels={"tenant": "hostile", "app": name})
    spec = body["spec"]
    if kind == "anti-affinity":
        terms = [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": f"k{i}", "operator": "In", "values": [f"v{j}" for j in range(4)]}
                    ]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
            for i in range(1000)
        ]
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        }
    else:
        spec["tolerations"] = [
            {"key": f"t{i}", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
            for i in range(10_000)
        ]
    return body


def _create(s: harness.Scenario, body: dict[str, Any]) -> None:
    s.core.create_namespaced_pod(s.namespace, body)


class Probes:
    """``/healthz`` of every replica every ``interval_s`` (2-s timeout, as the chart's
    livenessProbe): the longest run of failures each, and how many probes and failures."""

    def __init__(self, reps: list[replicas.Replica], *, interval_s: float = 1.0) -> None:
        self.reps = reps
        self.worst = {r.name: 0 for r in reps}
        self.made = 0
        self.failed = 0
        self._interval_s = interval_s
        self._run = {r.name: 0 for r in reps}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            for r in self.reps:
                ok = False
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{r.health_port}/healthz", timeout=2
                    ) as answer:
                        ok = answer.status == 200
                except OSError:
                    ok = False
                self.made += 1
                self.failed += not ok
                self._run[r.name] = 0 if ok else self._run[r.name] + 1
                self.worst[r.name] = max(self.worst[r.name], self._run[r.name])

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.worst


def _gaps(bound_at: dict[str, float], names: list[str]) -> float:
    """The longest time between consecutive binds of ``names`` (from the first)."""
    times = sorted(bound_at[n] for n in names if n in bound_at)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def test_a_hostile_tenant_does_not_stall_the_others(scenario: ScenarioFactory) -> None:
    s = scenario("tenant-hostile", "One tenant's hostile policy and heavy pods, query rules on")
    s.add_nodes(harness.nodes_for(300))
    s.start_replicas(2, extra=["--query-allowed-metric=node_latency_seconds"])
    holder = s.holder()
    probes = Probes(s.replicas)
    custom: Any = kubernetes.client.CustomObjectsApi(s.api)
    harness.retry(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, s.namespace, PLURAL, _hostile_policy(s.scheduler)
        )
    )
    heavy = [f"heavy-aa-{i}" for i in range(2)] + [f"heavy-tol-{i}" for i in range(2)]
    with s.fault("a hostile policy and heavy pods in the scheduler's namespace") as w:
        for name in heavy:
            kind = "anti-affinity" if "-aa-" in name else "tolerations"
            harness.retry(functools.partial(_create, s, _heavy(s, name, kind=kind)))
            s.created.append(name)
            s.unschedulable.add(name)
        start = len(s.created)
        s.arrive("ordinary", 250, over_s=40.0)
        ordinary = s.created[start:]
        s.wait_bound_count(len(ordinary))
    worst = probes.stop()
    gap = _gaps(s.watch.bound_at, ordinary)
    rss = {r.name: r.rss_mib() for r in s.replicas}
    s.extra["longest_gap_between_binds_s"] = round(gap, 1)
    s.extra["health_failures_in_a_row"] = worst
    s.extra["rss_mib"] = rss
    s.extra["leader_kept_the_lease"] = s.holder() == holder
    failures = []
    if gap > MAX_GAP_S:
        failures.append(f"ordinary pods waited {gap:.1f} s between binds (> {MAX_GAP_S:g})")
    if s.holder() != holder:
        failures.append(f"the Lease moved from {holder} to {s.holder()} under load")
    if any(n >= 3 for n in worst.values()):
        failures.append(f"/healthz failed 3 probes in a row: {worst}")
    if any(v is not None and v > MAX_RSS_MIB for v in rss.values()):
        failures.append(f"RSS above {MAX_RSS_MIB:g} MiB: {rss}")
    s.extra["failures"] = failures
    s.verify(recover_from=w.end)
    events = s.core.list_namespaced_event(s.namespace, field_selector="reason=FailedScheduling")
    refused = {e.involved_object.name for e in events.items if e.involved_object.name in heavy}
    assert refused == set(heavy), f"heavy pods without a FailedScheduling: {set(heavy) - refused}"
