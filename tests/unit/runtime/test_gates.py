"""The gates (leading, consistent, metrics ready, policies confirmed, fence) are made first
in the operator and handed to every part that reads them: closing one holds every reader
of it, and what one writer opens, every reader sees."""

from __future__ import annotations

import asyncio

from metricsched.runtime import operator as operator_mod
from tests.unit.runtime import test_policy_gaps as policy_gaps


def _listed(op: operator_mod.Operator) -> None:
    for reflector in op.cluster_state.reflectors:
        op.cluster_state.listed(reflector.resource.kind, set(), "1", 0.0)


def test_every_reader_holds_the_operators_gates(op: operator_mod.Operator) -> None:
    assert op.scheduler.gates is op.gates
    assert op.rebalancer.gates is op.gates
    assert op.refresher.gates is op.gates
    assert op.status.gates is op.gates


def test_a_replica_that_does_not_lead_decides_moves_and_writes_nothing(
    op: operator_mod.Operator,
) -> None:
    _listed(op)
    assert not op.scheduler._may_decide() and not op.rebalancer._may_move()
    op._started_leading()
    assert op.scheduler._may_decide() and op.rebalancer._may_move()
    op.stop.set()  # _lost_leading ends the process
    op._lost_leading()
    assert not op.scheduler._may_decide() and not op.rebalancer._may_move()
    assert asyncio.run(op.status.write_due()) == 0  # a replica that lost the lease: no PATCH


def test_a_cluster_state_not_whole_holds_the_scheduler_and_the_rebalancer(
    op: operator_mod.Operator,
) -> None:
    op._started_leading()
    assert not op.scheduler._may_decide() and not op.rebalancer._may_move()  # nothing listed
    _listed(op)
    assert op.scheduler._may_decide() and op.rebalancer._may_move()
    op.cluster_state.relisting("Node")
    assert not op.scheduler._may_decide() and not op.rebalancer._may_move()


def test_the_first_metric_round_opens_the_scheduler(op: operator_mod.Operator) -> None:
    assert not op.gates.metrics_ready.is_set()
    asyncio.run(op.refresher._first_round_done([]))
    assert op.gates.metrics_ready.is_set()
    assert op.scheduler.gates.metrics_ready.is_set()


def test_without_leader_election_no_fence_bounds_a_write(op: operator_mod.Operator) -> None:
    assert op.gates.fence is None
    op.gates.fence = lambda: 0.0
    assert op.scheduler.gates.fence is not None and op.scheduler.gates.fence() == 0.0
    assert op.rebalancer.gates.fence is not None and op.rebalancer.gates.fence() == 0.0


def test_a_policy_gap_holds_the_scheduler_and_the_rebalancer_until_a_list_confirms(
    op: operator_mod.Operator,
) -> None:
    assert op.policies.confirmed is op.gates.policies_confirmed
    op._started_leading()
    _listed(op)
    op.on_policy("ADDED", policy_gaps._policy("web", "5"))  # a policy cached: a gap matters
    assert op.scheduler._may_decide() and op.rebalancer._may_move()
    gaps = op.policies.gaps + 1
    op.policies.gap("kopf listed again")
    assert not op.scheduler._may_decide() and not op.rebalancer._may_move()
    op.policies.listed(gaps_before=gaps)
    assert op.scheduler._may_decide() and op.rebalancer._may_move()
