"""spec.mode and spec.shadow: parsed with the CRD's defaults, and shadow policies never
govern the pods metricsched places; they select pods of the schedulers they name."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import model, policy, policy_defaults, policy_selection


def body(**spec):
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "trial", "namespace": "shop"},
        "spec": {"metrics": [{"name": "latency", "nodeAnnotation": "example.com/lat"}], **spec},
    }


def test_a_policy_without_mode_is_active_and_shadows_the_default_scheduler():
    parsed = policy.policy_from_body(body())
    assert parsed.mode is model.PolicyMode.ACTIVE
    assert parsed.shadow_scheduler_names == ("default-scheduler",)


def test_a_shadow_policy_takes_the_scheduler_names_it_is_given():
    parsed = policy.policy_from_body(
        body(mode="Shadow", shadow={"schedulerNames": ["kube-a", "kube-b", "kube-a"]})
    )
    assert parsed.mode is model.PolicyMode.SHADOW
    assert parsed.shadow_scheduler_names == ("kube-a", "kube-b")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"mode": "Dry"}, "spec.mode: must be one of Active, Shadow"),
        ({"shadow": {"schedulerNames": ["x"]}}, "spec.shadow: is only allowed with mode: Shadow"),
        ({"mode": "Shadow", "shadow": {"schedulerNames": []}}, "spec.shadow.schedulerNames"),
        ({"mode": "Shadow", "shadow": {"schedulerNames": [""]}}, "spec.shadow.schedulerNames"),
    ],
)
def test_a_bad_mode_or_shadow_block_is_reported(spec, problem):
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(body(**spec))
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


@pytest.fixture
def shadow_policy(make_policy):
    return dataclasses.replace(
        make_policy("trial"),
        mode=model.PolicyMode.SHADOW,
        shadow_scheduler_names=("default-scheduler",),
    )


def test_a_shadow_policy_never_governs_a_pod_metricsched_places(make_pod, shadow_policy):
    choice = policy_selection.select_policy(make_pod(), [shadow_policy])
    assert choice.reason is policy_selection.ChoiceReason.NO_MATCH


def test_a_pod_pinned_to_a_shadow_policy_is_not_governed_by_it(make_pod, shadow_policy):
    pinned = make_pod(labels={policy_defaults.POLICY_LABEL: "trial"})
    assert policy_selection.select_policy(pinned, [shadow_policy]).reason is (
        policy_selection.ChoiceReason.PINNED_MISSING
    )


def test_a_shadow_policy_selects_pods_of_the_schedulers_it_names(make_pod, shadow_policy):
    theirs = make_pod(scheduler_name="default-scheduler")
    assert policy_selection.shadow_policy_for(theirs, [shadow_policy]) == shadow_policy
    other = make_pod(scheduler_name="volcano")
    assert policy_selection.shadow_policy_for(other, [shadow_policy]) is None
    elsewhere = make_pod(scheduler_name="default-scheduler", namespace="bank")
    assert policy_selection.shadow_policy_for(elsewhere, [shadow_policy]) is None


def test_an_active_policy_evaluates_no_pod_of_another_scheduler(make_pod, make_policy):
    theirs = make_pod(scheduler_name="default-scheduler")
    assert policy_selection.shadow_policy_for(theirs, [make_policy("web")]) is None


def test_the_highest_priority_shadow_policy_wins_and_a_pin_overrides(make_pod, shadow_policy):
    high = dataclasses.replace(shadow_policy, name="high", priority=10)
    low = dataclasses.replace(shadow_policy, name="low", priority=1)
    pod = make_pod(scheduler_name="default-scheduler")
    assert policy_selection.shadow_policy_for(pod, [low, high]) == high
    pinned = make_pod(
        scheduler_name="default-scheduler", labels={policy_defaults.POLICY_LABEL: "low"}
    )
    assert policy_selection.shadow_policy_for(pinned, [low, high]) == low
