"""Scheduling gates, deletion and binding keep a pod out of the cycle altogether: the
cycle skips it (outcome SKIP) and says why, before any filter runs."""

from __future__ import annotations

import pytest

from metricsched.core import model
from tests.unit.conftest import build_node_state, build_snapshot, run_cycle


@pytest.fixture
def one_node() -> model.ClusterSnapshot:
    return build_snapshot(build_node_state("n1"))


def skipped(pod: model.PodInfo, snapshot: model.ClusterSnapshot) -> tuple[bool, str]:
    """Whether the cycle skipped ``pod`` and its message (as ``is_schedulable_now`` said)."""
    decision = run_cycle(pod=pod, snapshot=snapshot)
    if decision.outcome is model.Outcome.SKIP:
        return False, decision.message
    return True, ""


def test_plain_pending_pod_is_schedulable_now(pod, one_node):
    assert skipped(pod(), one_node) == (True, "")


def test_gated_pod_waits_and_says_for_which_gates(pod, one_node):
    gated = pod(gates=["example.com/quota", "example.com/ok"])
    assert skipped(gated, one_node) == (
        False,
        "pod has scheduling gates: example.com/quota, example.com/ok",
    )


def test_deleting_pod_is_not_scheduled(pod, one_node):
    schedulable, why = skipped(pod(deleting=True), one_node)
    assert not schedulable
    # the cycle's message names the pod (filters.is_schedulable_now's shorter text was
    # never reached: the cycle answered for bound and deleting pods first)
    assert why == "pod shop/web-1 is being deleted"


def test_bound_pod_is_not_scheduled_again(pod, one_node):
    assert skipped(pod(node_name="n1"), one_node) == (
        False,
        "pod shop/web-1 is already bound to n1",
    )
