"""NodeUnschedulable: cordoned nodes admit only pods that tolerate the cordon."""

from __future__ import annotations

import pytest

from metricsched.core.plugins import node_unschedulable
from tests.unit.filters.conftest import plugin_reason


def test_cordoned_node_is_infeasible(pod, node):
    assert plugin_reason(node_unschedulable, pod(), node(unschedulable=True)) == (
        "node(s) were unschedulable"
    )


def test_uncordoned_node_is_feasible(pod, node):
    assert plugin_reason(node_unschedulable, pod(), node()) == ""


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
        {"operator": "Exists"},
    ],
)
def test_pod_tolerating_the_unschedulable_taint_may_use_a_cordoned_node(pod, node, toleration):
    assert (
        plugin_reason(node_unschedulable, pod(tolerations=[toleration]), node(unschedulable=True))
        == ""
    )


def test_tolerating_only_no_execute_does_not_pass_a_cordon(pod, node):
    evicted = pod(
        tolerations=[
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}
        ]
    )
    assert plugin_reason(node_unschedulable, evicted, node(unschedulable=True)) != ""
