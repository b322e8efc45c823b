"""InterPodAffinity's score: preferred terms of the pod and of placed pods, min-max."""

from __future__ import annotations

import dataclasses

from metricsched.core.plugins import inter_pod_affinity
from tests.unit.kube_scores.conftest import HOSTNAME, ZONE, node_scores, pod_term


def three_nodes(node):
    return [
        node("n1", labels={ZONE: "a"}),
        node("n2", labels={ZONE: "a"}),
        node("n3", labels={ZONE: "b"}),
    ]


def test_preferred_anti_affinity_keeps_away_from_matching_pods(node, pod, snapshot):
    web = pod("web", node_name="n1", labels={"app": "web"})
    scene = snapshot(three_nodes(node), [web])
    incoming = pod(labels={"app": "web"}, preferred_away=[pod_term({"app": "web"}, HOSTNAME, 10)])
    # n1: -10, n2: 0, n3: 0 -> min-max.
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) == (
        0.0,
        100.0,
        100.0,
    )


def test_placed_pods_preferred_terms_towards_the_pod_count_too(node, pod, snapshot):
    web = pod("web", node_name="n1", labels={"app": "web"})
    cache = pod("cache", node_name="n3", preferred_pods=[pod_term({"app": "web"}, ZONE, 50)])
    scene = snapshot(three_nodes(node), [web, cache])
    incoming = pod(labels={"app": "web"}, preferred_away=[pod_term({"app": "web"}, HOSTNAME, 10)])
    # n1: -10; n2: 0; n3: +50 (zone b, from cache's term). int(100 * (s + 10) / 60).
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) == (
        0.0,
        16.0,
        100.0,
    )


def test_placed_pods_required_affinity_counts_one_per_term(node, pod, snapshot):
    friend = pod(
        "friend",
        node_name="n2",
        pod_affinity=[{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}],
    )
    scene = snapshot(three_nodes(node), [friend])
    incoming = pod(labels={"app": "web"})
    # zone a +1 (hardPodAffinityWeight): n1 and n2 1, n3 0.
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) == (
        100.0,
        100.0,
        0.0,
    )


def test_preferred_affinity_of_the_pod_draws_it_to_the_domain(node, pod, snapshot):
    db = pod("db", node_name="n3", labels={"app": "db"})
    scene = snapshot(three_nodes(node), [db])
    incoming = pod(preferred_pods=[pod_term({"app": "db"}, ZONE, 30)])
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) == (
        0.0,
        0.0,
        100.0,
    )


def test_no_term_anywhere_is_not_scored(node, pod, snapshot):
    scene = snapshot(three_nodes(node), [pod("plain", node_name="n1")])
    assert node_scores(inter_pod_affinity.scoring, pod(), scene) is None


def test_other_namespaces_do_not_match_by_default(node, pod, snapshot):
    web = pod("web", node_name="n1", namespace="other", labels={"app": "web"})
    scene = snapshot(three_nodes(node), [web])
    incoming = pod(preferred_away=[pod_term({"app": "web"}, HOSTNAME, 10)])
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) is None


def test_a_namespace_selector_matching_empty_labels_takes_in_every_namespace_as_kube_does(
    node, pod, snapshot
):
    # kube-scheduler v1.35.4 merges the selected namespaces into the incoming pod's term
    # but clears the selector on a copy, then matches it against empty labels: "team
    # DoesNotExist" takes in the pod of namespace "other" (team=b) as well.
    placed = pod("placed", namespace="other", node_name="n1", labels={"app": "web"})
    scene = dataclasses.replace(
        snapshot(three_nodes(node), [placed]),
        namespace_labels={"other": {"team": "b"}, "shop": {}},
    )
    term = pod_term({"app": "web"}, HOSTNAME, 10)
    term["podAffinityTerm"]["namespaceSelector"] = {
        "matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]
    }
    incoming = pod(preferred_away=[term])
    assert node_scores(inter_pod_affinity.scoring, incoming, scene) == (0.0, 100.0, 100.0)
