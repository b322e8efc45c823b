"""Many SchedulingPolicies at once with two replicas: status from the leader only, O(N).

Beside the four invariants: every successful ``schedulingpolicies/status`` write comes from
the replica holding the Lease (the audit rule of audit.py), the total number of status
writes stays linear (at most STATUS_WRITES_PER_POLICY per policy over the scenario), and no
policy's ``scheduledPods``/``fallbackPods`` counter ever goes down (the checker polls them).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import kubernetes

from tests.faults import audit, harness
from tests.faults.conftest import ScenarioFactory

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
POLICIES = 200
PODS = 40  # one pod pinned to each of the first PODS policies
STATUS_WRITES_PER_POLICY = 3
OBSERVE_S = 45.0
COUNTERS = ("scheduledPods", "fallbackPods")


def _policy(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "metrics": [
                {
                    "name": "latency",
                    "prometheus": {
                        "query": "max by (node) (node_latency_seconds)",
                        "nodeLabel": "node",
                    },
                    "weight": 1,
                    "goal": "Minimize",
                }
            ],
            "fallback": {"strategy": "LeastAllocated"},
        },
    }


class CounterWatch:
    """Polls every policy's counters; records each decrease (a reset by another writer)."""

    def __init__(self, custom: Any, namespace: str) -> None:
        self.custom = custom
        self.namespace = namespace
        self.last: dict[tuple[str, str], int] = {}
        self.decreases: list[str] = []
        self.with_status: set[str] = set()
        self.poll_errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counter-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                items = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, _request_timeout=10
                )["items"]
            except Exception:
                self.poll_errors += 1
                continue
            for p in items:
                name = p["metadata"]["name"]
                status = p.get("status") or {}
                if status.get("conditions"):
                    self.with_status.add(name)
                for c in COUNTERS:
                    if c not in status:
                        continue
                    v = int(status[c])
                    before = self.last.get((name, c))
                    if before is not None and v < before:
                        self.decreases.append(f"{name}.{c}: {before} -> {v}")
                    self.last[(name, c)] = v

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_two_hundred_policies_get_status_from_the_leader_only_with_linear_writes(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("ha-policies", "200 policies applied at once with 2 replicas")
    s.add_nodes(harness.nodes_for(PODS))
    s.start_replicas(2)
    custom: Any = kubernetes.client.CustomObjectsApi(s.api)
    counters = CounterWatch(custom, s.namespace)
    names = [f"p{i:03d}" for i in range(POLICIES)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda n: harness.retry(
                    lambda: custom.create_namespaced_custom_object(
                        GROUP, VERSION, s.namespace, PLURAL, _policy(n, s.scheduler)
                    )
                ),
                names,
            )
        )
    applied = time.time()
    for i in range(PODS):
        s.create_pods(f"pinned{i}", 1, labels={"metricsched.io/policy": names[i]})
    s.wait_bound_count(PODS)
    time.sleep(OBSERVE_S)  # refreshes go on: writes must not grow with them, nor counters reset
    counters.stop()
    entries = list(audit.since(audit.read(harness.STATE / "audit"), s.started))
    writes = audit.count(
        entries, resource="schedulingpolicies/status", users=s.users(), namespace=s.namespace
    )
    by_non_holder = audit.non_holder_writes(
        entries,
        lease_namespace=s.namespace,
        lease_name=s.lease,
        resource="schedulingpolicies/status",
        users=s.users(),
        namespace=s.namespace,
    )
    total = sum(writes.values())
    s.extra["status_writes"] = total
    s.extra["status_writes_by_replica"] = writes
    s.extra["status_writes_by_non_holder"] = len(by_non_holder)
    s.extra["counter_decreases"] = len(counters.decreases)
    s.extra["policies_with_status"] = len(counters.with_status)
    s.extra["counter_poll_errors"] = counters.poll_errors
    s.extra["observed_s"] = round(time.time() - applied, 1)
    failures = []
    if by_non_holder:
        failures.append(
            f"{len(by_non_holder)} status writes by a replica without the Lease, e.g. "
            + "; ".join(f"{v.entry.user} {v.entry.name}: {v.why}" for v in by_non_holder[:3])
        )
    if total > STATUS_WRITES_PER_POLICY * POLICIES:
        failures.append(
            f"{total} status writes for {POLICIES} policies (> {STATUS_WRITES_PER_POLICY} each)"
        )
    if counters.decreases:
        failures.append(f"counters went down: {counters.decreases[:5]}")
    if len(counters.with_status) < POLICIES:
        failures.append(f"only {len(counters.with_status)}/{POLICIES} policies got a status")
    s.extra["failures"] = failures
    s.verify()
