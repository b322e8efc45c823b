"""Which policy governs a pod: the pinning label, selectors, priority, age and name."""

from __future__ import annotations

import pytest

from metricsched.core import model, policy_defaults, policy_selection

PINNED = policy_selection.ChoiceReason.PINNED
SELECTED = policy_selection.ChoiceReason.SELECTED


def selector(labels=None, *expressions):
    return model.LabelSelector(match_labels=dict(labels or {}), match_expressions=expressions)


@pytest.mark.parametrize(
    ("wanted", "labels", "matches"),
    [
        (selector(), {}, True),
        (selector({"app": "web"}), {"app": "web", "tier": "front"}, True),
        (selector({"app": "web"}), {"app": "api"}, False),
        (selector({"app": "web"}), {}, False),
        (selector(None, ("tier", "In", ("front", "edge"))), {"tier": "edge"}, True),
        (selector(None, ("tier", "In", ("front",))), {}, False),
        (selector(None, ("tier", "NotIn", ("back",))), {}, True),
        (selector(None, ("tier", "NotIn", ("back",))), {"tier": "back"}, False),
        (selector(None, ("gpu", "Exists", ())), {"gpu": ""}, True),
        (selector(None, ("gpu", "Exists", ())), {}, False),
        (selector(None, ("gpu", "DoesNotExist", ())), {}, True),
        (selector(None, ("gpu", "DoesNotExist", ())), {"gpu": "a100"}, False),
        (selector({"app": "web"}, ("gpu", "Exists", ())), {"app": "web"}, False),
        (selector(None, ("gpu", "Near", ())), {"gpu": "x"}, False),
    ],
    ids=[
        "empty selects all",
        "labels subset",
        "label value differs",
        "label absent",
        "In listed value",
        "In absent key",
        "NotIn absent key",
        "NotIn listed value",
        "Exists present",
        "Exists absent",
        "DoesNotExist absent",
        "DoesNotExist present",
        "labels and expressions all needed",
        "unknown operator selects nothing",
    ],
)
def test_selector_matches_like_a_kubernetes_label_selector(wanted, labels, matches):
    assert policy_selection.selector_matches(wanted, labels) is matches


def test_highest_priority_matching_policy_wins(make_pod, make_policy):
    low = make_policy("low", priority=1)
    high = make_policy("high", priority=10, match_labels={"app": "web"})
    other = make_policy("other", priority=99, match_labels={"app": "api"})

    choice = policy_selection.select_policy(make_pod(labels={"app": "web"}), [low, high, other])

    assert choice == policy_selection.PolicyChoice(policy=high, reason=SELECTED)


def test_equal_priorities_go_to_the_oldest_then_to_the_first_name(make_pod, make_policy, now):
    younger = make_policy("a-young", created=now - 10)
    older_b = make_policy("b-old", created=now - 100)
    older_a = make_policy("c-old", created=now - 100)
    pod = make_pod()

    assert policy_selection.select_policy(pod, [younger, older_a, older_b]).policy is older_b
    assert policy_selection.select_policy(pod, [younger]).policy is younger


def test_policies_of_other_namespaces_are_ignored(make_pod, make_policy):
    elsewhere = make_policy("web-latency", namespace="bank", priority=100)

    choice = policy_selection.select_policy(make_pod(namespace="shop"), [elsewhere])

    assert choice == policy_selection.PolicyChoice(
        policy=None, reason=policy_selection.ChoiceReason.NO_MATCH
    )


def test_label_pins_a_policy_even_if_its_selector_does_not_match(make_pod, make_policy):
    matching = make_policy("web-latency", priority=100)
    pinned = make_policy("batch-cost", match_labels={"app": "batch"})
    pod = make_pod(labels={"app": "web", policy_defaults.POLICY_LABEL: "batch-cost"})

    choice = policy_selection.select_policy(pod, [matching, pinned])

    assert choice == policy_selection.PolicyChoice(
        policy=pinned, reason=PINNED, pinned=model.PolicyKey("shop/batch-cost")
    )


def test_label_naming_a_missing_policy_is_reported_not_replaced(make_pod, make_policy):
    other_namespace = make_policy("batch-cost", namespace="bank")
    fallback_candidate = make_policy("web-latency")
    pod = make_pod(labels={policy_defaults.POLICY_LABEL: "batch-cost"})

    choice = policy_selection.select_policy(pod, [other_namespace, fallback_candidate])

    assert choice == policy_selection.PolicyChoice(
        policy=None,
        reason=policy_selection.ChoiceReason.PINNED_MISSING,
        pinned=model.PolicyKey("shop/batch-cost"),
    )


def test_pod_matching_no_policy_is_told_so(make_pod, make_policy):
    choice = policy_selection.select_policy(
        make_pod(labels={"app": "api"}), [make_policy(match_labels={"app": "web"})]
    )
    assert choice.reason is policy_selection.ChoiceReason.NO_MATCH
    assert choice.policy is None
