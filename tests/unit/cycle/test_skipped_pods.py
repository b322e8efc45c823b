"""Scheduling gates, deletion and binding keep a pod out of the cycle altogether."""

from __future__ import annotations

from metricsched.core import filters


def test_plain_pending_pod_is_schedulable_now(pod):
    assert filters.is_schedulable_now(pod()) == (True, "")


def test_gated_pod_waits_and_says_for_which_gates(pod):
    assert filters.is_schedulable_now(pod(gates=["example.com/quota", "example.com/ok"])) == (
        False,
        "pod has scheduling gates: example.com/quota, example.com/ok",
    )


def test_deleting_pod_is_not_scheduled(pod):
    schedulable, why = filters.is_schedulable_now(pod(deleting=True))
    assert not schedulable
    assert why == "pod is being deleted"


def test_bound_pod_is_not_scheduled_again(pod):
    assert filters.is_schedulable_now(pod(node_name="n1")) == (
        False,
        "pod is already bound to node n1",
    )
