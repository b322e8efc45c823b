"""The learner turns how a node's metric moved after binds into learned estimates."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import columns, model
from metricsched.runtime import learner

T0 = 1_700_000_000.0
KEY = model.MetricKey(model.PolicyKey("shop/cpu-aware"), "cpu")


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


def series(at: float, **values: float) -> model.MetricSeries:
    return model.MetricSeries(
        values={model.NodeName(n): model.MetricSample(v, at) for n, v in values.items()},
        last_refresh=at,
        error=None,
        error_message="",
    )


def table(make_node, make_pod, *bound: tuple[str, float, str]) -> columns.NodeTable:
    """Nodes node-1 and node-2 (4 cpu) with pods (node, bound at, app) on them."""
    pods: dict[str, list[model.PodInfo]] = {"node-1": [], "node-2": []}
    for index, (node, at, app) in enumerate(bound):
        pod = make_pod(f"p{index}", cpu=100, labels={"app": app})
        pods[node].append(dataclasses.replace(pod, node_name=node, bound_at=at))
    return columns.NodeTable.build(
        dataclasses.replace(make_node(name), pods=tuple(found)) for name, found in pods.items()
    )


@pytest.fixture
def learn(make_node, make_pod):
    """Feeds the learner refreshes: (time, {node: value}, [(node, bound at, app)])."""

    def run(spec, *refreshes):
        state = learner.Learner()
        previous = None
        effect = None
        for at, values, bound in refreshes:
            after = series(at, **values)
            effect = state.observe(
                key=KEY,
                metric=spec,
                before=previous,
                after=after,
                table=table(make_node, make_pod, *bound),
            )
            previous = after
        return effect

    return run


def test_a_settled_bind_teaches_its_workloads_increment(learn):
    binds = [("node-1", T0 + 2, "web")]
    effect = learn(
        metric(),
        (T0, {"node-1": 0.3}, []),
        (T0 + 5, {"node-1": 0.3}, binds),  # bound, not shown yet
        (T0 + 40, {"node-1": 0.42}, binds),  # 38 s after the bind: settled
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.12)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.12)}


def test_nothing_is_learned_before_the_settle_time(learn):
    binds = [("node-1", T0 + 2, "web")]
    effect = learn(
        metric(),
        (T0, {"node-1": 0.3}, []),
        (T0 + 5, {"node-1": 0.3}, binds),
        (T0 + 20, {"node-1": 0.4}, binds),  # 18 s after: too soon
    )
    assert effect is None


def test_binds_on_one_node_share_its_change(learn):
    binds = [("node-1", T0 + 2, "web"), ("node-1", T0 + 3, "db")]
    effect = learn(
        metric(),
        (T0, {"node-1": 0.3}, []),
        (T0 + 5, {"node-1": 0.3}, binds),
        (T0 + 40, {"node-1": 0.5}, binds),
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.1)
    assert effect.per_pod_by_workload == {}  # two workloads: no one to credit


def test_a_declared_amount_learns_its_correction(learn):
    # 100m requested on 4 cpu declares 0.025; the node moved 0.1: pods use 4x.
    binds = [("node-1", T0 + 2, "web")]
    effect = learn(
        metric("Requests", resource=model.EstimateResource.CPU),
        (T0, {"node-1": 0.3}, []),
        (T0 + 5, {"node-1": 0.3}, binds),
        (T0 + 40, {"node-1": 0.4}, binds),
    )
    assert effect is not None
    assert effect.ratio == pytest.approx(4.0)


def test_pods_bound_before_learning_began_teach_nothing(learn):
    old = [("node-2", T0 - 100, "web")]
    effect = learn(
        metric(),
        (T0, {"node-2": 0.3}, old),
        (T0 + 40, {"node-2": 0.9}, old),
    )
    assert effect is None
