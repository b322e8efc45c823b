"""What a move already made, and the pod being moved, weigh in the next decisions: a pod
moved off a node weighs in its samples until the per-pod answer stops showing it, and a
move is judged on its target by what the pod measurably uses, not by a declared amount.
(Found by the rebalance bench's scenario (e): a 10 s window under a 45-60 s pipeline shed
a node twice, and targets judged by a declared 200m took pods using 0.5-1.0 cores.)"""

from __future__ import annotations

import dataclasses

from metricsched.core import cycle, model, rebalance
from tests.unit.conftest import NOW, build_metric_view, build_policy
from tests.unit.rebalance.test_plan import moved, node_with, skipped
from tests.unit.rebalance.test_scale import CPU, CPU_POLICY, CPU_SPEC, cluster, sized

SCHEDULERS = frozenset({"metricsched"})
AMOUNT = model.EstimateSpec(
    source=model.EstimateFrom.AMOUNT, settle_s=60.0, resource=model.EstimateResource.CPU, amount=200
)
DECLARED_POLICY = dataclasses.replace(
    build_policy(metrics=[dataclasses.replace(CPU, estimate=AMOUNT)]), rebalance=CPU_SPEC
)


def usage(**cpu: float) -> model.PodUsage:
    return model.PodUsage(
        at=NOW - 5,
        cpu={f"shop/{name}": milli for name, milli in cpu.items()},
        memory={},
        workload_cpu={},
        workload_memory={},
        workload_pods={},
    )


def plan(
    snapshot: model.ClusterSnapshot,
    cpu: dict[str, float],
    *,
    policy: model.Policy,
    measured: model.PodUsage,
    history: tuple[rebalance.Eviction, ...] = (),
) -> rebalance.Plan:
    spec = policy.rebalance
    assert spec is not None
    view = build_metric_view(policy, {"cpu": cpu})
    view = {key: dataclasses.replace(series, usage=measured) for key, series in view.items()}
    values = {model.NodeName(n): v for n, v in cpu.items()}
    return rebalance.plan(
        policy=policy,
        inputs=cycle.Inputs(
            snapshot=snapshot,
            table=None,
            policies=(policy,),
            metrics=view,
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            scheduler_names=SCHEDULERS,
            now=NOW,
        ),
        outside_since={n: NOW - 600 for n, v in values.items() if spec.outside(v)},
        values=values,
        history=history,
    )


# --- a move already made --------------------------------------------------------------


def moved_off(pod: str, node: str) -> rebalance.Eviction:
    return rebalance.Eviction(
        pod=model.PodKey(f"shop/{pod}"), node=model.NodeName(node), time=NOW - 20
    )


def test_a_pod_moved_off_a_node_is_taken_out_of_its_samples_while_they_still_show_it():
    # 0.75 on 4 cpu, of which the pod moved 20 s ago still shows 1000m (0.25): the node
    # is at the trigger once it is gone, so nothing more moves off it.
    hot = node_with(
        "hot", sized("web-1", "hot", milli_cpu=500), sized("web-2", "hot", milli_cpu=500)
    )
    snapshot = cluster(hot, node_with("cool"))
    cpu = {"hot": 0.75, "cool": 0.0}
    still = plan(
        snapshot,
        cpu,
        policy=CPU_POLICY,
        measured=usage(gone=1000.0, **{"web-1": 500.0, "web-2": 500.0}),
        history=(moved_off("gone", "hot"),),
    )
    assert still.moves == ()
    assert still.nodes_due == 0

    # Once the per-pod answer no longer shows it, the samples do not either: the node is
    # judged by them alone, still past the trigger: two pods of 0.125 move (0.75 -> 0.5).
    shown = plan(
        snapshot,
        cpu,
        policy=CPU_POLICY,
        measured=usage(**{"web-1": 500.0, "web-2": 500.0}),
        history=(moved_off("gone", "hot"),),
    )
    assert shown.nodes_due == 1
    assert sorted(name for name, _, _ in moved(shown)) == ["web-1", "web-2"]


def test_a_would_be_move_of_a_dry_run_takes_nothing_off_its_node():
    # DryRun moves nothing: the pod is still on its node and in its samples.
    hot = node_with(
        "hot", sized("web-1", "hot", milli_cpu=500), sized("web-2", "hot", milli_cpu=500)
    )
    result = plan(
        cluster(hot, node_with("cool")),
        {"hot": 0.75, "cool": 0.0},
        policy=CPU_POLICY,
        measured=usage(**{"web-1": 1000.0, "web-2": 500.0}),
        history=(moved_off("web-1", "hot"),),
    )
    assert result.nodes_due == 1
    assert [name for name, _, _ in moved(result)] == ["web-2"]


# --- the pod being moved --------------------------------------------------------------


def test_a_target_is_judged_by_what_the_pod_measurably_uses_not_by_the_declared_amount():
    # Declared 200m (0.05 of 4 cpu) but the pod uses 1500m (0.375): on a target at 0.125
    # it would end at 0.5, past trigger - margin (0.375). By the declared amount, 0.175.
    hot = node_with("hot", sized("surge", "hot", milli_cpu=100))
    refused = plan(
        cluster(hot, node_with("cool")),
        {"hot": 1.0, "cool": 0.125},
        policy=DECLARED_POLICY,
        measured=usage(surge=1500.0),
    )
    assert skipped(refused) == {"surge": rebalance.Skip.NO_BETTER_NODE}

    # The same pod using 800m (0.2) ends at 0.325 there: it moves.
    taken = plan(
        cluster(hot, node_with("cool")),
        {"hot": 1.0, "cool": 0.125},
        policy=DECLARED_POLICY,
        measured=usage(surge=800.0),
    )
    assert moved(taken) == [("surge", "hot", "cool")]
    assert taken.moves[0].target_value == 0.125 + 0.2
