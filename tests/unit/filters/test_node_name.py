"""NodeName: a pod that names its node fits only there (moot for pending pods)."""

from __future__ import annotations

from metricsched.core.plugins import node_name
from tests.unit.filters.conftest import plugin_reason


def test_pending_pod_without_node_name_fits_any_node(pod, node):
    assert plugin_reason(node_name, pod(), node("n1")) == ""


def test_pod_naming_another_node_is_infeasible(pod, node):
    assert plugin_reason(node_name, pod(node_name="n2"), node("n1")) == (
        "node(s) didn't match the requested node name"
    )


def test_pod_naming_this_node_is_feasible(pod, node):
    assert plugin_reason(node_name, pod(node_name="n1"), node("n1")) == ""
