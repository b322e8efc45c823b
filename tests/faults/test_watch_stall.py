"""A watch that stalls silently, with no API server restart, while another scheduler
fills nodes (issue 28, N3).

The leader's fault proxy freezes the server→client side of its long-lived streams (its
watches: ``FaultProxy.stall_streams``): no close, no reset, the bytes simply stop, while
the Lease renewal, LISTs and Bindings, which write requests, still pass. Then "another
scheduler" (the harness, binding pods at creation with ``spec.nodeName``) fills the
target nodes to 90-98 % of their cpu, and pods of ours keep arriving, each too large for
what a target node has left. The operator can learn of the other scheduler's pods only
through its watch of bound pods, so until it notices the stall its cache shows the
target nodes empty: LeastAllocated prefers them over the half-full spare nodes, where
our pods belong. Every pod of ours bound to a target node after the fill is an
overcommit, which the suite's checker counts.

Invariants, besides the suite's usual four (Scenario.verify): no overcommitted node, and
the leader re-syncs its bound pods within ``RESYNC_BOUND_S`` of the stall: its
``Pod: watch silent ... stalled; listing again`` log line, then ``cluster state listed``
(the re-list applied). The watchdog's bound is 90 s of silence (``IDLE_TIMEOUT_S`` in
edges/informer.py, commit 8fbc370), counted from the watch's last line, which came at
or before the stall (a watch re-opened just before it is frozen once quiet for
``QUIET_S``, having delivered nothing since its start). Before the watchdog a stalled
watch went unnoticed for 330-630 s.

The scenario also fails, as not testing what it means to, if the proxy froze no stream
or the Lease moved (a new leader has a fresh cache).
"""

from __future__ import annotations

import math
import time
from typing import Any

from tests.faults import harness, replicas
from tests.faults.conftest import ScenarioFactory

# The watchdog's documented bound (edges/informer.py IDLE_TIMEOUT_S), written here rather
# than imported: the scenario must also run against an operator that predates it.
WATCHDOG_S = 90.0
LIST_S = 10.0  # one LIST of this cluster's bound pods and its apply, with room to spare
RESYNC_BOUND_S = WATCHDOG_S + LIST_S
QUIET_S = 5.0  # a connection whose client wrote nothing for this long is a stream
# The operator's Pod and Node watches end at the server every 30-40 s and are re-opened
# (edges/informer.py LIVENESS_WATCH_S): one re-opened just before the stall is not quiet
# yet, so the proxy keeps freezing quiet streams for the longest watch and QUIET_S more.
KEEP_STALLING_S = 40.0 + QUIET_S
SETTLE_S = 10.0  # before the stall: the pre-fill delivered, every watch quiet
TARGET_FILLS = (0.90, 0.92, 0.94, 0.96, 0.98)  # of each target node's cpu, by the other
OTHER_PODS_PER_NODE = 4
SPARE_FILL = 0.5  # the spare nodes, filled before the stall (the operator sees it)
POD_CPU_M = 250  # ours: more than any target node has left (40-200m)
ARRIVE_EVERY_S = 4.0
ARRIVE_FOR_S = RESYNC_BOUND_S + 25.0  # pods arrive through the stall and after the re-sync
FIRST_ARRIVAL_S = 5.0


def _stall_lines(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "stalled; listing again" in str(r.get("message", ""))]


def test_a_silently_stalled_watch_is_relisted_and_no_node_is_overcommitted(
    scenario: ScenarioFactory,
) -> None:
    s = scenario(
        "watch-stall",
        "The leader's watches stalled silently (no close, no API restart) while another "
        "scheduler fills nodes to 90-98 %",
    )
    ours = math.ceil((ARRIVE_FOR_S - FIRST_ARRIVAL_S) / ARRIVE_EVERY_S)
    per_spare = int(harness.NODE_CPU_M * (1 - SPARE_FILL)) // POD_CPU_M
    spares_needed = math.ceil(ours / per_spare) + 1
    nodes = s.add_nodes(len(TARGET_FILLS) + spares_needed)
    targets, spares = nodes[: len(TARGET_FILLS)], nodes[len(TARGET_FILLS) :]
    spare_pod_m = int(harness.NODE_CPU_M * SPARE_FILL) // OTHER_PODS_PER_NODE
    for i, node in enumerate(spares):
        for j in range(OTHER_PODS_PER_NODE):
            s.bind_elsewhere(f"other-spare-{i}-{j}", node, cpu_m=spare_pod_m)
    s.start_replicas(2)  # waits for a leader and every replica's /readyz (synced)
    time.sleep(SETTLE_S)
    leader = s.leader()
    holder = s.holder()
    failures: list[str] = []

    with s.fault("the leader's watch streams stalled (server→client frozen)") as window:
        t0 = time.time()
        stalled = leader.proxy.stall_streams(quiet_s=QUIET_S, keep_s=KEEP_STALLING_S)
        for i, (node, fill) in enumerate(zip(targets, TARGET_FILLS, strict=True)):
            pod_m = int(harness.NODE_CPU_M * fill) // OTHER_PODS_PER_NODE
            for j in range(OTHER_PODS_PER_NODE):
                s.bind_elsewhere(f"other-fill-{i}-{j}", node, cpu_m=pod_m)
        filled = time.time()
        time.sleep(max(0.0, t0 + FIRST_ARRIVAL_S - time.time()))
        for k in range(ours):
            s.create_pods("ours", 1, cpu_m=POD_CPU_M)
            if k < ours - 1:
                time.sleep(max(0.0, t0 + FIRST_ARRIVAL_S + (k + 1) * ARRIVE_EVERY_S - time.time()))
        s.wait_bound_count(ours, timeout=harness.SETTLE_S)
        still_stalled = leader.proxy.stalled_streams()

    records = replicas.log_records(leader.log, since=t0)
    stalls = _stall_lines(records)
    pod_stall = next((r for r in stalls if str(r["message"]).startswith("Pod:")), None)
    relisted = (
        next(
            (
                r
                for r in records
                if r["at"] >= pod_stall["at"]
                # The informers say so when decisions resume: "cluster state listed:
                # scheduling", or "the Pod watch delivers again: scheduling".
                and str(r.get("message", "")).endswith(": scheduling")
            ),
            None,
        )
        if pod_stall is not None
        else None
    )
    resync_s = None if relisted is None else round(relisted["at"] - t0, 1)
    s.recovery["resync_s"] = resync_s
    s.extra["streams_stalled"] = stalled
    s.extra["streams_still_stalled_at_end"] = still_stalled
    s.extra["other_scheduler_filled_s"] = round(filled - t0, 1)
    s.extra["stalls_seen"] = [
        f"{str(r['message']).split(':', 1)[0]} at +{r['at'] - t0:.1f}s" for r in stalls
    ]
    s.extra["pod_stall_detected_s"] = None if pod_stall is None else round(pod_stall["at"] - t0, 1)
    on_targets = sorted(
        (round(at - t0, 1), name)
        for name, at in s.watch.bound_at.items()
        if name.startswith("ours-") and s.watch.node_of.get(name) in targets
    )
    s.extra["ours_bound_onto_filled_nodes"] = [f"{n} at +{t:g}s" for t, n in on_targets]
    to_spares = [
        at - t0
        for name, at in s.watch.bound_at.items()
        if name.startswith("ours-") and s.watch.node_of.get(name) in spares
    ]
    s.extra["first_bind_to_a_spare_node_s"] = round(min(to_spares), 1) if to_spares else None
    s.extra["leader_kept_the_lease"] = s.holder() == holder
    s.extra["target_fills"] = list(TARGET_FILLS)
    s.extra["fill"] = round(
        (
            sum(TARGET_FILLS) * harness.NODE_CPU_M
            + len(spares) * harness.NODE_CPU_M * SPARE_FILL
            + len(s.watch.bound_at) * POD_CPU_M
        )
        / (len(nodes) * harness.NODE_CPU_M),
        3,
    )

    if stalled == 0:
        failures.append("the proxy froze no stream: the scenario tested nothing")
    if s.holder() != holder:
        failures.append(
            f"the Lease moved from {holder} to {s.holder()} during the stall: a new leader "
            "has a fresh cache, so the stalled leader's re-sync was not what was tested"
        )
    if pod_stall is None:
        failures.append(
            f"the leader never logged its bound-pod watch as stalled in "
            f"{time.time() - t0:.0f} s (stalls seen: {s.extra['stalls_seen']})"
        )
    elif resync_s is None or resync_s > RESYNC_BOUND_S:
        failures.append(
            f"the leader re-synced its bound pods {resync_s} s after the stall "
            f"(bound: {RESYNC_BOUND_S:g} s = {WATCHDOG_S:g} s of silence + one LIST)"
        )
    s.extra["failures"] = failures
    s.verify(recover_from=window.end)
