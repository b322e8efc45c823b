"""The scheduler decides consecutive pods of one class with one run (``core.class_run``), and
starts another when the class changes or the cluster does (the cache's generation)."""

from __future__ import annotations

import argparse
import dataclasses
import time

import kubernetes.client
import pytest

from metricsched import config as config_mod
from metricsched.core import model, parse
from metricsched.runtime import operator as operator_mod
from tests.unit.conftest import build_pod_info


def _node(name: str, cpu: str = "4") -> model.NodeInfo:
    return parse.node_from_body(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "20"}},
        }
    )


@pytest.fixture
def op() -> operator_mod.Operator:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    operator = operator_mod.Operator(
        config_mod.from_args(parser.parse_args([]), {}),
        kubernetes.client.ApiClient(kubernetes.client.Configuration()),
    )
    for name in ("node-1", "node-2", "node-3"):
        operator.cache.upsert_node(_node(name))
    return operator


def _replica(index: int, app: str = "web") -> model.PodInfo:
    pod = build_pod_info(f"{app}-{index}", labels={"app": app})
    return dataclasses.replace(pod, scheduler_name="metricsched", controller=f"ReplicaSet/{app}")


def _decide_and_assume(op: operator_mod.Operator, pod: model.PodInfo) -> model.Decision:
    now = time.time()
    decision = op.scheduler._decide(pod, now=now)
    assert decision.outcome is model.Outcome.BIND
    assert decision.node is not None
    op.cache.assume(pod, decision.node, now=now)
    return decision


def test_consecutive_replicas_are_decided_by_one_run(op: operator_mod.Operator) -> None:
    placed = [_decide_and_assume(op, _replica(index)).node for index in range(3)]
    run = op.scheduler._run
    assert run is not None
    assert run.decided == 3
    assert sorted(placed) == ["node-1", "node-2", "node-3"]  # each assumed before the next


def test_a_cluster_change_or_another_class_starts_another_run(
    op: operator_mod.Operator,
) -> None:
    _decide_and_assume(op, _replica(0))
    first = op.scheduler._run
    op.cache.upsert_node(_node("node-1", cpu="8"))  # allocatable grew: generation moves
    _decide_and_assume(op, _replica(1))
    second = op.scheduler._run
    assert second is not None and second is not first
    _decide_and_assume(op, _replica(2, app="api"))
    third = op.scheduler._run
    assert third is not None and third is not second
    assert (first and first.decided, second.decided, third.decided) == (1, 1, 1)
