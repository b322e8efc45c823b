"""TaintToleration: NoSchedule and NoExecute taints need a toleration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricsched.core import model
from metricsched.core.plugins import taint_toleration
from tests.unit.filters.conftest import plugin_reason

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_node_with_untolerated_noschedule_taint_is_infeasible(pod, node):
    assert plugin_reason(taint_toleration.filtering, pod(), node(taints=[GPU_TAINT])) == (
        "node(s) had untolerated taint(s)"
    )


def test_reason_names_neither_key_nor_value_as_kube_scheduler_1_35_does(pod, node):
    # Found by the differential oracle: v1.35 dropped "{key: value}" (values may be secret).
    tainted = node(taints=[{"key": "node-role.kubernetes.io/gpu", "effect": "NoSchedule"}])
    assert plugin_reason(taint_toleration.filtering, pod(), tainted) == (
        "node(s) had untolerated taint(s)"
    )


def test_node_with_untolerated_noexecute_taint_is_infeasible(pod, node):
    tainted = node(taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
    assert plugin_reason(taint_toleration.filtering, pod(), tainted) == (
        "node(s) had untolerated taint(s)"
    )


def test_prefer_no_schedule_taint_does_not_filter(pod, node):
    tainted = node(taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}])
    assert plugin_reason(taint_toleration.filtering, pod(), tainted) == ""


def test_untainted_node_is_feasible(pod, node):
    assert plugin_reason(taint_toleration.filtering, pod(), node()) == ""


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},  # Equal is the default
        {"key": "dedicated", "value": "gpu"},  # no effect: every effect
        {"key": "dedicated", "operator": "Exists"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},  # tolerates everything
        {"operator": "Exists", "effect": "NoSchedule"},
    ],
)
def test_matching_toleration_makes_the_node_feasible(pod, node, toleration):
    assert (
        plugin_reason(
            taint_toleration.filtering, pod(tolerations=[toleration]), node(taints=[GPU_TAINT])
        )
        == ""
    )


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "dedicated", "value": "cpu", "effect": "NoSchedule"},  # other value
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},  # other effect
        {"key": "other", "operator": "Exists"},  # other key
        {"key": "dedicated", "effect": "NoSchedule"},  # Equal to "" is not Equal to "gpu"
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ],
)
def test_non_matching_toleration_leaves_the_node_infeasible(pod, node, toleration):
    assert (
        plugin_reason(
            taint_toleration.filtering, pod(tolerations=[toleration]), node(taints=[GPU_TAINT])
        )
        != ""
    )


def test_any_untolerated_taint_gives_the_same_reason(pod, node):
    tainted = node(
        taints=[
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "value": "2", "effect": "NoExecute"},
        ]
    )
    tolerant = pod(tolerations=[{"key": "a", "operator": "Exists"}])
    assert (
        plugin_reason(taint_toleration.filtering, tolerant, tainted)
        == "node(s) had untolerated taint(s)"
    )
    assert (
        plugin_reason(taint_toleration.filtering, pod(), tainted)
        == "node(s) had untolerated taint(s)"
    )


def test_pod_tolerating_every_taint_fits(pod, node):
    tainted = node(
        taints=[
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "value": "2", "effect": "NoExecute"},
        ]
    )
    tolerant = pod(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "value": "2"}])
    assert plugin_reason(taint_toleration.filtering, tolerant, tainted) == ""


keys = st.sampled_from(["", "a", "b"])
vals = st.sampled_from(["", "x", "y"])
effects = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
taints = st.builds(model.Taint, key=keys.filter(bool), value=vals, effect=effects)
tolerations = st.builds(
    model.Toleration,
    key=keys,
    operator=st.sampled_from(["Equal", "Exists"]),
    value=vals,
    effect=st.one_of(st.just(""), effects),
)


@given(
    node_taints=st.lists(taints, max_size=4),
    held=st.lists(tolerations, max_size=3),
    extra=tolerations,
)
def test_adding_a_toleration_never_makes_a_node_infeasible(pod, node, node_taints, held, extra):
    tainted = node(
        taints=[{"key": t.key, "value": t.value, "effect": t.effect} for t in node_taints]
    )
    before = pod(tolerations=[_raw(t) for t in held])
    after = pod(tolerations=[_raw(t) for t in (*held, extra)])
    if plugin_reason(taint_toleration.filtering, before, tainted) == "":
        assert plugin_reason(taint_toleration.filtering, after, tainted) == ""


@given(node_taints=st.lists(taints, min_size=1, max_size=4))
def test_exists_without_key_tolerates_any_taint(pod, node, node_taints):
    tainted = node(
        taints=[{"key": t.key, "value": t.value, "effect": t.effect} for t in node_taints]
    )
    assert (
        plugin_reason(
            taint_toleration.filtering, pod(tolerations=[{"operator": "Exists"}]), tainted
        )
        == ""
    )


def _raw(toleration: model.Toleration) -> dict[str, str]:
    return {
        "key": toleration.key,
        "operator": toleration.operator,
        "value": toleration.value,
        "effect": toleration.effect,
    }
