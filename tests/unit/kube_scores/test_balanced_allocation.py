"""NodeResourcesBalancedAllocation: 1 - std of the cpu and memory fractions (hand-computed);
from v1.36, the change in that balance the pod makes."""

from __future__ import annotations

import dataclasses

from metricsched.core import versions
from metricsched.core.plugins import balanced_allocation
from tests.unit.kube_scores.conftest import table_scores


def test_the_node_whose_cpu_and_memory_stay_closer_scores_higher(node, pod, snapshot):
    placed = pod("placed", node_name="a", cpu="1", memory="1Gi")
    scene = snapshot(
        [node("a", cpu="4", memory="16Gi"), node("b", cpu="4", memory="16Gi")], [placed]
    )
    incoming = pod(cpu="1", memory="1Gi")
    # a: cpu 2/4 = 0.5, memory 2/16 = 0.125, std 0.1875 -> 81; b: 0.25, 0.0625 -> 90.
    assert table_scores(balanced_allocation, incoming, scene) == (81.0, 90.0)


def test_fractions_are_capped_at_one(node, pod, snapshot):
    scene = snapshot([node("a", cpu="1", memory="16Gi")])
    # cpu 2/1 -> 1, memory 8/16 = 0.5: std 0.25 -> 75.
    assert table_scores(balanced_allocation, pod(cpu="2", memory="8Gi"), scene) == (75.0,)


def test_requests_are_counted_without_the_score_defaults(node, pod, snapshot):
    # The placed pod asks cpu only: BalancedAllocation does not count 200Mi for it.
    placed = pod("placed", node_name="a", cpu="1")
    scene = snapshot([node("a", cpu="4", memory="16Gi")], [placed])
    # cpu 2/4 = 0.5, memory 1/16 = 0.0625: std 0.21875 -> 78.
    assert table_scores(balanced_allocation, pod(cpu="1", memory="1Gi"), scene) == (78.0,)


def test_a_best_effort_pod_is_not_scored(node, pod, snapshot):
    scene = snapshot([node("a")])
    bare = pod(containers=[{"name": "app", "image": "app:1"}])
    assert table_scores(balanced_allocation, bare, scene) is None


def test_from_v1_36_the_change_in_balance_the_pod_makes_is_scored(node, pod, snapshot):
    placed = pod("placed", node_name="a", cpu="1", memory="1Gi")
    nodes = [node("a", cpu="4", memory="16Gi"), node("b", cpu="4", memory="16Gi")]
    incoming = pod(cpu="1", memory="1Gi")
    for rules in (versions.V1_36, versions.V1_37):
        scene = dataclasses.replace(snapshot(nodes, [placed]), rules=rules)
        # a: with the pod 81 (above), without: cpu 0.25, memory 0.0625 -> 90;
        # 50 + (50 + 81 - 90) // 2 = 70. b: with 90, without (empty) 100 -> 70.
        assert table_scores(balanced_allocation, incoming, scene) == (70.0, 70.0)


def test_from_v1_36_a_pod_that_evens_a_node_out_scores_above_75(node, pod, snapshot):
    placed = pod("placed", node_name="a", cpu="2")
    scene = dataclasses.replace(
        snapshot([node("a", cpu="4", memory="16Gi")], [placed]), rules=versions.V1_37
    )
    # without: cpu 0.5, memory 0 -> 75; with 8Gi: cpu 0.5, memory 0.5 -> 100.
    # 50 + (50 + 100 - 75) // 2 = 87 (Go's integer division).
    assert table_scores(balanced_allocation, pod(cpu="0", memory="8Gi"), scene) == (87.0,)
