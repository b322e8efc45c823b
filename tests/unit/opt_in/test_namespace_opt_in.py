"""Namespace opt-in: which new pods the webhook gives this install's scheduler name."""

from __future__ import annotations

from typing import Any

import pytest

from metricsched.core import opt_in

RULES = opt_in.rules(scheduler_name="metricsched", excluded_namespaces=["metricsched-system"])
OPTED_IN = {opt_in.NAMESPACE_LABEL: "metricsched"}


def pod(
    *,
    scheduler: str | None = "default-scheduler",
    labels: dict[str, str] | None = None,
    node: str | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node is not None:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"generateName": "web-", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner, "name": "web", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def decide(p: dict[str, Any], namespace: str = "shop", labels: Any = OPTED_IN) -> opt_in.Decision:
    return opt_in.decide(p, namespace=namespace, namespace_labels=labels, rules=RULES)


def test_pod_of_an_opted_in_namespace_gets_the_install_scheduler_name() -> None:
    d = decide(pod())
    assert d == opt_in.Decision(opt_in.Reason.ASSIGNED, scheduler_name="metricsched")


def test_pod_naming_no_scheduler_at_all_gets_it_too() -> None:
    assert decide(pod(scheduler=None)).scheduler_name == "metricsched"
    assert decide(pod(scheduler="")).scheduler_name == "metricsched"


def test_a_replica_set_pod_is_assigned_like_any_other() -> None:
    assert decide(pod(owner="ReplicaSet")).reason is opt_in.Reason.ASSIGNED


def test_without_labels_the_namespace_selector_is_trusted() -> None:
    # The webhook's case: the API server applied the namespaceSelector before calling.
    assert decide(pod(), labels=None).reason is opt_in.Reason.ASSIGNED


@pytest.mark.parametrize(
    "labels",
    [{}, {opt_in.NAMESPACE_LABEL: "other-install"}, {"team": "shop"}],
    ids=["no-label", "another-install", "unrelated-label"],
)
def test_pod_of_another_namespace_is_left_alone(labels: dict[str, str]) -> None:
    d = decide(pod(), labels=labels)
    assert d == opt_in.Decision(opt_in.Reason.NOT_OPTED_IN)


def test_kube_system_is_never_touched_even_when_labelled() -> None:
    d = decide(pod(), namespace="kube-system")
    assert d == opt_in.Decision(opt_in.Reason.EXCLUDED_NAMESPACE)


def test_kube_system_stays_excluded_whatever_the_rules_are_given() -> None:
    bare = opt_in.rules(scheduler_name="metricsched")
    assert "kube-system" in bare.excluded_namespaces
    d = opt_in.decide(pod(), namespace="kube-system", namespace_labels=None, rules=bare)
    assert d.reason is opt_in.Reason.EXCLUDED_NAMESPACE


def test_the_release_namespace_is_never_touched_even_when_labelled() -> None:
    d = decide(pod(), namespace="metricsched-system")
    assert d == opt_in.Decision(opt_in.Reason.EXCLUDED_NAMESPACE)


def test_pod_labelled_to_opt_out_is_left_alone() -> None:
    d = decide(pod(labels={opt_in.OPT_OUT_LABEL: "true"}))
    assert d == opt_in.Decision(opt_in.Reason.OPTED_OUT)


def test_an_opt_out_label_other_than_true_does_not_opt_out() -> None:
    # The objectSelector sends exactly these pods: `NotIn ["true"]`.
    assert decide(pod(labels={opt_in.OPT_OUT_LABEL: "false"})).reason is opt_in.Reason.ASSIGNED


@pytest.mark.parametrize("scheduler", ["my-scheduler", "metricsched", "metricsched-gpu"])
def test_pod_naming_its_own_scheduler_is_never_changed(scheduler: str) -> None:
    d = decide(pod(scheduler=scheduler))
    assert d == opt_in.Decision(opt_in.Reason.NAMES_A_SCHEDULER)


def test_pod_already_on_a_node_is_left_alone() -> None:
    assert decide(pod(node="node-1")).reason is opt_in.Reason.ALREADY_BOUND


def test_daemon_set_pods_stay_with_the_default_scheduler() -> None:
    assert decide(pod(owner="DaemonSet")).reason is opt_in.Reason.DAEMON_SET


def test_a_pod_without_metadata_or_spec_is_read_safely() -> None:
    d = opt_in.decide({}, namespace="shop", namespace_labels=OPTED_IN, rules=RULES)
    assert d.reason is opt_in.Reason.ASSIGNED
