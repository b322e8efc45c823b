"""The oracle counts metricsched's documented DRA refusal apart from disagreements, and
nothing else (tests/parity/by_design.py)."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import versions
from metricsched.core.plugins import node_resources_fit
from tests.parity import by_design, extras, oracle

pytestmark = pytest.mark.parity

ACCEL = extras.DRA_RESOURCE
REFUSAL = node_resources_fit.filtering.dra_backed_reason(ACCEL)
V137 = oracle.rules_of("v1.37.2")


def _node(name: str, **allocatable: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "2", **allocatable}},
    }


def _scenario(*, requests: dict[str, str] | None = None) -> dict[str, object]:
    container = {"name": "c", "resources": {"limits": {ACCEL: "1"}, "requests": requests or {}}}
    return {
        "nodes": [_node("dra"), _node("plugin", **{ACCEL: "2"})],
        "deviceClasses": [{"metadata": {"name": "accel"}, "spec": {"extendedResourceName": ACCEL}}],
        "incoming": [{"metadata": {"name": "p"}, "spec": {"containers": [container]}}],
    }


def _answer(
    feasible: set[str], rejected: dict[str, tuple[str, ...]], message: str = "", **plugins: str
) -> oracle.Answer:
    return oracle.Answer(
        feasible=frozenset(feasible), rejected=rejected, message=message, plugins=plugins
    )


def test_kube_scheduler_leaves_a_mapped_resource_to_dra_only_where_allocatable_lacks_it() -> None:
    scenario = _scenario()
    pod = scenario["incoming"][0]  # type: ignore[index]
    assert by_design.delegated(scenario, pod, V137) == {"dra": frozenset({ACCEL})}
    assert by_design.delegated(scenario, pod, versions.V1_35) == {}
    stripped = by_design.without_delegated(pod, frozenset({ACCEL}))
    assert stripped["spec"]["containers"][0]["resources"] == {"limits": {}, "requests": {}}


MINE = _answer({"plugin"}, {"dra": (REFUSAL,)}, "")
KUBE = _answer({"dra", "plugin"}, {})
STRIPPED = _answer({"dra", "plugin"}, {})
WHERE = {"dra": frozenset({ACCEL})}


def test_the_documented_refusal_of_a_node_kube_scheduler_would_serve_by_dra_is_by_design() -> None:
    assert by_design.refused_by_design(MINE, KUBE, STRIPPED, WHERE)


def test_a_refusal_in_other_words_stays_a_disagreement() -> None:
    mine = dataclasses.replace(MINE, rejected={"dra": (f"Insufficient {ACCEL}",)})
    assert not by_design.refused_by_design(mine, KUBE, STRIPPED, WHERE)


def test_a_difference_on_a_node_kube_scheduler_does_not_delegate_stays_a_disagreement() -> None:
    mine = _answer(set(), {"dra": (REFUSAL,), "plugin": ("Insufficient cpu",)}, "0/2 ...")
    assert not by_design.refused_by_design(mine, KUBE, STRIPPED, WHERE)


def test_a_delegated_node_where_the_rest_of_the_answer_differs_stays_a_disagreement() -> None:
    # Without the DRA resource metricsched would refuse the node for cpu, kube-scheduler not.
    stripped = _answer({"plugin"}, {"dra": ("Insufficient cpu",)})
    mine = dataclasses.replace(MINE, rejected={"dra": (REFUSAL, "Insufficient cpu")})
    assert not by_design.refused_by_design(mine, KUBE, stripped, WHERE)
    # and the same when kube-scheduler's DynamicResources found no device there
    kube = _answer({"plugin"}, {"dra": ("cannot allocate all claims",)}, dra="DynamicResources")
    assert not by_design.refused_by_design(mine, kube, stripped, WHERE)
    assert by_design.refused_by_design(MINE, kube, STRIPPED, WHERE)


def test_where_dynamic_resources_rejects_only_a_later_filter_may_reject_the_stripped_pod() -> None:
    kube = _answer({"plugin"}, {"dra": ("cannot allocate all claims",)}, dra="DynamicResources")
    later = _answer({"plugin"}, {"dra": ("node(s) didn't match Pod's required features",)})
    assert by_design.refused_by_design(MINE, kube, later, WHERE)
    earlier = _answer({"plugin"}, {"dra": ("node(s) didn't match pod affinity rules",)})
    assert not by_design.refused_by_design(MINE, kube, earlier, WHERE)


def test_a_failed_scheduling_message_without_the_documented_refusal_stays_a_disagreement() -> None:
    rejected = {"dra": ("x",), "plugin": ("Insufficient cpu",)}
    mine = _answer(set(), {"dra": (REFUSAL,), "plugin": ("Insufficient cpu",)}, "0/2 nodes")
    kube = _answer(set(), rejected, "theirs")
    stripped = _answer(set(), rejected, "stripped")
    assert not by_design.refused_by_design(mine, kube, stripped, WHERE)
    assert by_design.refused_by_design(
        mine, kube, dataclasses.replace(stripped, message="theirs"), WHERE
    )
    counted = dataclasses.replace(mine, message=f"0/2 nodes are available: 1 {REFUSAL}.")
    assert by_design.refused_by_design(counted, kube, stripped, WHERE)


def test_a_message_only_difference_is_by_design_only_if_the_stripped_pod_gets_kubes() -> None:
    # Every node answered alike (ports); the PostFilter's dry run met the refusal.
    rejected = {"dra": ("node(s) didn't have free ports for the requested pod ports",)}
    mine = _answer(set(), rejected, f"... preemption: 0/1 nodes are available: 1 {REFUSAL}.")
    kube = _answer(set(), rejected, "... preemption: 0/1 nodes are available: 1 Too many pods.")
    stripped = dataclasses.replace(kube)
    assert by_design.refused_by_design(mine, kube, stripped, WHERE)
    other = dataclasses.replace(kube, message="... preemption: 0/1 nodes are available: 1 x.")
    assert not by_design.refused_by_design(mine, kube, other, WHERE)
