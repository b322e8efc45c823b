"""FailedScheduling ends with kube-scheduler's PostFilter (DefaultPreemption) message."""

from __future__ import annotations

import dataclasses

from metricsched.core import model, pod_resources, versions
from metricsched.core.plugins import preemption

Outcome = model.Outcome


def with_pods(state: model.NodeState, *pods: model.PodInfo) -> model.NodeState:
    placed = tuple(dataclasses.replace(pod, node_name=state.node.name) for pod in pods)
    return dataclasses.replace(
        state, pods=placed, requested=pod_resources.sum_resources(pod.requests for pod in placed)
    )


def prioritised(pod: model.PodInfo, priority: int, **changes: object) -> model.PodInfo:
    return dataclasses.replace(pod, priority=priority, **changes)


def test_nodes_ruled_out_for_good_say_preemption_is_not_helpful(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = make_cluster(make_node("node-1", unschedulable=True), make_node("node-2", cpu=500))
    decision = schedule(pod=make_pod(cpu=1000), snapshot=cluster)
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
        "no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_from_v1_37_dynamic_resources_says_nothing_before_preemption(
    *, make_node, make_cluster, make_pod, schedule
):
    nodes = (make_node("node-1", unschedulable=True), make_node("node-2", cpu=500))
    expected = {
        versions.V1_36: "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were "
        "unschedulable. no new claims to deallocate, preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.",
        versions.V1_37: "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were "
        "unschedulable. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.",
    }
    for rules, message in expected.items():
        cluster = dataclasses.replace(make_cluster(*nodes), rules=rules)
        assert schedule(pod=make_pod(cpu=1000), snapshot=cluster).message == message


def test_a_full_node_without_lower_priority_pods_has_no_preemption_victims(
    *, make_node, make_cluster, make_pod, schedule
):
    busy = with_pods(make_node("node-1", cpu=1000), make_pod("old", cpu=800))
    cluster = make_cluster(busy, make_node("node-2", unschedulable=True))
    decision = schedule(pod=make_pod(cpu=500), snapshot=cluster)
    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
        "no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


def test_a_node_still_full_without_its_lower_priority_pods_reports_what_it_still_lacks(
    *, make_node, make_cluster, make_pod, schedule
):
    busy = with_pods(
        make_node("node-1", cpu=1000),
        prioritised(make_pod("low", cpu=100), 0),
        prioritised(make_pod("high", cpu=800), 2000),
    )
    decision = schedule(pod=prioritised(make_pod(cpu=500), 1000), snapshot=make_cluster(busy))
    assert decision.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Insufficient cpu."
    )


def test_a_pod_that_preemption_would_place_is_told_metricsched_does_not_preempt(
    *, make_node, make_cluster, make_pod, schedule
):
    busy = with_pods(make_node("node-1", cpu=1000), prioritised(make_pod("low", cpu=800), 0))
    decision = schedule(pod=prioritised(make_pod(cpu=500), 1000), snapshot=make_cluster(busy))
    assert decision.outcome is Outcome.UNSCHEDULABLE
    assert decision.message == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        "preemption: 1 node(s) would fit the pod "
        "if pods of lower priority were evicted, but metricsched does not preempt; use a "
        "scheduler that does (default-scheduler) for pods that need preemption."
    )


def test_a_pod_that_never_preempts_is_not_eligible(*, make_node, make_cluster, make_pod, schedule):
    busy = with_pods(make_node("node-1", cpu=1000), prioritised(make_pod("low", cpu=800), 0))
    pod = prioritised(make_pod(cpu=500), 1000, preemption_policy="Never")
    decision = schedule(pod=pod, snapshot=make_cluster(busy))
    assert decision.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
    )


def test_a_pod_with_resource_claims_is_refused_on_every_node_and_never_bound(
    *, make_node, make_cluster, make_pod, schedule
):
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    pod = dataclasses.replace(make_pod(), resource_claims=("gpu",))
    decision = schedule(pod=pod, snapshot=cluster)
    assert (decision.outcome, decision.node) == (Outcome.UNSCHEDULABLE, None)
    assert decision.message == (
        "0/2 nodes are available: pod has resource claims (gpu), which metricsched does not "
        "allocate; set spec.schedulerName to a scheduler that does (default-scheduler). "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def away_from_web(pod: model.PodInfo) -> model.PodInfo:
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return dataclasses.replace(pod, pod_anti_affinity=(term,), labels={"app": "api"})


def test_the_dry_run_checks_the_filters_after_resources_on_the_emptied_node(
    *, make_node, make_cluster, make_pod, schedule
):
    # Evicting "low" frees the cpu, but "high" (app=web) stays: anti-affinity still fails.
    busy = with_pods(
        make_node("node-1", cpu=1000),
        prioritised(make_pod("low", cpu=800, labels={"app": "db"}), 0),
        prioritised(make_pod("high", cpu=100, labels={"app": "web"}), 2000),
    )
    pod = prioritised(away_from_web(make_pod(cpu=500)), 1000)
    decision = schedule(pod=pod, snapshot=make_cluster(busy))
    assert decision.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    )


def test_past_its_budget_of_whole_cluster_runs_a_node_with_room_counts_as_helped(
    *, make_node, make_cluster, make_pod, schedule, monkeypatch
):
    monkeypatch.setattr(preemption, "MAX_CLUSTER_DRY_RUNS", 0)
    busy = with_pods(
        make_node("node-1", cpu=1000),
        prioritised(make_pod("low", cpu=800, labels={"app": "db"}), 0),
        prioritised(make_pod("high", cpu=100, labels={"app": "web"}), 2000),
    )
    pod = prioritised(away_from_web(make_pod(cpu=500)), 1000)
    decision = schedule(pod=pod, snapshot=make_cluster(busy))
    assert (
        "no new claims to deallocate, "
        "preemption: 1 node(s) would fit the pod if pods of lower priority" in (decision.message)
    )


def test_the_dry_run_counts_the_nodes_nominated_pods_of_equal_or_higher_priority(
    *, make_node, make_cluster, make_pod, schedule
):
    # kube-scheduler's SelectVictimsOnNode filters the emptied node with its nominated pods
    # (RunFilterPluginsWithNominatedPods): without its low-priority pod the node still
    # lacks cpu, and the pod nominated there takes the memory too.
    gib = 1024**3
    busy = with_pods(
        make_node("node-1", cpu=1000, memory=2 * gib),
        prioritised(make_pod("low", cpu=100, memory=gib), 0),
        prioritised(make_pod("high", cpu=800), 2000),
    )
    waiting = prioritised(
        make_pod("preemptor", cpu=0, memory=gib + gib // 2), 2000, nominated_node="node-1"
    )
    cluster = dataclasses.replace(make_cluster(busy), nominated={busy.node.name: (waiting,)})
    pod = prioritised(make_pod(cpu=500, memory=gib // 2), 1000)
    assert schedule(pod=pod, snapshot=cluster).message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. "
        "no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    )
