"""A large unschedulable backlog must not starve the pods that can be scheduled.

2,000 pods that fit no node wait in backoff while every node sends a heartbeat each
second (a Node update, as a kubelet's status would be): a queue that sends every backing-
off pod back to active on any Node update spends its cycles on them, FIFO, ahead of the
schedulable pods that keep arriving. The invariant: every schedulable pod ends bound.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from typing import Any

from tests.faults import harness
from tests.faults.conftest import ScenarioFactory

UNSCHEDULABLE = 2000
SCHEDULABLE = 300
WAVES = 10
HEARTBEAT_S = 1.0
# A schedulable pod still pending this long after it arrived, with the API healthy, is
# starved: counted as lost. Generous: the whole backlog is evaluated many times over.
STARVED_S = 300.0


def _heartbeats(s: harness.Scenario, stop: threading.Event) -> int:
    """Patch every node of the scenario once per HEARTBEAT_S; returns how many patches."""
    n = 0
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        while not stop.wait(HEARTBEAT_S):
            body = {"metadata": {"annotations": {"metricsched.io/heartbeat": str(n)}}}

            def patch(node: str, body: dict[str, Any] = body) -> None:
                with contextlib.suppress(Exception):
                    s.core.patch_node(node, body, _request_timeout=5)

            list(pool.map(patch, list(s.nodes)))
            n += len(s.nodes)
    return n


def test_schedulable_pods_bind_behind_two_thousand_unschedulable_ones_with_node_heartbeats(
    scenario: ScenarioFactory,
) -> None:
    s = scenario(
        "load-backlog",
        "2,000 unschedulable pods, node heartbeats each second, schedulable pods arriving",
    )
    s.add_nodes(harness.nodes_for(SCHEDULABLE))
    s.start_replicas(2)
    stop = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as beat:
        beats = beat.submit(_heartbeats, s, stop)
        try:
            # No fault window: the API stays healthy, so no replica exit is explained.
            s.create_pods(
                "stuck", UNSCHEDULABLE, cpu_m=2 * harness.NODE_CPU_M, unschedulable=True, threads=16
            )
            arriving = time.time()
            for _ in range(WAVES):
                s.create_pods("fits", SCHEDULABLE // WAVES)
                time.sleep(1.0)
            s.extra["backlog"] = f"{UNSCHEDULABLE} unschedulable pods, heartbeats until the end"
            s.verify(recover_from=arriving, settle_s=STARVED_S)  # heartbeats go on meanwhile
        finally:
            stop.set()
            beats.result()
