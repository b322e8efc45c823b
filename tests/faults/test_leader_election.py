"""Two replicas with leader election while the leader's path to the API server breaks.

Each test asserts the four invariants (Scenario.verify): 0 pods lost, 0 overcommitted
nodes, 0 Bindings by a replica that did not hold the Lease, no crash loop.
"""

from __future__ import annotations

import time

from tests.faults import harness
from tests.faults.conftest import ScenarioFactory

BLIP_S = 3.0
HANG_S = 40.0
DELAY_MS = 4000.0
SLOW_S = 30.0


def test_a_three_second_api_blip_on_the_leader_loses_no_pod_and_makes_no_second_binder(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("le-blip", "API blip of 3 s on the leader (refused, connections reset)")
    s.add_nodes(harness.nodes_for(400))
    s.start_replicas(2)
    s.create_pods("before", 100)
    s.wait_bound_count(100)
    leader = s.leader()
    holder = s.holder()
    s.create_pods("queued", 100)  # pending when the blip starts: binds in flight
    with s.fault("leader refused 3 s") as w:
        leader.proxy.set_mode("refuse")
        s.create_pods("during", 50)
        time.sleep(BLIP_S)
        leader.proxy.set_mode("pass")
    s.lost_leader(w.start, holder)  # a takeover, if any, is reported
    s.arrive("after", 150)
    s.verify(recover_from=w.end, outage=True)


def test_a_hung_lease_connection_hands_over_to_the_standby_without_two_binders(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("le-hung", "Hung connections to the leader (blackhole 40 s)")
    s.add_nodes(harness.nodes_for(300))
    s.start_replicas(2)
    s.create_pods("before", 100)
    s.wait_bound_count(100)
    leader = s.leader()
    holder = s.holder()
    with s.fault("leader blackholed 40 s") as w:
        leader.proxy.set_mode("blackhole")
        s.create_pods("during", 150)
        time.sleep(HANG_S)
        leader.proxy.set_mode("pass")
    s.lost_leader(w.start, holder)
    s.arrive("after", 50, over_s=20)
    s.verify(recover_from=w.end)


def test_a_lease_lost_with_binds_in_flight_leaves_no_bind_to_the_old_leader(
    scenario: ScenarioFactory,
) -> None:
    s = scenario(
        "le-inflight",
        "Lease lost with binds in flight (leader's traffic delayed 4 s per chunk for 30 s)",
    )
    s.add_nodes(harness.nodes_for(350))
    s.start_replicas(2)
    s.create_pods("before", 50)
    s.wait_bound_count(50)
    leader = s.leader()
    holder = s.holder()
    s.create_pods("during", 250)
    s.wait_bound_count(70)  # the leader is mid-burst: binds in flight when the delay starts
    with s.fault("leader delayed 4 s/chunk for 30 s") as w:
        leader.proxy.set_mode("delay", delay_ms=DELAY_MS)
        time.sleep(SLOW_S)
        leader.proxy.set_mode("pass")
    s.lost_leader(w.start, holder)
    s.arrive("after", 50, over_s=20)
    s.verify(recover_from=w.end)


def test_the_leader_killed_three_times_during_a_burst_loses_no_pod(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("le-kill3", "Leader SIGKILLed 3 times during a 600-pod burst")
    s.add_nodes(harness.nodes_for(600))
    s.start_replicas(2)
    s.create_pods("burst", 600)
    for bound in (100, 250, 400):
        s.wait_bound_count(bound)
        holder = s.holder()
        leader = s.leader()
        with s.fault(f"leader SIGKILLed at {bound} bound") as w:
            leader.sigkill()
            s.wait_leader_change(holder)
        s.lost_leader(w.start, holder)
    s.verify(recover_from=w.start)  # the last kill: leader lost -> first bind
