"""A run of one pod class (``core.class_run``) decides every pod exactly as the cycle does for
one pod at a time.

Two runtime caches are driven through the same random workload: consecutive pods of a
few classes (plain replicas, a nodeSelector, a hard topology spread constraint, required
anti-affinity, a host port, a pod too big for most nodes), each assumed where it went,
between nodes added, changed and removed, other schedulers' pods (some with required
anti-affinity) bound and deleted, and nominated pods. One cache's pods are decided by
``cycle.schedule_one``, the other's as the scheduler decides them, by the run of their
class while consecutive pods share it at the same cache generation. Every decision (the
node, the message, every verdict with its scores, the decision record) is the same.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from metricsched.core import (
    class_run,
    cycle,
    decision_record,
    framework,
    model,
    parse,
    policy_defaults,
)
from metricsched.runtime import cache as cache_mod
from tests.unit.conftest import (
    NOW,
    SCHEDULER,
    build_metric_spec,
    build_metric_view,
    build_pod_info,
    build_policy,
)

NODES = tuple(f"node-{index}" for index in range(6))
ZONES = ("zone-a", "zone-b")
NAMES = frozenset({SCHEDULER})
Strategy = model.FallbackStrategy


def _node(name: str, cpu: int, zone: str, tainted: bool) -> model.NodeInfo:
    spec: dict[str, Any] = (
        {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]} if tainted else {}
    )
    return parse.node_from_body(
        {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone},
            },
            "spec": spec,
            "status": {"allocatable": {"cpu": str(cpu), "memory": "8Gi", "pods": "20"}},
        }
    )


def _anti(app: str, key: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            ]
        }
    }


def _class_pod(kind: int, name: str) -> model.PodInfo:
    """A pending pod of class ``kind``; pods of one kind differ only in name and uid."""
    spec: dict[str, Any] = {"schedulerName": SCHEDULER}
    app = f"web{kind}"
    cpu = "1900m" if kind == 5 else "250m"
    container: dict[str, Any] = {
        "name": "c",
        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
    }
    if kind == 1:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    elif kind == 2:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    elif kind == 3:
        spec["affinity"] = _anti(app, "kubernetes.io/hostname")
    elif kind == 4:
        container["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    spec["containers"] = [container]
    body = {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": app},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": app, "uid": f"rs-{kind}", "controller": True}
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return parse.pod_from_body(body)


def _other(index: int, node: str, cpu_m: int, anti: bool) -> model.PodInfo:
    body: dict[str, Any] = {
        "metadata": {
            "name": f"other-{index}",
            "namespace": "shop",
            "uid": f"uid-other-{index}",
            "labels": {"app": "other"},
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m"}}}],
        },
        "status": {"phase": "Running"},
    }
    if anti:  # repels class 0's pods from its zone
        body["spec"]["affinity"] = _anti("web0", "topology.kubernetes.io/zone")
    return parse.pod_from_body(body)


def _nominated(index: int, node: str) -> model.PodInfo:
    """Another scheduler's pod nominated to ``node`` ("": its nomination dropped)."""
    pod = build_pod_info(f"nominated-{index}", cpu=1500, labels={"app": "nominated"})
    return dataclasses.replace(
        pod, scheduler_name="default-scheduler", priority=10, nominated_node=node
    )


place = st.tuples(st.just("place"), st.integers(0, 5), st.integers(1, 4))
node_change = st.tuples(
    st.just("node"),
    st.sampled_from(NODES),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(ZONES),
    st.booleans(),
)
node_gone = st.tuples(st.just("gone"), st.sampled_from(NODES))
other_pod = st.tuples(
    st.just("other"),
    st.integers(0, 4),
    st.sampled_from(NODES),
    st.integers(0, 1500),
    st.sampled_from([False, False, False, True]),
)
other_gone = st.tuples(st.just("other-gone"), st.integers(0, 4))
nominate = st.tuples(st.just("nominate"), st.integers(0, 1), st.sampled_from(("", *NODES)))
steps = st.lists(
    st.one_of(place, place, place, place, node_change, node_gone, other_pod, other_gone, nominate),
    min_size=1,
    max_size=25,
)
clusters = st.lists(
    st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from(ZONES), st.booleans()),
    min_size=1,
    max_size=6,
)


def _cluster(shape: list[tuple[int, str, bool]]) -> cache_mod.ClusterCache:
    cache = cache_mod.ClusterCache()
    for name, (cpu, zone, tainted) in zip(NODES, shape, strict=False):
        cache.upsert_node(_node(name, cpu, zone, tainted))
    return cache


@settings(max_examples=150, deadline=None)
@given(
    shape=clusters,
    steps=steps,
    latencies=st.lists(st.sampled_from([0.1, 0.2, 0.2, 0.5]), min_size=6, max_size=6),
    by_metrics=st.booleans(),
    detail=st.booleans(),
    strategy=st.sampled_from([Strategy.LEAST_ALLOCATED, Strategy.MOST_ALLOCATED, Strategy.RANDOM]),
    cut=st.booleans(),
)
@example(  # a hard spread constraint: the next pod's filters change beyond the last node
    shape=[(4, "zone-a", False), (4, "zone-a", False), (4, "zone-b", False)],
    steps=[("place", 2, 4)],
    latencies=[0.1] * 6,
    by_metrics=False,
    detail=True,
    strategy=Strategy.LEAST_ALLOCATED,
    cut=True,
)
@example(  # a pod nominated mid-run counts on its node for the pods after it
    shape=[(2, "zone-a", False), (2, "zone-a", False)],
    steps=[("place", 0, 1), ("nominate", 0, "node-0"), ("place", 5, 1), ("place", 0, 3)],
    latencies=[0.1] * 6,
    by_metrics=False,
    detail=True,
    strategy=Strategy.LEAST_ALLOCATED,
    cut=True,
)
@example(  # a pod with anti-affinity bound mid-run repels the class from a whole zone
    shape=[(4, "zone-a", False), (4, "zone-a", False), (4, "zone-b", False)],
    steps=[("place", 0, 1), ("other", 0, "node-0", 100, True), ("place", 0, 3)],
    latencies=[0.1] * 6,
    by_metrics=False,
    detail=True,
    strategy=Strategy.LEAST_ALLOCATED,
    cut=False,
)
def test_a_run_decides_every_pod_as_the_cycle_does_one_at_a_time(
    *, shape, steps, latencies, by_metrics, detail, strategy, cut
):
    """``cut``: the run ends when the cache's generation moves, as in the scheduler;
    without, it serves its class whatever changed but the policies (the core's own
    guards keep it exact)."""
    policies: list[model.Policy] = []
    view: model.MetricView = {}
    if by_metrics:  # the policy's metric, a threshold and a burst penalty, blended
        chosen = dataclasses.replace(
            build_policy(
                metrics=[build_metric_spec("latency", threshold_max=0.4)], burst_penalty=5.0
            ),
            kube_weights=tuple(policy_defaults.DEFAULT_KUBE_WEIGHTS.items()),
        )
        policies = [chosen]
        view = build_metric_view(chosen, {"latency": dict(zip(NODES, latencies, strict=True))})
    alone, in_runs = _cluster(shape), _cluster(shape)
    memos = framework.Memo(), framework.Memo()
    run: class_run.Run | None = None
    runs_started = 0
    others: dict[int, model.PodInfo] = {}
    now = NOW
    for number, step in enumerate(steps):
        kind = step[0]
        if kind == "place":
            _, pod_class, count = step
            for copy in range(count):
                now += 0.5
                pod = _class_pod(pod_class, f"web-{number}-{copy}")
                snapshot = alone.snapshot(now=now)
                expected = cycle.schedule_one(
                    pod=pod,
                    snapshot=snapshot,
                    table=alone.table(snapshot),
                    policies=policies,
                    metrics=view,
                    default_fallback=strategy,
                    now=now,
                    scheduler_names=NAMES,
                    rr_counter=number,
                    seed=zlib.crc32(pod.uid.encode()),
                    detail=detail,
                    memo=memos[0],
                )
                generation = in_runs.generation if cut else 0
                snapshot = in_runs.snapshot(now=now)
                inputs = cycle.Inputs(
                    snapshot=snapshot,
                    table=in_runs.table(snapshot),
                    policies=policies,
                    metrics=view,
                    default_fallback=strategy,
                    scheduler_names=NAMES,
                    now=now,
                )
                if run is None or not run.admits(pod, generation=generation):
                    run = class_run.Run.start(
                        pod=pod, inputs=inputs, generation=generation, memo=memos[1]
                    )
                    runs_started += 1
                assert run is not None
                got = run.decide(pod, inputs, rr_counter=number, detail=detail)
                assert got == expected
                assert decision_record.annotation(
                    got, fallback_strategy=strategy, now=now
                ) == decision_record.annotation(expected, fallback_strategy=strategy, now=now)
                if expected.node is not None:
                    alone.assume(pod, expected.node, now=now)
                    in_runs.assume(pod, expected.node, now=now)
            continue
        for cache in (alone, in_runs):
            if kind == "node":
                _, name, cpu, zone, tainted = step
                cache.upsert_node(_node(name, cpu, zone, tainted))
            elif kind == "gone":
                cache.remove_node(model.NodeName(step[1]))
            elif kind == "other":
                _, index, node, cpu_m, anti = step
                others[index] = _other(index, node, cpu_m, anti)
                cache.upsert_pod(others[index], ours=False)
            elif kind == "other-gone" and step[1] in others:
                cache.remove_pod(others[step[1]].uid)
            elif kind == "nominate":
                cache.upsert_nominated(_nominated(step[1], step[2]))
        if kind == "other-gone":
            others.pop(step[1], None)  # type: ignore[call-overload]
    assert runs_started <= sum(step[2] for step in steps if step[0] == "place")


def test_pods_of_one_class_differ_only_in_name_uid_and_creation_time():
    one = _class_pod(0, "web-1")
    assert class_run.same_class(
        one, dataclasses.replace(_class_pod(0, "web-2"), creation_timestamp=3)
    )
    assert not class_run.same_class(one, _class_pod(1, "web-2"))
    assert not class_run.same_class(one, dataclasses.replace(one, labels={"app": "web9"}))


def _nothing() -> cycle.Inputs:
    """No node, no policy: what a run's start reads of the inputs is their policies."""
    return cycle.Inputs(
        snapshot=model.ClusterSnapshot(nodes={}),
        table=None,
        policies=(),
        metrics={},
        default_fallback=Strategy.LEAST_ALLOCATED,
        scheduler_names=NAMES,
        now=NOW,
    )


def test_a_run_serves_only_its_class_at_its_generation():
    pod = _class_pod(0, "web-1")
    run = class_run.Run.start(
        pod=pod,
        inputs=_nothing(),
        generation=7,
        memo=framework.Memo(),
    )
    assert run is not None
    assert run.admits(_class_pod(0, "web-2"), generation=7)
    assert not run.admits(_class_pod(0, "web-2"), generation=8)
    assert not run.admits(_class_pod(3, "web-2"), generation=7)


def test_a_pod_refused_whatever_the_nodes_starts_no_run():
    gated = dataclasses.replace(_class_pod(0, "web-1"), scheduling_gates=("wait",))
    assert (
        class_run.Run.start(
            pod=gated,
            inputs=_nothing(),
            generation=0,
            memo=framework.Memo(),
        )
        is None
    )


def test_only_classes_whose_filters_read_one_node_reuse_filter_answers():
    assert class_run.node_local(_class_pod(0, "a"))
    assert class_run.node_local(_class_pod(1, "a"))
    assert class_run.node_local(_class_pod(5, "a"))
    assert not class_run.node_local(_class_pod(2, "a"))  # topology spread
    assert not class_run.node_local(_class_pod(3, "a"))  # anti-affinity
    assert not class_run.node_local(_class_pod(4, "a"))  # host port
