"""Binding answers lost after the API server applied the Binding.

The proxy forwards a request and then drops the answer and resets the client connection,
for 5 % of the leader's client→server chunks (TLS is end to end, so a chunk is about a
request: Bindings, Events, Lease renewals and status writes alike). The operator must
resolve each unknown outcome by reading the pod, never by declaring the bind failed.
"""

from __future__ import annotations

from tests.faults import harness
from tests.faults.conftest import ScenarioFactory

RESET_P = 0.05


def test_binding_answers_reset_after_forwarding_lose_no_pod_and_free_no_capacity(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("bind-reset", "5 % of the leader's requests answered by a reset after forwarding")
    s.add_nodes(harness.nodes_for(400))
    s.start_replicas(2)
    leader = s.leader()
    with s.fault("5 % resets after forward on the leader"):
        leader.proxy.set_mode("reset", p=RESET_P)
        s.create_pods("burst", 400)
        s.wait_bound_count(400)
        leader.proxy.set_mode("pass")
    s.extra["resets_injected"] = leader.proxy.counters.resets_injected
    s.verify()
