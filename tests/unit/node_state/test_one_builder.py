"""Node state is built in one place (core.node_state): the operator's cluster cache, the
unit fixtures, the parity oracle and the bench build the same state from the same pods,
``nonzero_requested`` (what kube-scheduler's scores count) included."""

from __future__ import annotations

import time
from typing import Any

from bench import cycle_cost
from metricsched.core import model, parse
from metricsched.runtime import cache as cache_mod
from tests.parity import oracle
from tests.unit import conftest
from tests.unit.kube_scores import conftest as kube_scores_conftest

MI = 1024**2
N1 = model.NodeName("n1")


def _node_body() -> dict[str, Any]:
    return conftest.build_node_body("n1", cpu="4", memory="8Gi")


def _bound_pod_bodies() -> list[dict[str, Any]]:
    """A bound pod of two containers that request nothing, and one asking cpu only."""
    bare = {
        "metadata": {"name": "bare", "namespace": "default", "uid": "bare"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "a", "image": "pause"}, {"name": "b", "image": "pause"}],
        },
        "status": {"phase": "Running"},
    }
    return [bare, conftest.build_pod_body("cpu-only", cpu="500m", node_name="n1")]


def _fingerprint(state: model.NodeState) -> tuple[object, ...]:
    return (
        state.requested,
        state.nonzero_requested,
        state.used_ports,
        sorted(pod.name for pod in state.pods),
    )


def _operator_state() -> model.NodeState:
    cache = cache_mod.ClusterCache()
    cache.upsert_node(parse.node_from_body(_node_body()))
    for body in _bound_pod_bodies():
        cache.upsert_pod(parse.pod_from_body(body), ours=False)
    return cache.snapshot(now=0.0).nodes[N1]


def test_a_bound_pod_without_requests_counts_the_same_on_every_path():
    node = parse.node_from_body(_node_body())
    pods = [parse.pod_from_body(body) for body in _bound_pod_bodies()]
    operator = _operator_state()
    fixture = conftest.build_cluster(nodes=[node], pods=pods).nodes[N1]
    score_fixture = kube_scores_conftest.make_cluster([node], pods).nodes[N1]
    scenario = {"nodes": [_node_body()], "pods": _bound_pod_bodies(), "incoming": []}
    from_oracle = oracle.snapshot_of(scenario).nodes[N1]

    # kube-scheduler's NonZeroRequested: 100m / 200Mi for each container without a
    # request: two for "bare", memory only for "cpu-only".
    assert operator.nonzero_requested is not None
    assert operator.nonzero_requested.milli_cpu == 200 + 500
    assert operator.nonzero_requested.memory == 3 * 200 * MI
    assert operator.requested.milli_cpu == 500
    assert operator.requested.memory == 0
    for other in (fixture, score_fixture, from_oracle):
        assert _fingerprint(other) == _fingerprint(operator)


def test_the_bench_snapshot_is_the_operators_for_the_same_pods():
    setup = cycle_cost.setup(3, time.time())
    for name, state in setup["snapshot"].nodes.items():
        cache = cache_mod.ClusterCache()
        cache.upsert_node(state.node)
        for pod in state.pods:
            cache.upsert_pod(pod, ours=False)
        assert _fingerprint(cache.snapshot(now=0.0).nodes[name]) == _fingerprint(state)
        assert state.nonzero_requested is not None


def test_a_fixture_node_with_requested_resources_counts_them_for_filters_and_scores():
    state = conftest.build_node_state("n1", requested_cpu=1500, requested_memory=0)
    assert state.requested.milli_cpu == 1500
    # Requested explicitly, so no 200Mi default: the scores count what the filters count.
    assert state.nonzero_requested is not None
    assert (state.nonzero_requested.milli_cpu, state.nonzero_requested.memory) == (1500, 0)
