"""When metrics cannot be trusted, the policy's fallback strategy decides, and says why."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metricsched.core import columns, cycle, model, parse
from metricsched.core.plugins import node_resources_fit
from tests.unit.conftest import build_pod_body

GIB = 1024**3
UNREACHABLE = model.QueryErrorKind.UNREACHABLE
Strategy = model.FallbackStrategy


@pytest.fixture
def uneven_cluster(make_node, make_cluster):
    """Three 4-core nodes: node-1 half full, node-2 empty, node-3 nearly full; node-4 cordoned."""
    return make_cluster(
        make_node("node-1", requested_cpu=2000, requested_memory=4 * GIB),
        make_node("node-2"),
        make_node("node-3", requested_cpu=3500, requested_memory=7 * GIB),
        make_node("node-4", unschedulable=True),
    )


@pytest.fixture
def latency_policy(make_policy, make_metric):
    return make_policy(metrics=[make_metric("latency", threshold_max=0.5)])


def test_default_policy_places_by_least_allocated_without_calling_it_fallback(
    *, make_pod, uneven_cluster, schedule
):
    decision = schedule(pod=make_pod(labels={"app": "api"}), snapshot=uneven_cluster)

    assert (decision.outcome, decision.node, decision.policy) == (
        model.Outcome.BIND,
        "node-2",
        None,
    )
    assert decision.fallback_reason == ""
    assert decision.message == (
        "Successfully assigned shop/web-7d4 to node-2 (default policy: LeastAllocated)"
    )


def test_default_policy_can_pack_by_most_allocated(make_pod, uneven_cluster, schedule):
    decision = schedule(
        pod=make_pod(), snapshot=uneven_cluster, default_fallback=Strategy.MOST_ALLOCATED
    )
    assert decision.node == "node-3"


@pytest.mark.parametrize(("counter", "node"), [(0, "node-1"), (1, "node-2"), (5, "node-3")])
def test_round_robin_walks_the_feasible_nodes_in_name_order(
    *, make_pod, uneven_cluster, schedule, counter, node
):
    decision = schedule(
        pod=make_pod(),
        snapshot=uneven_cluster,
        default_fallback=Strategy.ROUND_ROBIN,
        rr_counter=counter,
    )
    assert decision.node == node


def test_random_is_decided_by_the_seed_among_feasible_nodes(make_pod, uneven_cluster, schedule):
    picks = {
        seed: schedule(
            pod=make_pod(), snapshot=uneven_cluster, default_fallback=Strategy.RANDOM, seed=seed
        ).node
        for seed in range(30)
    }
    assert set(picks.values()) == {"node-1", "node-2", "node-3"}
    again = schedule(
        pod=make_pod(), snapshot=uneven_cluster, default_fallback=Strategy.RANDOM, seed=7
    )
    assert again.node == picks[7]


def test_unreachable_prometheus_makes_the_strategy_decide_and_ignores_thresholds(
    *, make_pod, make_node, make_cluster, latency_policy, make_view, schedule
):
    cluster = make_cluster(
        make_node("node-1", requested_cpu=3000), make_node("node-2", requested_cpu=1000)
    )
    view = make_view(
        latency_policy,
        {"latency": {"node-1": 0.1, "node-2": 0.9}},  # node-2 over threshold, but untrusted
        errors={"latency": (UNREACHABLE, "connection refused")},
    )

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[latency_policy], metrics=view)

    assert (decision.outcome, decision.node) == (model.Outcome.BIND, "node-2")
    assert decision.fallback_reason == "Prometheus unreachable: connection refused"
    assert decision.message == (
        "Successfully assigned shop/web-7d4 to node-2 (policy shop/web-latency: fallback "
        "LeastAllocated because Prometheus unreachable: connection refused)"
    )


def test_unreachable_prometheus_wins_over_fresh_annotation_values(
    *, make_pod, make_node, make_cluster, make_policy, make_metric, make_view, schedule
):
    policy = make_policy(
        metrics=[make_metric("latency"), make_metric("price", annotation="example.com/price")]
    )
    cluster = make_cluster(make_node("node-1", annotations={"example.com/price": "1"}))
    view = make_view(policy, {}, errors={"latency": (UNREACHABLE, "timed out after 5s")})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.fallback_reason == "Prometheus unreachable: timed out after 5s"


def test_other_query_errors_do_not_trigger_fallback_while_values_are_fresh(
    *, make_pod, make_node, make_cluster, latency_policy, make_view, schedule
):
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    view = make_view(
        latency_policy,
        {"latency": {"node-1": 0.3, "node-2": 0.2}},
        errors={"latency": (model.QueryErrorKind.BAD_QUERY, "parse error")},
    )

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[latency_policy], metrics=view)

    assert (decision.node, decision.fallback_reason) == ("node-2", "")


def test_no_fresh_value_on_any_feasible_node_makes_the_strategy_decide(
    *, make_pod, make_node, make_cluster, make_policy, make_metric, make_view, schedule, now
):
    policy = make_policy(
        metrics=[make_metric("latency", on_missing=model.OnMissing.EXCLUDE)],
        fallback=Strategy.ROUND_ROBIN,
    )
    cluster = make_cluster(make_node("node-1"), make_node("node-2"))
    stale = make_view(policy, {"latency": {"node-1": 0.1}}, refreshed_at=now - 600)

    decision = schedule(
        pod=make_pod(), snapshot=cluster, policies=[policy], metrics=stale, rr_counter=1
    )

    assert (decision.outcome, decision.node) == (model.Outcome.BIND, "node-2")
    assert decision.fallback_reason == "no fresh metric values for any feasible node"
    assert "fallback RoundRobin because no fresh metric values" in decision.message


def test_values_only_on_infeasible_nodes_count_as_no_fresh_values(
    *, make_pod, make_node, make_cluster, latency_policy, make_view, schedule
):
    cluster = make_cluster(make_node("node-1", unschedulable=True), make_node("node-2"))
    view = make_view(latency_policy, {"latency": {"node-1": 0.1}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[latency_policy], metrics=view)

    assert decision.node == "node-2"
    assert decision.fallback_reason == cycle.NO_FRESH_VALUES


def test_wait_strategy_leaves_the_pod_pending_and_says_why(
    *, make_pod, make_node, make_cluster, make_policy, make_view, schedule
):
    policy = make_policy(fallback=Strategy.WAIT)
    view = make_view(policy, {}, errors={"latency": (UNREACHABLE, "connection refused")})

    decision = schedule(
        pod=make_pod(), snapshot=make_cluster(make_node("node-1")), policies=[policy], metrics=view
    )

    assert (decision.outcome, decision.node) == (model.Outcome.WAIT, None)
    assert decision.fallback_reason == "Prometheus unreachable: connection refused"
    assert decision.message.startswith(
        "waiting for metrics: Prometheus unreachable: connection refused"
    )


def test_default_policy_with_wait_waits_for_a_policy(make_pod, uneven_cluster, schedule):
    decision = schedule(pod=make_pod(), snapshot=uneven_cluster, default_fallback=Strategy.WAIT)
    assert decision.outcome is model.Outcome.WAIT
    assert decision.message.startswith("waiting for a SchedulingPolicy")


@pytest.mark.parametrize("strategy", [s for s in Strategy if s is not Strategy.WAIT])
def test_fallback_never_picks_a_node_the_filters_rule_out(
    *, make_pod, uneven_cluster, schedule, strategy
):
    for attempt in range(8):
        decision = schedule(
            pod=make_pod(cpu=1000),  # does not fit node-3; node-4 is cordoned
            snapshot=uneven_cluster,
            default_fallback=strategy,
            rr_counter=attempt,
            seed=attempt,
        )
        assert decision.node in {"node-1", "node-2"}


def test_least_allocated_scores_like_kube_scheduler(make_node, make_pod):
    node = make_node(
        "node-1", cpu=4000, memory=8 * GIB, requested_cpu=1000, requested_memory=2 * GIB
    )
    pod = make_pod(cpu=1000, memory=2 * GIB)
    # cpu: (4000 - 2000) * 100 // 4000 = 50; memory: (8 - 4) * 100 // 8 = 50
    assert allocation_score(state=node, pod=pod, strategy=Strategy.LEAST_ALLOCATED) == 50
    assert allocation_score(state=node, pod=pod, strategy=Strategy.MOST_ALLOCATED) == 50
    # A container without requests counts as 100m and 200Mi, as in kube-scheduler.
    empty_pod = parse.pod_from_body(build_pod_body("empty"))
    assert (
        allocation_score(state=node, pod=empty_pod, strategy=Strategy.LEAST_ALLOCATED)
        == ((4000 - 1100) * 100 // 4000 + (6 * GIB - 200 * 1024**2) * 100 // (8 * GIB)) // 2
    )


def test_least_allocated_counts_defaults_per_container_like_kube_scheduler(make_node, make_pod):
    # One container asks 1 cpu, the other nothing: kube-scheduler's score counts 1.1 cpu
    # (the second container's 100m default), not 1 cpu.
    pod = dataclasses.replace(
        make_pod(cpu=1000, memory=GIB),
        nonzero_requests=model.Resources(milli_cpu=1100, memory=GIB + 200 * 1024**2),
    )
    # On the node: a pod of two request-less containers, 200m / 400Mi as scores count it.
    node = dataclasses.replace(
        make_node("node-1", cpu=4000, memory=8 * GIB),
        nonzero_requested=model.Resources(milli_cpu=200, memory=400 * 1024**2),
    )
    cpu = (4000 - 1300) * 100 // 4000
    memory = (8 * GIB - GIB - 600 * 1024**2) * 100 // (8 * GIB)
    assert allocation_score(state=node, pod=pod, strategy=Strategy.LEAST_ALLOCATED) == (
        (cpu + memory) // 2
    )


def allocation_score(*, state: model.NodeState, pod: model.PodInfo, strategy: Strategy) -> int:
    """The fallback's score of one node, as the cycle computes it for every row."""
    table = columns.NodeTable.build([state])
    rows = np.zeros(1, dtype=np.intp)
    found = node_resources_fit.scoring.allocation_scores(
        pod=pod, table=table, rows=rows, strategy=strategy
    )
    return int(found[0])
