"""The API server itself fails: killed and restarted, or a watch that misses deletions.

Each test asserts the four invariants (Scenario.verify).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from typing import Any

import kubernetes

from tests.e2e.conftest import CLUSTER
from tests.faults import harness
from tests.faults.conftest import ScenarioFactory

DOWN_S = 10.0
STALL_S = 3.0
GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
GATE, GATE_LABEL = "gate", "gate"


def _gate(scheduler: str) -> dict[str, Any]:
    """A policy that holds its pods: its metric has no data and its fallback waits."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": GATE},
        "spec": {
            "schedulerName": scheduler,
            "podSelector": {"matchLabels": {GATE_LABEL: "yes"}},
            "metrics": [
                {
                    "name": "nothing",
                    "prometheus": {"query": "metricsched_no_such_series", "nodeLabel": "node"},
                    "goal": "Minimize",
                }
            ],
            "fallback": {"strategy": "Wait"},
        },
    }


def _finish(core: Any, namespace: str, name: str) -> None:
    core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Succeeded"}})


def _cluster(*args: str) -> None:
    subprocess.run([sys.executable, str(CLUSTER), *args], check=True)


def test_kube_apiserver_killed_and_back_after_ten_seconds_loses_no_pod(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("api-kill", "kube-apiserver SIGKILLed, restarted after 10 s")
    s.add_nodes(harness.nodes_for(350))
    s.start_replicas(2)
    s.create_pods("before", 100)
    s.wait_bound_count(100)
    s.create_pods("queued", 100)  # pending or in flight at the kill
    with s.fault("kube-apiserver down (kill -9, 10 s, start-up)"):
        _cluster("restart", "kube-apiserver", "--kill", f"--down-for={DOWN_S:g}")
    end = time.time()
    s.arrive("after", 150)
    s.verify(recover_from=end, outage=True)


def test_a_relist_after_a_stalled_watch_forgets_deleted_pods_and_nodes(
    scenario: ScenarioFactory,
) -> None:
    """Deletions the leader's watch missed, then a watch that must start over with a LIST.

    The leader's open connections (its watches among them) stall while pods and nodes
    are deleted; kube-apiserver is then restarted, so the leader's watches reconnect with
    a resourceVersion older than the new watch cache: 410 Gone, and kopf re-lists. A LIST
    says nothing about objects that vanished in the gap (no DELETED event): an operator
    that keeps them leaks the deleted pods' capacity (the new pods below need it and stay
    pending) and keeps the deleted nodes as candidates (pods bound to nodes that do not
    exist). Both count as lost pods.

    How the 410 is forced (measured on the pinned v1.35 kube-apiserver): a watch from a
    resourceVersion taken before a kube-apiserver restart gets "410 too old resource
    version"; compacting etcd alone does not, because watches are served from the watch
    cache; and kopf (1.45) resumes a watch broken by a connection error from its last
    resourceVersion, which replays the deletions instead of re-listing.

    The scenario records which replica bound the new pods: if the leader lost its Lease
    during the restart, the standby (which saw the deletions) did, and the leader's
    re-list was not what was tested.
    """
    s = scenario(
        "watch-relist",
        "Forced re-list: pods, nodes and a policy deleted, pods finished, while the leader's "
        "watch is stalled",
    )
    base = harness.nodes_for(200)
    s.add_nodes(base)
    s.start_replicas(2)
    first = s.create_pods("first", 200)
    s.wait_bound_count(200)
    spare = s.add_nodes(2)  # empty: the leader sees them before its watch stalls
    custom: Any = kubernetes.client.CustomObjectsApi(s.api)
    harness.retry(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, s.namespace, PLURAL, _gate(s.scheduler)
        )
    )
    time.sleep(2)
    leader = s.leader()
    holder = s.holder()
    freed, finished = first[::4], first[1::4]
    with s.fault(
        "leader's connections stalled; deletions, finished pods, a policy deleted; "
        "kube-apiserver restarted"
    ) as w:
        stalled = leader.proxy.stall_existing()
        s.delete_pods(freed)
        s.delete_nodes(spare)
        for name in finished:  # they end: their room is free (a LIST no longer has them)
            harness.retry(functools.partial(_finish, s.core, s.namespace, name))
        harness.retry(
            lambda: custom.delete_namespaced_custom_object(
                GROUP, VERSION, s.namespace, PLURAL, GATE
            )
        )
        time.sleep(STALL_S)
        # SIGKILL: back in ~3 s (a graceful stop can take 10 s, and a leader cut off
        # that long rightly steps down: the re-list to test is the leader's own).
        _cluster("restart", "kube-apiserver", "--kill")
        reset = leader.proxy.reset_all()
    s.extra["leader_kept_the_lease"] = s.holder() == holder
    s.extra["stalled_connections"] = stalled
    s.extra["reset_connections"] = reset
    s.deleted.update(finished)  # done: not expected to be bound any more
    # Fill what the deleted and finished pods freed back to ~95 %: a ghost pod keeps its
    # capacity. Half of the new pods match the deleted policy, which would hold them
    # (no data, fallback Wait) if it lived on as a ghost.
    fill = int(base * harness.NODE_CPU_M / harness.POD_CPU_M * harness.FILL) - 100
    s.create_pods("second", fill - fill // 2)
    s.create_pods("gated", fill // 2, labels={GATE_LABEL: "yes"})
    s.verify(recover_from=w.end)
