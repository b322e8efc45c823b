"""NodeAffinity's score: the weights of the preferred terms a node matches, normalised."""

from __future__ import annotations

from metricsched.core.plugins import node_affinity
from tests.unit.kube_scores.conftest import table_scores


def prefer(weight: int, key: str, value: str) -> dict[str, object]:
    expression = {"key": key, "operator": "In", "values": [value]}
    return {"weight": weight, "preference": {"matchExpressions": [expression]}}


def test_matching_term_weights_are_summed_and_scaled_to_the_best_node(node, pod, snapshot):
    scene = snapshot(
        [
            node("n1", labels={"zone": "a", "disk": "ssd"}),
            node("n2", labels={"zone": "a"}),
            node("n3", labels={"disk": "ssd"}),
            node("n4"),
        ]
    )
    incoming = pod(preferred_nodes=[prefer(80, "zone", "a"), prefer(20, "disk", "ssd")])
    assert table_scores(node_affinity.scoring, incoming, scene) == (100.0, 80.0, 20.0, 0.0)


def test_the_best_node_scores_100_whatever_the_weights(node, pod, snapshot):
    scene = snapshot([node("n1", labels={"zone": "a"}), node("n2"), node("n3")])
    incoming = pod(preferred_nodes=[prefer(3, "zone", "a"), prefer(7, "zone", "b")])
    # n1: 3 of max 3 -> 100.
    assert table_scores(node_affinity.scoring, incoming, scene) == (100.0, 0.0, 0.0)


def test_a_pod_without_preferred_terms_is_not_scored(node, pod, snapshot):
    scene = snapshot([node("n1")])
    assert table_scores(node_affinity.scoring, pod(), scene) is None


def test_an_empty_preference_matches_no_node(node, pod, snapshot):
    scene = snapshot([node("n1"), node("n2", labels={"zone": "a"})])
    incoming = pod(preferred_nodes=[{"weight": 5, "preference": {}}, prefer(1, "zone", "a")])
    assert table_scores(node_affinity.scoring, incoming, scene) == (0.0, 100.0)
