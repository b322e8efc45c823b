"""Pod-label opt-in beside the namespace one, and which of them wins."""

from __future__ import annotations

from typing import Any

import pytest

from metricsched.core import opt_in

RULES = opt_in.rules(scheduler_name="metricsched", excluded_namespaces=["metricsched-system"])
OURS = {opt_in.NAMESPACE_LABEL: "metricsched"}
OTHERS = {opt_in.NAMESPACE_LABEL: "metricsched-gpu"}


def pod(labels: dict[str, str] | None = None, *, scheduler: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"generateName": "web-", "labels": labels or {}}, "spec": spec}


def decide(
    p: dict[str, Any], *, namespace: str = "shop", labels: Any = None, rules: Any = RULES
) -> opt_in.Decision:
    return opt_in.decide(p, namespace=namespace, namespace_labels=labels, rules=rules)


def test_a_pod_labelled_for_this_install_is_assigned_in_a_namespace_not_opted_in() -> None:
    for labels in ({}, {"team": "shop"}, None):
        d = decide(pod(OURS), labels=labels)
        assert d == opt_in.Decision(opt_in.Reason.ASSIGNED, scheduler_name="metricsched")


def test_an_unlabelled_pod_of_a_namespace_not_opted_in_is_left_alone() -> None:
    assert decide(pod(), labels={}).reason is opt_in.Reason.NOT_OPTED_IN


def test_the_pod_label_wins_over_the_namespace_label_naming_another_install() -> None:
    d = decide(pod(OURS), labels=OTHERS)
    assert d.reason is opt_in.Reason.ASSIGNED


def test_a_pod_labelled_for_another_install_is_left_to_it_even_in_our_namespace() -> None:
    # The other install's webhook assigns it; two webhooks never race for one pod.
    for labels in (OURS, None, {}):
        d = decide(pod(OTHERS), labels=labels)
        assert d == opt_in.Decision(opt_in.Reason.OPTED_IN_ELSEWHERE)


def test_the_opt_out_label_wins_over_the_pod_opt_in() -> None:
    d = decide(pod({**OURS, opt_in.OPT_OUT_LABEL: "true"}), labels={})
    assert d.reason is opt_in.Reason.OPTED_OUT


@pytest.mark.parametrize("scheduler", ["metricsched-gpu", "volcano", "metricsched"])
def test_a_labelled_pod_naming_a_scheduler_is_never_changed(scheduler: str) -> None:
    assert decide(pod(OURS, scheduler=scheduler)).reason is opt_in.Reason.NAMES_A_SCHEDULER


def test_a_labelled_pod_naming_the_default_scheduler_is_assigned() -> None:
    assert decide(pod(OURS, scheduler="default-scheduler")).scheduler_name == "metricsched"


@pytest.mark.parametrize("namespace", ["kube-system", "metricsched-system"])
def test_the_pod_label_never_reaches_kube_system_or_the_install_namespace(namespace: str) -> None:
    d = decide(pod(OURS), namespace=namespace, labels=OURS)
    assert d == opt_in.Decision(opt_in.Reason.EXCLUDED_NAMESPACE)


def test_the_pod_label_key_is_a_rule() -> None:
    rules = opt_in.rules(scheduler_name="metricsched", pod_label="example.com/sched")
    assert decide(pod({"example.com/sched": "metricsched"}), labels={}, rules=rules).reason is (
        opt_in.Reason.ASSIGNED
    )
    # The namespace label's key on a pod means nothing then.
    assert decide(pod(OURS), labels={}, rules=rules).reason is opt_in.Reason.NOT_OPTED_IN
    assert opt_in.rules(scheduler_name="metricsched", pod_label="").pod_label == (
        opt_in.NAMESPACE_LABEL
    )
