"""One pod anywhere never stops scheduling for everyone (issue 28, N1).

Pods bound by another scheduler (their ``spec.nodeName`` set at creation, as
default-scheduler's Binding would) carry a ``metricsched.io/decision`` annotation 3,000
arrays deep: any pod author can write one, and the informer reads every bound pod of the
cluster. Before the fix it ended the Pod reflector on every LIST: 0 of 50 pods bound,
/readyz 200 through the halt, and a restarted operator never became Ready.

Here the poison pods exist before the replicas start (``start_replicas`` waits for a
leader and for every replica's /readyz). Then: 50 of our pods bind within
``FIRST_BIND_S``; the leader is killed, and the pods created after it bind within
``RESTART_BIND_S`` of the kill (the new leader synced through the same pods). The
poison pods' requests count on their node (no overcommit), besides the four invariants.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from tests.faults import harness
from tests.faults.conftest import ScenarioFactory

POISON = "[" * 3000
POISON_PODS = 2
FIRST = 50
AFTER_RESTART = 20
FIRST_BIND_S = 30.0
RESTART_BIND_S = 60.0


def _poison_pod(s: harness.Scenario, name: str, node: str) -> dict[str, Any]:
    body = s.pod_body(name)
    body["metadata"]["annotations"] = {"metricsched.io/decision": POISON}
    body["spec"]["schedulerName"] = "default-scheduler"
    body["spec"]["nodeName"] = node
    body["spec"].pop("nodeSelector")
    return body


def test_a_poison_annotation_on_another_schedulers_pod_stops_nothing(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("poison-annotation", "Pods of another scheduler with a 3,000-deep decision")
    s.add_nodes(harness.nodes_for(FIRST + AFTER_RESTART + POISON_PODS))
    for i in range(POISON_PODS):
        body = _poison_pod(s, f"poison-{i}", s.nodes[i % len(s.nodes)])
        harness.retry(functools.partial(s.core.create_namespaced_pod, s.namespace, body))
    started = time.monotonic()
    s.start_replicas(2)  # waits for a leader and for every replica's /readyz
    s.extra["ready_with_poison_s"] = round(time.monotonic() - started, 1)
    failures: list[str] = []

    first = s.create_pods("ours", FIRST)
    if not s.wait_bound_count(FIRST, timeout=FIRST_BIND_S):
        failures.append(f"{len(s.watch.bound_at)} of {FIRST} pods bound in {FIRST_BIND_S:g} s")
    s.extra["first_bound"] = len(set(first) & set(s.watch.bound_at))

    holder = s.holder()
    killed_replica = s.leader()
    with s.fault("the leader killed while the poison pods exist") as window:
        killed_replica.sigkill()
        s.lost_leader(time.time(), holder)
        killed = time.monotonic()
        later = s.create_pods("later", AFTER_RESTART)
        bound = s.wait_bound_count(FIRST + AFTER_RESTART, timeout=RESTART_BIND_S)
        s.extra["after_restart_bound_s"] = round(time.monotonic() - killed, 1)
        ready_again = harness.wait_until(killed_replica.ready, timeout=RESTART_BIND_S)
    if not bound:
        failures.append(
            f"{len(set(later) & set(s.watch.bound_at))} of {AFTER_RESTART} pods bound within "
            f"{RESTART_BIND_S:g} s of the leader's kill"
        )
    if not ready_again:
        failures.append(f"the restarted replica was not Ready within {RESTART_BIND_S:g} s")
    s.extra["failures"] = failures
    s.verify(recover_from=window.end)
