"""A policy of the pod's namespace that selects it but that another install serves is named
in the pod's Scheduled and FailedScheduling messages (issue 20): it does not place the pod,
and the user who wrote it should learn why from `kubectl describe pod`."""

from __future__ import annotations

from typing import Any

from metricsched.core import api_formats, model, policy_defaults, policy_installs

Outcome = model.Outcome


def elsewhere(
    name: str, scheduler: str | None = "other-sched", **spec: Any
) -> policy_installs.Elsewhere:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}}, **spec},
    }
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    entry = policy_installs.elsewhere_from_body(body)
    assert entry is not None
    return entry


def test_scheduled_message_names_the_other_installs_policy_that_selects_the_pod(
    *, make_node, make_cluster, make_pod, schedule
):
    decision = schedule(
        pod=make_pod("web-1", labels={"app": "web"}),
        snapshot=make_cluster(make_node("node-1")),
        elsewhere=[elsewhere("web-latency")],
    )
    assert decision.outcome is Outcome.BIND
    assert decision.message == (
        "Successfully assigned shop/web-1 to node-1 (default policy: LeastAllocated)"
        " (policy shop/web-latency selects this pod but is served by scheduler other-sched)"
    )


def test_failed_scheduling_message_names_it_too(*, make_node, make_cluster, make_pod, schedule):
    decision = schedule(
        pod=make_pod("web-1", labels={"app": "web"}, cpu=64_000),
        snapshot=make_cluster(make_node("node-1")),
        elsewhere=[elsewhere("web-latency", scheduler=None)],  # no name: "metricsched"
    )
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert decision.message.endswith(
        " (policy shop/web-latency selects this pod but is served by scheduler metricsched)"
    )


def test_policies_that_do_not_select_the_pod_are_not_named(
    *, make_node, make_cluster, make_pod, schedule
):
    others = [
        elsewhere("other-app", podSelector={"matchLabels": {"app": "db"}}),
        elsewhere("on-trial", mode="Shadow"),
    ]
    in_other_namespace = policy_installs.Elsewhere(
        namespace="bar",
        name="web-latency",
        scheduler_name="other-sched",
        selector=model.LabelSelector(match_labels={}, match_expressions=()),
        active=True,
    )
    decision = schedule(
        pod=make_pod("web-1", labels={"app": "web"}),
        snapshot=make_cluster(make_node("node-1")),
        elsewhere=[*others, in_other_namespace],
    )
    assert decision.message == (
        "Successfully assigned shop/web-1 to node-1 (default policy: LeastAllocated)"
    )


def test_a_pinned_pod_is_selected_only_by_the_policy_its_label_names(*, make_pod):
    pod = make_pod("web-1", labels={"app": "db", policy_defaults.POLICY_LABEL: "pinned-elsewhere"})
    found = policy_installs.selecting_elsewhere(
        pod, [elsewhere("web-latency"), elsewhere("pinned-elsewhere")]
    )
    assert [p.key for p in found] == ["shop/pinned-elsewhere"]


def test_a_skipped_pod_gets_no_note(*, make_node, make_cluster, make_pod, schedule):
    decision = schedule(
        pod=make_pod("web-1", labels={"app": "web"}, scheduler_name="other-sched"),
        snapshot=make_cluster(make_node("node-1")),
        elsewhere=[elsewhere("web-latency")],
    )
    assert decision.outcome is Outcome.SKIP
    assert "selects this pod" not in decision.message


def test_the_note_survives_the_message_limit(*, make_node, make_cluster, make_pod, schedule):
    names = [f"p{i:03}-" + "x" * 40 for i in range(40)]
    decision = schedule(
        pod=make_pod("web-1", labels={"app": "web"}),
        snapshot=make_cluster(make_node("node-1")),
        elsewhere=[elsewhere(n) for n in names],
    )
    assert len(decision.message.encode()) <= api_formats.MESSAGE_LIMIT
    assert decision.message.startswith("Successfully assigned shop/web-1 to node-1")
    assert f"(policy shop/{names[0]} selects this pod" in decision.message


def test_an_unreadable_selector_is_left_out_of_the_index():
    body = {"metadata": {"name": "x", "namespace": "shop"}, "spec": {"podSelector": "app=web"}}
    assert policy_installs.elsewhere_from_body(body) is None
