"""TaintToleration's score: intolerable PreferNoSchedule taints, reverse-normalised."""

from __future__ import annotations

from metricsched.core.plugins import taint_toleration
from tests.unit.kube_scores.conftest import table_scores


def prefer_not(key: str) -> dict[str, str]:
    return {"key": key, "value": "x", "effect": "PreferNoSchedule"}


def test_the_node_with_most_untolerated_soft_taints_scores_zero(node, pod, snapshot):
    scene = snapshot(
        [
            node("a"),
            node("b", taints=[prefer_not("one")]),
            node("c", taints=[prefer_not("one"), prefer_not("two")]),
        ]
    )
    # counts 0, 1, 2: 100 - 100*count//2.
    assert table_scores(taint_toleration.scoring, pod(), scene) == (100.0, 50.0, 0.0)


def test_tolerated_and_hard_taints_do_not_count(node, pod, snapshot):
    scene = snapshot(
        [
            node("a", taints=[prefer_not("tolerated")]),
            node("b", taints=[{"key": "hard", "value": "x", "effect": "NoSchedule"}]),
            node("c", taints=[prefer_not("other")]),
        ]
    )
    tolerant = pod(
        tolerations=[
            {"key": "tolerated", "operator": "Exists", "effect": "PreferNoSchedule"},
            {"key": "hard", "operator": "Exists", "effect": "NoSchedule"},
            # A NoSchedule toleration does not tolerate a PreferNoSchedule taint.
            {"key": "other", "operator": "Exists", "effect": "NoSchedule"},
        ]
    )
    assert table_scores(taint_toleration.scoring, tolerant, scene) == (100.0, 100.0, 0.0)


def test_no_soft_taints_anywhere_scores_every_node_100(node, pod, snapshot):
    scene = snapshot([node("a"), node("b")])
    assert table_scores(taint_toleration.scoring, pod(), scene) == (100.0, 100.0)
