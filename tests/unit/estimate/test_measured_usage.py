"""estimate.from Measured: a pod counts what its workload's running pods measurably use,
until its own usage shows in a sample the node's metric covers; never twice.

Each scene: nodes of 4 cpu whose cpu utilisation was sampled ``SAMPLED_AT``, pods of a
Deployment "web" (ReplicaSets web-1a and web-2b: two revisions) bound to them, and the
per-pod usage answer (``model.PodUsage``) the runtime read in the same round.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from metricsched.core import columns, decision_record, estimate, explain, model, usage
from tests.unit.conftest import NOW
from tests.unit.estimate.test_estimate_arithmetic import THRESHOLD

SAMPLED_AT = NOW - 5


def measured(**fields: object) -> model.EstimateSpec:
    defaults: dict[str, object] = {
        "resource": model.EstimateResource.CPU,
        "settle_s": 300.0,
        "declared": False,
    }
    return model.EstimateSpec(source=model.EstimateFrom.MEASURED, **{**defaults, **fields})  # type: ignore[arg-type]


@pytest.fixture
def web(make_pod):
    """A pod of Deployment web (revision ``rs``), bound to ``node`` ``ago`` seconds before."""

    def make(name: str, node: str = "", *, ago: float = 0.0, rs: str = "1a", cpu: int = 50):
        pod = make_pod(name, cpu=cpu, labels={"app": "web", "pod-template-hash": rs})
        return dataclasses.replace(
            pod,
            owner=f"ReplicaSet/web-{rs}",
            controller=f"ReplicaSet/uid-{rs}",
            node_name=node,
            phase="Running" if node else "Pending",
            bound_at=NOW - ago if node else 0.0,
            limits=model.Resources(milli_cpu=cpu),
        )

    return make


def answer(pods: list[model.PodInfo], cpu: dict[str, float], *, at: float = SAMPLED_AT):
    return usage.pod_usage(at=at, cpu=cpu, memory={}, pods=pods)


@pytest.fixture
def cpu_policy(make_metric, make_policy):
    def make(spec: model.EstimateSpec) -> model.Policy:
        metric = dataclasses.replace(make_metric("cpu", threshold_max=0.8), estimate=spec)
        return make_policy(metrics=[metric])

    return make


@pytest.fixture
def decide(schedule, make_cluster, make_view, cpu_policy, make_node):
    def run(nodes, values, *, pod, pod_usage, spec=None):
        policy = cpu_policy(spec or measured())
        view = make_view(policy, {"cpu": values}, refreshed_at=SAMPLED_AT)
        key = model.MetricKey(policy.key, "cpu")
        view = {key: dataclasses.replace(view[key], usage=pod_usage)}
        states = [
            dataclasses.replace(make_node(name, cpu=4000), pods=tuple(pods))
            for name, pods in nodes.items()
        ]
        return schedule(pod=pod, snapshot=make_cluster(*states), policies=[policy], metrics=view)

    return run


# --- whose usage estimates a pod -----------------------------------------------------------


def test_a_deployments_pods_share_one_workload_across_revisions(web, make_pod):
    assert web("a", rs="1a").usage_workload == web("b", rs="2b").usage_workload
    assert web("a").usage_workload == "shop/Deployment/web"
    job = dataclasses.replace(make_pod("j-1"), owner="Job/nightly")
    assert job.usage_workload == "shop/Job/nightly"
    bare = make_pod("b-1", labels={"tier": "db"})
    assert bare.usage_workload == "shop/Pod/{tier=db}"
    assert make_pod("b-2", labels={"tier": "db"}).usage_workload == bare.usage_workload


def test_a_workloads_estimate_is_a_high_quantile_of_its_settled_pods_only(web):
    pods = [web(f"w{i}", "node-1", ago=600) for i in range(10)] + [web("new", "node-1", ago=5)]
    cpu = {f"shop/w{i}": 100.0 * (i + 1) for i in range(10)} | {"shop/new": 10.0}
    found = answer(pods, cpu, at=NOW)
    # p90 of 100..1000 (linear): 910; the pod bound 5 s ago (still ramping) is left out
    assert found.workload_cpu["shop/Deployment/web"] == pytest.approx(910.0)
    assert found.workload_pods["shop/Deployment/web"] == 10


# --- a workload's quantile outlives its pods for a while ----------------------------------


def test_a_workload_whose_pods_are_gone_keeps_its_quantile_for_a_while(web):
    # web's one replica (900m) was evicted to move it: the next answer has no pod of web,
    # and its replacement must be estimated by what web used, not by its 50m request.
    first = answer([web("w1", "node-1", ago=900)], {"shop/w1": 900.0}, at=NOW)
    later = usage.pod_usage(at=NOW + 30, cpu={}, memory={}, pods=[], previous=first)
    assert later.workload_cpu == {"shop/Deployment/web": pytest.approx(900.0)}
    assert later.workload_pods == {"shop/Deployment/web": 1}
    assert later.workload_at == {"shop/Deployment/web": NOW}  # when it was measured
    amount = usage.pod_amount(
        resource=model.EstimateResource.CPU,
        usage=later,
        workload="shop/Deployment/web",
        requested=50.0,
        limit=50.0,
        declared=0.0,
        factor=None,
    )
    assert (amount.value, amount.source) == (pytest.approx(900.0), "measured")


def test_a_remembered_quantile_expires_and_a_measured_one_replaces_it(web):
    first = answer([web("w1", "node-1", ago=900)], {"shop/w1": 900.0}, at=NOW)
    kept = usage.pod_usage(at=NOW + 300, cpu={}, memory={}, pods=[], previous=first)
    gone = usage.pod_usage(at=NOW + usage.REMEMBER_S + 1, cpu={}, memory={}, pods=[], previous=kept)
    assert "shop/Deployment/web" in kept.workload_cpu  # carried once, its time unchanged
    assert gone.workload_cpu == {} and gone.workload_at == {}
    back = usage.pod_usage(
        at=NOW + 60,
        cpu={"shop/w2": 300.0},
        memory={},
        pods=[web("w2", "node-2", ago=900)],
        previous=first,
    )
    assert back.workload_cpu == {"shop/Deployment/web": pytest.approx(300.0)}
    assert back.workload_at == {"shop/Deployment/web": NOW + 60}


def test_only_the_most_recently_measured_workloads_are_remembered(web, monkeypatch):
    monkeypatch.setattr(usage, "REMEMBER_MOST", 1)
    older = answer([web("w1", "node-1", ago=900)], {"shop/w1": 900.0}, at=NOW)
    other = dataclasses.replace(web("d1", "node-2", ago=900), owner="StatefulSet/db")
    both = usage.pod_usage(
        at=NOW + 10, cpu={"shop/d1": 200.0}, memory={}, pods=[other], previous=older
    )
    later = usage.pod_usage(at=NOW + 20, cpu={}, memory={}, pods=[], previous=both)
    assert set(both.workload_cpu) == {"shop/Deployment/web", "shop/StatefulSet/db"}
    assert set(later.workload_cpu) == {"shop/StatefulSet/db"}  # the newer one of the two
    assert set(later.workload_at) == {"shop/StatefulSet/db"}


# --- one pod's amount: measured, else declared, else requests/limits, else a floor -------


def test_a_pod_is_estimated_by_measured_then_declared_then_requests_then_a_floor():
    cpu = model.EstimateResource.CPU
    seen = model.PodUsage(
        at=NOW,
        cpu={},
        memory={},
        workload_cpu={"shop/Deployment/web": 420.0},
        workload_memory={},
        workload_pods={"shop/Deployment/web": 3},
    )

    def amount(**kw: object) -> usage.Amount:
        args: dict[str, object] = {
            "resource": cpu,
            "usage": seen,
            "workload": "shop/Deployment/web",
            "requested": 50.0,
            "limit": 200.0,
            "declared": 0.0,
            "factor": None,
        }
        return usage.pod_amount(**{**args, **kw})  # type: ignore[arg-type]

    assert amount() == usage.Amount(420.0, "measured", 3)
    assert amount(workload="shop/Deployment/api", declared=400.0) == usage.Amount(400.0, "declared")
    assert amount(usage=None).value == pytest.approx(200 * usage.CPU_FACTOR)  # max(req, lim)
    assert amount(usage=None, factor=2.0).value == pytest.approx(400.0)
    assert amount(usage=None, requested=0.0, limit=0.0) == usage.Amount(
        usage.FLOOR_CPU_MILLI, "floor"
    )
    memory = usage.pod_amount(
        resource=model.EstimateResource.MEMORY,
        usage=None,
        workload="x",
        requested=1000.0,
        limit=0.0,
        declared=0.0,
        factor=None,
    )
    assert memory.value == pytest.approx(1000 * usage.MEMORY_FACTOR)


# --- a brand-new workload: its starting pods, a lower bound ------------------------------


def test_a_workload_without_settled_pods_keeps_its_starting_pods_quantile_apart(web, make_pod):
    starting = [web(f"s{i}", "node-1", ago=20) for i in range(3)]
    quiet = web("s3", "node-1", ago=10)  # shows nothing yet: not evidence of anything
    settled_db = dataclasses.replace(
        make_pod("db-0", labels={"tier": "db"}), node_name="node-1", bound_at=NOW - 900
    )
    young_db = dataclasses.replace(settled_db, name="db-1", bound_at=NOW - 20)
    cpu = {"shop/s0": 200.0, "shop/s1": 250.0, "shop/s2": 300.0, "shop/s3": 0.0}
    found = answer(
        [*starting, quiet, settled_db, young_db],
        cpu | {"shop/db-0": 500.0, "shop/db-1": 900.0},
        at=NOW,
    )
    assert "shop/Deployment/web" not in found.workload_cpu
    assert found.starting_cpu == {"shop/Deployment/web": pytest.approx(290.0)}  # p90, 3 pods
    assert found.starting_pods == {"shop/Deployment/web": 3}
    # db has a settled pod: it is estimated from that one alone, its young pod is not kept
    assert found.workload_cpu == {"shop/Pod/{tier=db}": 500.0}


def test_starting_pods_raise_an_undeclared_estimate_and_never_lower_it():
    cpu = model.EstimateResource.CPU
    seen = model.PodUsage(
        at=NOW,
        cpu={},
        memory={},
        workload_cpu={"shop/Deployment/old": 80.0},
        workload_memory={},
        workload_pods={"shop/Deployment/old": 4},
        starting_cpu={
            "shop/Deployment/web": 290.0,
            "shop/Deployment/old": 900.0,
            "shop/Job/x": 5.0,
        },
        starting_pods={"shop/Deployment/web": 3, "shop/Deployment/old": 2, "shop/Job/x": 1},
    )

    def amount(workload: str, **kw: object) -> usage.Amount:
        args: dict[str, object] = {
            "resource": cpu,
            "usage": seen,
            "workload": workload,
            "requested": 50.0,
            "limit": 50.0,
            "declared": 0.0,
            "factor": None,
        }
        return usage.pod_amount(**{**args, **kw})  # type: ignore[arg-type]

    assert amount("shop/Deployment/web") == usage.Amount(290.0, "starting", 3)
    # below what requests say (50m x 0.85): the requests stand
    assert amount("shop/Job/x") == usage.Amount(pytest.approx(50 * usage.CPU_FACTOR), "requests")
    # settled pods measured: they decide, lower or not
    assert amount("shop/Deployment/old") == usage.Amount(80.0, "measured", 4)
    # a declaration is the user's word: starting pods do not override it
    assert amount("shop/Deployment/web", declared=100.0) == usage.Amount(100.0, "declared")
    text = usage.describe(
        amount("shop/Deployment/web"), resource=cpu, workload="shop/Deployment/web"
    )
    assert text == "web's 0.29 cores so far (p90 of 3 starting pods, more than requests say)"


def test_a_new_workloads_burst_counts_what_its_starting_pods_already_show(web, decide):
    # Seven pods of web bound 20 s ago (settling takes 120 s), each showing 300m so far;
    # requests say 50m. The node reads 0.75 with them in it: one more pod counted by
    # requests (0.76) would fit under 0.8, counted at 300m (0.825) it does not.
    busy = [web(f"w{i}", "node-1", ago=20) for i in range(7)]
    shows = answer(busy, {f"shop/w{i}": 300.0 for i in range(7)})
    blind = dataclasses.replace(shows, starting_cpu={}, starting_pods={})  # as before
    by_requests = decide({"node-1": busy}, {"node-1": 0.75}, pod=web("w9"), pod_usage=blind)
    by_starting = decide({"node-1": busy}, {"node-1": 0.75}, pod=web("w9"), pod_usage=shows)
    assert by_requests.node == "node-1"
    assert by_starting.outcome is model.Outcome.UNSCHEDULABLE
    assert THRESHOLD in by_starting.message
    # the starting pods are not counted twice: they show their 300m in the sample
    roomy = decide({"node-1": busy}, {"node-1": 0.6}, pod=web("w9"), pod_usage=shows)
    verdict = next(v for v in roomy.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx(300 / 4000)
    assert "web's 0.3 cores so far (p90 of 7 starting pods" in roomy.message


# --- what the cycle adds -------------------------------------------------------------------


def test_a_scale_out_counts_each_new_pod_at_its_siblings_measured_usage(web, decide):
    # Two settled pods of web measure 400m each (the sample shows them). One new pod bound
    # 2 s ago (not in the sample, not measured): 0.4 + 0.1 (it) + 0.1 (the pod placed) = 0.6;
    # with requests alone (50m x 0.85) the node would read 0.42.
    old = [web("w1", "node-1", ago=900), web("w2", "node-1", ago=900)]
    fresh = web("w3", "node-1", ago=2, rs="2b")
    pod_usage = answer([*old, fresh], {"shop/w1": 400.0, "shop/w2": 400.0})
    decision = decide(
        {"node-1": [*old, fresh]}, {"node-1": 0.4}, pod=web("w4", rs="2b"), pod_usage=pod_usage
    )
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx(0.2)
    # the Scheduled event names what the estimate rests on
    assert "cpu 0.4 (+0.2 est.; this pod: web's measured 0.4 cores (p90 of 2 pods))" in (
        decision.message
    )


def test_a_pod_whose_usage_shows_in_the_sample_is_never_counted_twice(web, decide):
    old = [web("w1", "node-1", ago=900), web("w2", "node-1", ago=900)]
    shown = web("w3", "node-1", ago=60)  # within settleTime, but measured at 400m already
    pod_usage = answer([*old, shown], {"shop/w1": 400.0, "shop/w2": 400.0, "shop/w3": 400.0})
    decision = decide(
        {"node-1": [*old, shown]}, {"node-1": 0.5}, pod=web("w4"), pod_usage=pod_usage
    )
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx(0.1)  # the placed pod only


def test_a_pod_showing_part_of_its_usage_counts_the_rest(web, decide):
    old = [web("w1", "node-1", ago=900)]
    ramping = web("w2", "node-1", ago=20)  # measured 100m of the workload's 400m so far
    pod_usage = answer([*old, ramping], {"shop/w1": 400.0, "shop/w2": 100.0})
    decision = decide(
        {"node-1": [*old, ramping]}, {"node-1": 0.3}, pod=web("w3"), pod_usage=pod_usage
    )
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx((300 + 400) / 4000)


def test_a_measurement_newer_than_the_nodes_sample_is_not_subtracted(web, decide):
    old = [web("w1", "node-1", ago=900)]
    shown = web("w2", "node-1", ago=60)
    later = answer([*old, shown], {"shop/w1": 400.0, "shop/w2": 400.0}, at=SAMPLED_AT + 30)
    decision = decide({"node-1": [*old, shown]}, {"node-1": 0.3}, pod=web("w3"), pod_usage=later)
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    # the sample may not show w2 yet: it counts whole, beside the placed pod
    assert verdict.metrics[0].estimate == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        (model.EstimateFrom.AMOUNT, {"amount": 400}),
        (model.EstimateFrom.REQUESTS, {"factor": 8.0}),  # 50m x 8
        (model.EstimateFrom.LIMITS, {"factor": 8.0}),
    ],
)
def test_a_declared_estimate_counts_only_what_the_sample_does_not_show_yet(
    web, decide, source, fields
):
    # Declared 400m a pod; w2, bound 60 s ago, measures 300m in a sample the node's covers:
    # it adds the 100m left, not 400m again (a double declaration would hold pods back
    # for the whole settleTime); the pod being placed counts its 400m.
    spec = model.EstimateSpec(
        source=source, resource=model.EstimateResource.CPU, settle_s=300.0, **fields
    )
    old = [web("w1", "node-1", ago=900)]
    shown = web("w2", "node-1", ago=60)
    pod_usage = answer([*old, shown], {"shop/w1": 400.0, "shop/w2": 300.0})
    decision = decide(
        {"node-1": [*old, shown]}, {"node-1": 0.3}, pod=web("w3"), pod_usage=pod_usage, spec=spec
    )
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx((100 + 400) / 4000)
    # A measurement newer than the node's sample: the sample may not show it; counted whole.
    later = answer([*old, shown], {"shop/w1": 400.0, "shop/w2": 300.0}, at=SAMPLED_AT + 30)
    decision = decide(
        {"node-1": [*old, shown]}, {"node-1": 0.3}, pod=web("w3"), pod_usage=later, spec=spec
    )
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx((400 + 400) / 4000)


def test_settle_time_is_the_upper_bound_for_a_pod_never_measured(web, decide):
    gone_quiet = web("w1", "node-1", ago=400)  # bound before settleTime (300 s), unmeasured
    decision = decide({"node-1": [gone_quiet]}, {"node-1": 0.3}, pod=web("w2"), pod_usage=None)
    verdict = next(v for v in decision.verdicts if v.node == "node-1")
    assert verdict.metrics[0].estimate == pytest.approx(50 * usage.CPU_FACTOR / 4000)


def test_other_schedulers_pods_count_by_their_own_workloads_usage(web, decide, make_pod):
    theirs = dataclasses.replace(
        make_pod("batch-1", cpu=100, labels={"job": "x"}),
        owner="Job/etl",
        scheduler_name="default-scheduler",
        node_name="node-1",
        phase="Running",
        bound_at=NOW - 3,
        limits=model.Resources(milli_cpu=100),
    )
    settled = dataclasses.replace(theirs, name="batch-0", bound_at=NOW - 900)
    pod_usage = answer([settled, theirs], {"shop/batch-0": 2000.0})
    decision = decide(
        {"node-1": [settled, theirs]}, {"node-1": 0.55}, pod=web("w1"), pod_usage=pod_usage
    )
    assert decision.outcome is model.Outcome.UNSCHEDULABLE  # 0.55 + 0.5 + own
    assert THRESHOLD in decision.message


def test_a_brand_new_workloads_first_burst_before_any_pod_shows_is_protected_by_a_declaration(
    web, decide
):
    # No sibling measured: requests (50m) understate a 400m pod; a declared amount does not.
    busy = [web(f"w{i}", "node-1", ago=2) for i in range(7)]
    by_requests = decide({"node-1": busy}, {"node-1": 0.1}, pod=web("w9"), pod_usage=None)
    declared = decide(
        {"node-1": busy},
        {"node-1": 0.1},
        pod=web("w9"),
        pod_usage=None,
        spec=measured(amount=400),
    )
    assert by_requests.node == "node-1"
    assert declared.outcome is model.Outcome.UNSCHEDULABLE  # 0.1 + 8 x 0.1 > 0.8


def test_measured_replaces_the_burst_penalty(cpu_policy):
    assert estimate.replaces_burst_penalty(cpu_policy(measured()))


def test_a_pod_of_a_measured_workload_is_counted_not_penalised(web, cpu_policy):
    policy = cpu_policy(measured())
    old = [web("w1", "node-1", ago=900)]
    pod_usage = answer(old, {"shop/w1": 400.0})
    assert estimate.replaces_burst_penalty(policy, web("w2"), lambda _: pod_usage)
    declared = cpu_policy(measured(amount=400))
    assert estimate.replaces_burst_penalty(declared, web("w2"), lambda _: None)


def test_a_new_workloads_pods_keep_the_burst_penalty(web, cpu_policy, make_pod):
    # Issue 27's scenario a: a brand-new workload's pods are counted from requests x
    # 0.85 (50m here, using 400m): without the penalty a burst piled onto the coolest
    # nodes (hottest 2.5 against kube-scheduler's 1.9), so they keep it.
    policy = cpu_policy(measured())
    stranger = make_pod("new-1", labels={"app": "new"}, cpu=50)
    pod_usage = answer([web("w1", "node-1", ago=900)], {"shop/w1": 400.0})
    assert not estimate.replaces_burst_penalty(policy, stranger, lambda _: pod_usage)
    assert not estimate.replaces_burst_penalty(policy, stranger, lambda _: None)


def test_a_new_workloads_burst_is_spread_by_the_penalty(
    *, web, make_metric, make_policy, make_view, make_node, make_cluster, schedule
):
    # Three nodes, the first cooler; six pods of a workload nothing has measured, each
    # counted at 50m x 0.85 (~0.01 of a 4-cpu node): by the estimate alone node-1 stays
    # the best for all six; the penalty (30 points a recent bind here) spreads them.
    metric = dataclasses.replace(
        make_metric("cpu", threshold_max=0.8, tolerance_percent=0.0), estimate=measured()
    )
    policy = make_policy(metrics=[metric], burst_penalty=30.0)
    values = {"node-1": 0.30, "node-2": 0.36, "node-3": 0.42}
    view = make_view(policy, {"cpu": values}, refreshed_at=SAMPLED_AT)
    placed: dict[str, list[model.PodInfo]] = {name: [] for name in values}
    for k in range(6):
        pod = web(f"n{k}", rs="9z")
        states = [
            dataclasses.replace(
                make_node(name, cpu=4000),
                pods=tuple(pods),
                recent_binds=tuple(p.bound_at for p in pods),
            )
            for name, pods in placed.items()
        ]
        decision = schedule(
            pod=pod, snapshot=make_cluster(*states), policies=[policy], metrics=view
        )
        assert decision.outcome is model.Outcome.BIND
        node = str(decision.node)
        placed[node].append(
            dataclasses.replace(pod, node_name=node, phase="Running", bound_at=NOW - 1)
        )
    counts = {name: len(pods) for name, pods in placed.items()}
    assert counts == {"node-1": 4, "node-2": 2, "node-3": 0}  # by the estimate alone: 6, 0, 0


# --- what explain lists --------------------------------------------------------------------


def test_explain_lists_the_pods_still_counted_with_their_amount_and_deadline(
    web, make_cluster, make_node, make_metric
):
    old = [web("w1", "node-1", ago=900), web("w2", "node-1", ago=900)]
    ramping = web("w3", "node-1", ago=20)
    shown = web("w4", "node-2", ago=30)
    pod_usage = answer(
        [*old, ramping, shown],
        {"shop/w1": 400.0, "shop/w2": 400.0, "shop/w3": 100.0, "shop/w4": 400.0},
    )
    snapshot = make_cluster(
        dataclasses.replace(make_node("node-1", cpu=4000), pods=(*old, ramping)),
        dataclasses.replace(make_node("node-2", cpu=4000), pods=(shown,)),
    )
    metric = dataclasses.replace(make_metric("cpu", threshold_max=0.8), estimate=measured())
    counted = estimate.still_counted(
        metric=metric,
        table=columns.NodeTable.of(snapshot),
        refreshed={model.NodeName("node-1"): SAMPLED_AT, model.NodeName("node-2"): SAMPLED_AT},
        usage=pod_usage,
    )
    # w3 adds the 300m it does not show yet; w4 shows all of its 400m: not listed
    assert [(c.node, c.pod) for c in counted] == [("node-1", "shop/w3")]
    assert counted[0].share == pytest.approx(300 / 4000)
    assert counted[0].until == pytest.approx(NOW - 20 + 300)
    text = explain.render_counted("cpu", counted, now=NOW)
    assert "shop/w3" in text and "+0.075" in text and "280s" in text
    assert "web's measured 0.4 cores (p90 of 2 pods), less the 0.1 cores it shows" in text


def test_the_decision_record_keeps_what_the_estimate_rested_on(web, decide):
    old = [web("w1", "node-1", ago=900)]
    pod_usage = answer(old, {"shop/w1": 400.0})
    decision = decide({"node-1": old}, {"node-1": 0.4}, pod=web("w2"), pod_usage=pod_usage)
    assert decision.estimate_basis == {"cpu": "web's measured 0.4 cores (p90 of 1 pod)"}
    text = decision_record.annotation(
        decision, fallback_strategy=model.FallbackStrategy.LEAST_ALLOCATED, now=NOW
    )
    record = decision_record.decode(text)
    assert record.basis == {"cpu": "web's measured 0.4 cores (p90 of 1 pod)"}
    shown = explain.render_recorded(record, bound_to="node-1")
    assert "Estimate:  cpu: this pod counted as web's measured 0.4 cores (p90 of 1 pod)" in shown


def test_measured_amounts_kept_beside_the_table_follow_a_rewritten_row(
    web, make_cluster, make_node, make_metric
):
    # The runtime's table lives across cycles: what was looked up for a row is reused
    # until the row is laid out again, then looked up anew.
    first = web("w1", "node-1", ago=60, rs="1a")
    other = dataclasses.replace(
        web("j1", "node-1", ago=60), owner="Job/etl", labels={}, name="j1", uid="uid-j1"
    )
    settled = [
        web("s1", "node-2", ago=900),
        dataclasses.replace(other, name="j0", bound_at=NOW - 900, node_name="node-2", uid="uid-j0"),
    ]
    pod_usage = answer([*settled, first, other], {"shop/s1": 400.0, "shop/j0": 2000.0})
    snapshot = make_cluster(
        dataclasses.replace(make_node("node-1", cpu=4000), pods=(first,)),
        dataclasses.replace(make_node("node-2", cpu=4000), pods=tuple(settled)),
    )
    table = columns.NodeTable.of(snapshot)
    metric = dataclasses.replace(make_metric("cpu", threshold_max=0.8), estimate=measured())
    rows = np.array([table.rows[model.NodeName("node-1")]])

    def added() -> float:
        return float(
            estimate.estimates(
                metric=metric,
                pod=web("new", rs="2b"),
                table=table,
                rows=rows,
                refreshed=np.array([SAMPLED_AT]),
                learned=None,
                usage=pod_usage,
            )[0]
        )

    assert added() == pytest.approx((400 + 400) / 4000)  # w1 at web's 400m, and the pod
    table.recent.fill(int(rows[0]), [other])  # node-1 now holds a pod of the Job instead
    assert added() == pytest.approx((2000 + 400) / 4000)


def test_explain_and_the_cycle_count_the_same_pods_by_the_same_amounts(
    web, make_cluster, make_node, make_metric, make_pod
):
    # One rule read twice: what explain lists on a node sums to what the cycle adds
    # there for the recent pods (its estimate less the pod being placed), whatever each
    # pod's source: measured, partly shown, from requests, or the floor.
    measured_pods = [web("w1", "node-1", ago=900), web("w2", "node-1", ago=20)]
    from_requests = dataclasses.replace(
        make_pod("r1", cpu=600), node_name="node-1", phase="Running", bound_at=NOW - 10
    )
    floor = dataclasses.replace(
        make_pod("f1", cpu=0), node_name="node-2", phase="Running", bound_at=NOW - 10
    )
    shown = web("w3", "node-2", ago=40)
    pods = [*measured_pods, from_requests, floor, shown]
    pod_usage = answer(pods, {"shop/w1": 400.0, "shop/w2": 150.0, "shop/w3": 400.0})
    snapshot = make_cluster(
        dataclasses.replace(make_node("node-1", cpu=4000), pods=(*measured_pods, from_requests)),
        dataclasses.replace(make_node("node-2", cpu=8000), pods=(floor, shown)),
    )
    table = columns.NodeTable.of(snapshot)
    metric = dataclasses.replace(make_metric("cpu", threshold_max=0.8), estimate=measured())
    names = [model.NodeName("node-1"), model.NodeName("node-2")]
    placed = web("new")
    rows = np.array([table.rows[name] for name in names])
    added = estimate.estimates(
        metric=metric,
        pod=placed,
        table=table,
        rows=rows,
        refreshed=np.array([SAMPLED_AT, SAMPLED_AT]),
        learned=None,
        usage=pod_usage,
    )
    counted = estimate.still_counted(
        metric=metric,
        table=table,
        refreshed=dict.fromkeys(names, SAMPLED_AT),
        usage=pod_usage,
    )
    own = estimate.own_amount(metric.estimate, placed, pod_usage).value
    for name, size, total in zip(names, (4000, 8000), added, strict=True):
        listed = sum(c.share for c in counted if c.node == name)
        assert listed == pytest.approx(total - own / size)
    assert {c.pod for c in counted} == {"shop/w2", "shop/r1", "shop/f1"}
    assert {c.pod: c.basis for c in counted} == {
        "shop/w2": "web's measured 0.4 cores (p90 of 1 pod), less the 0.15 cores it shows",
        "shop/r1": "0.51 cores from requests/limits (no measured pods of pods {app=web} yet)",
        "shop/f1": "the floor of 0.25 cores (no requests, no measured pods of pods {app=web} yet)",
    }
