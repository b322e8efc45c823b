"""Rebalancing that holds at scale (issue 32): a stop condition per node and per pass,
acceptance by improvement, victims by contribution, and several triggers."""

from __future__ import annotations

import dataclasses

from metricsched.core import cycle, model, rebalance
from tests.unit.conftest import NOW, build_metric_spec, build_metric_view, build_policy
from tests.unit.rebalance.test_plan import SPEC, moved, node_with, placed, skipped

SCHEDULERS = frozenset({"metricsched"})
REQUESTS = model.EstimateSpec(
    source=model.EstimateFrom.REQUESTS, settle_s=60.0, resource=model.EstimateResource.CPU
)
MEASURED = dataclasses.replace(REQUESTS, source=model.EstimateFrom.MEASURED, declared=False)
# A cpu utilisation trigger (resource-backed: each pod's share is known). Dyadic numbers
# so that the room and the source's value after a move are exact.
CPU = dataclasses.replace(build_metric_spec("cpu", threshold_max=0.5), estimate=REQUESTS)
CPU_SPEC = dataclasses.replace(
    SPEC, metric="cpu", above=0.5, margin=0.125, max_per_node=10, max_total=10
)
CPU_POLICY = dataclasses.replace(build_policy(metrics=[CPU]), rebalance=CPU_SPEC)


def sized(name: str, node: str, *, milli_cpu: int, created: float = NOW - 3600) -> model.PodInfo:
    pod = placed(name, node, created=created)
    requests = dataclasses.replace(pod.requests, milli_cpu=milli_cpu)
    return dataclasses.replace(pod, requests=requests)


def run_cpu(
    snapshot: model.ClusterSnapshot,
    cpu: dict[str, float],
    *,
    policy: model.Policy = CPU_POLICY,
    view: model.MetricView | None = None,
    more: tuple[dict[str, float], ...] = (),
) -> rebalance.Plan:
    """The plan for ``cpu`` values (nodes past the trigger since 10 minutes ago)."""
    spec = policy.rebalance
    assert spec is not None
    values = {model.NodeName(n): v for n, v in cpu.items()}
    more_values = tuple({model.NodeName(n): v for n, v in m.items()} for m in more)
    outside = {n: NOW - 600 for n, v in values.items() if spec.outside(v)}
    return rebalance.plan(
        policy=policy,
        inputs=cycle.Inputs(
            snapshot=snapshot,
            table=None,
            policies=(policy,),
            metrics=view or build_metric_view(policy, {"cpu": cpu}),
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            scheduler_names=SCHEDULERS,
            now=NOW,
        ),
        outside_since=outside,
        values=values,
        **({"more_values": more_values} if more_values else {}),
        history=(),
    )


def cluster(*states: model.NodeState) -> model.ClusterSnapshot:
    return model.ClusterSnapshot(nodes={s.node.name: s for s in states})


# --- the stop condition --------------------------------------------------------------


def test_a_node_the_moves_decided_bring_to_the_trigger_gives_up_no_more_pods():
    # 0.625 with four pods of 0.125 each: one move brings it to 0.5, the trigger.
    hot = node_with("hot", *(sized(f"web-{i}", "hot", milli_cpu=500) for i in range(4)))
    plan = run_cpu(cluster(hot, node_with("cool")), {"hot": 0.625, "cool": 0.0})

    assert len(plan.moves) == 1
    assert set(skipped(plan).values()) == {rebalance.Skip.RELIEVED}


def test_a_pass_stops_once_the_pooled_room_inside_the_trigger_is_used_up():
    # Room for one pod of 0.125 under 0.375 on each cool node: two moves, then none
    # (without a dry run), though the hot node is still past the trigger.
    hot = node_with("hot", *(sized(f"web-{i}", "hot", milli_cpu=500) for i in range(4)))
    snapshot = cluster(hot, node_with("cool-a"), node_with("cool-b"))
    plan = run_cpu(snapshot, {"hot": 1.0, "cool-a": 0.25, "cool-b": 0.25})

    assert sorted(m.target for m in plan.moves) == ["cool-a", "cool-b"]
    assert set(skipped(plan).values()) == {rebalance.Skip.NO_ROOM}


def test_without_any_room_inside_the_trigger_no_dry_run_is_spent():
    hot = node_with("hot", sized("web-1", "hot", milli_cpu=500))
    plan = run_cpu(cluster(hot, node_with("warm")), {"hot": 1.0, "warm": 0.4})
    assert skipped(plan) == {"web-1": rebalance.Skip.NO_ROOM}


# --- acceptance by improvement ---------------------------------------------------------


def test_a_move_that_would_leave_the_target_hotter_than_the_source_is_refused():
    # 0.625 - 0.25 leaves the source at 0.375; a target at 0.125 + 0.25 = 0.375 is inside
    # the trigger by the margin but not the margin below the source: the heat would move.
    policy = dataclasses.replace(CPU_POLICY, rebalance=dataclasses.replace(CPU_SPEC, margin=0.0625))
    hot = node_with("hot", sized("big", "hot", milli_cpu=1000))
    refused = run_cpu(cluster(hot, node_with("cool")), {"hot": 0.625, "cool": 0.125}, policy=policy)
    assert skipped(refused) == {"big": rebalance.Skip.NO_BETTER_NODE}

    taken = run_cpu(cluster(hot, node_with("cool")), {"hot": 0.625, "cool": 0.0}, policy=policy)
    assert moved(taken) == [("big", "hot", "cool")]


# --- victims by contribution -----------------------------------------------------------


def test_the_pod_that_measurably_uses_most_goes_first_whatever_its_age():
    metric = dataclasses.replace(CPU, estimate=MEASURED)
    spec = dataclasses.replace(CPU_SPEC, max_per_node=1, margin=0.05)
    policy = dataclasses.replace(build_policy(metrics=[metric]), rebalance=spec)
    hot = node_with(
        "hot",
        sized("small", "hot", milli_cpu=200, created=NOW - 9000),
        sized("big", "hot", milli_cpu=200, created=NOW - 1000),
        sized("mid", "hot", milli_cpu=200, created=NOW - 5000),
    )
    view = build_metric_view(policy, {"cpu": {"hot": 0.9, "cool": 0.0}})
    usage = model.PodUsage(
        at=NOW - 10,
        cpu={"shop/small": 100.0, "shop/big": 1500.0, "shop/mid": 500.0},
        memory={},
        workload_cpu={},
        workload_memory={},
        workload_pods={},
    )
    view = {key: dataclasses.replace(series, usage=usage) for key, series in view.items()}
    plan = run_cpu(
        cluster(hot, node_with("cool")), {"hot": 0.9, "cool": 0.0}, policy=policy, view=view
    )

    assert moved(plan) == [("big", "hot", "cool")]
    assert skipped(plan) == {"mid": rebalance.Skip.NODE_LIMIT, "small": rebalance.Skip.NODE_LIMIT}


# --- several triggers ------------------------------------------------------------------

LATENCY = build_metric_spec("latency", threshold_max=0.5)
TWO = dataclasses.replace(
    SPEC,
    more_triggers=(model.Trigger(metric="cpu", above=0.8, below=None, margin=0.05),),
    max_per_workload=1000,
)
TWO_POLICY = dataclasses.replace(
    build_policy(metrics=[LATENCY, build_metric_spec("cpu")]), rebalance=TWO
)


def run_two(latency: dict[str, float], cpu: dict[str, float]) -> rebalance.Plan:
    snapshot = cluster(node_with("hot", placed("web-1", "hot")), node_with("cool"))
    values = {model.NodeName(n): v for n, v in latency.items()}
    more = ({model.NodeName(n): v for n, v in cpu.items()},)
    outside = rebalance.track_outside(
        spec=TWO, previous={}, values=values, now=NOW - 600, more_values=more
    )
    return rebalance.plan(
        policy=TWO_POLICY,
        inputs=cycle.Inputs(
            snapshot=snapshot,
            table=None,
            policies=(TWO_POLICY,),
            metrics=build_metric_view(TWO_POLICY, {"latency": latency, "cpu": cpu}),
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            scheduler_names=SCHEDULERS,
            now=NOW,
        ),
        outside_since=outside,
        values=values,
        more_values=more,
        history=(),
    )


def test_a_node_past_any_one_of_its_triggers_for_the_window_is_due():
    plan = run_two({"hot": 0.2, "cool": 0.2}, {"hot": 0.9, "cool": 0.1})
    assert moved(plan) == [("web-1", "hot", "cool")]
    (move,) = plan.moves
    assert move.trigger is not None and move.trigger.metric == "cpu"
    text = rebalance.message(move, policy=TWO_POLICY, dry_run=True)
    assert "cpu 0.9 above 0.8" in text


def test_no_trigger_past_means_no_node_is_due():
    plan = run_two({"hot": 0.4, "cool": 0.2}, {"hot": 0.7, "cool": 0.1})
    assert (plan.nodes_outside, plan.nodes_due, plan.moves) == (0, 0, ())


def test_the_target_must_be_inside_every_trigger_by_its_margin():
    # Latency drives the move; the only other node is inside on latency but too close to
    # the cpu trigger.
    plan = run_two({"hot": 0.8, "cool": 0.2}, {"hot": 0.5, "cool": 0.78})
    assert skipped(plan) == {"web-1": rebalance.Skip.NO_BETTER_NODE}
