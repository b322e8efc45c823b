"""The learner turns how a node's metric moved after binds into learned estimates, and
keeps only clean experiments."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import columns, model
from metricsched.runtime import learner

T0 = 1_700_000_000.0
KEY = model.MetricKey(model.PolicyKey("shop/cpu-aware"), "cpu")
NODES = ("node-1", "node-2", "node-3")


def metric(source="Learned", **fields) -> model.MetricSpec:
    return model.MetricSpec(
        name="cpu",
        source=model.PrometheusSource(query="up", node_label="node"),
        weight=1,
        goal=model.Goal.MINIMIZE,
        threshold_min=None,
        threshold_max=0.8,
        on_missing=model.OnMissing.NEUTRAL,
        estimate=model.EstimateSpec(source=model.EstimateFrom(source), settle_s=30.0, **fields),
    )


def series(at: float, values: dict[str, float]) -> model.MetricSeries:
    return model.MetricSeries(
        values={model.NodeName(n): model.MetricSample(v, at) for n, v in values.items()},
        last_refresh=at,
        error=None,
        error_message="",
    )


@pytest.fixture
def table(make_node, make_pod):
    """Nodes node-1..3 (4 cpu) with pods (name, node, bound at, app) on them."""

    def build(*bound: tuple[str, str, float, str]) -> columns.NodeTable:
        pods: dict[str, list[model.PodInfo]] = {name: [] for name in NODES}
        for name, node, at, app in bound:
            pod = make_pod(name, cpu=100, labels={"app": app})
            pods[node].append(dataclasses.replace(pod, node_name=node, bound_at=at))
        return columns.NodeTable.build(
            dataclasses.replace(make_node(n), pods=tuple(found)) for n, found in pods.items()
        )

    return build


@pytest.fixture
def learn(table):
    """Feeds refreshes: (time, {node: value}, [(pod, node, bound at, app)]) each."""

    def run(spec, *refreshes):
        state = learner.Learner()
        previous = None
        effect = None
        for at, values, bound in refreshes:
            after = series(at, values)
            effect = state.observe(
                key=KEY, metric=spec, before=previous, after=after, table=table(*bound)
            )
            previous = after
        return effect

    return run


QUIET = {"node-1": 0.3, "node-2": 0.3, "node-3": 0.3}


def one_per_node(at: float, app: str = "web") -> list[tuple[str, str, float, str]]:
    return [(f"p-{node}", node, at, app) for node in NODES]


def test_settled_binds_teach_their_workloads_increment(learn):
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),  # bound, not shown yet
        (T0 + 40, {"node-1": 0.42, "node-2": 0.40, "node-3": 0.44}, binds),  # settled
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.12)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.12)}


def test_nothing_is_learned_before_the_settle_time(learn):
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 20, {"node-1": 0.4, "node-2": 0.4, "node-3": 0.4}, binds),  # 18 s: too soon
    )
    assert effect is None


def test_a_declared_amount_learns_its_correction(learn):
    # 100m requested on 4 cpu declares 0.025; the nodes moved 0.1: pods use 4x.
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric("Requests", resource=model.EstimateResource.CPU),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, {n: 0.4 for n in NODES}, binds),
    )
    assert effect is not None
    assert effect.ratio == pytest.approx(4.0)


def test_a_bind_onto_a_node_still_settling_teaches_nothing(learn):
    # Each node had a pod bound 10 s before: its ramp would be credited to the new one.
    earlier = one_per_node(T0 - 10, app="db")
    binds = [*earlier, *one_per_node(T0 + 2)]
    effect = learn(
        metric(),
        (T0, QUIET, earlier),
        (T0 + 5, QUIET, binds),
        (T0 + 40, {n: 0.6 for n in NODES}, binds),
    )
    assert effect is None


def test_a_pod_leaving_while_binds_settle_spoils_the_measure(learn):
    old = [(f"old-{node}", node, T0 - 600, "db") for node in NODES]
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, old),
        (T0 + 5, QUIET, [*old, *binds]),
        (T0 + 40, {n: 0.2 for n in NODES}, binds),  # the old pods left meanwhile
    )
    assert effect is None


def test_binds_that_never_stop_spoil_the_measure(learn):
    first = one_per_node(T0 + 2)
    later = [(f"late-{node}", node, T0 + 36, "web") for node in NODES]
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, first),
        (T0 + 38, QUIET, [*first, *later]),  # 34 s after the first: past the settle time
        (T0 + 80, {n: 0.5 for n in NODES}, [*first, *later]),
    )
    assert effect is None


def test_pods_bound_before_learning_began_teach_nothing(learn):
    old = [(f"old-{node}", node, T0 - 100, "web") for node in NODES]
    effect = learn(metric(), (T0, QUIET, old), (T0 + 40, {n: 0.9 for n in NODES}, old))
    assert effect is None
