"""The cycle evaluates namespaceSelector with the namespace labels the snapshot carries."""

from __future__ import annotations

import dataclasses

from metricsched.core import model

AWAY_FROM_TEAM_DATA = {
    "labelSelector": {"matchLabels": {"app": "db"}},
    "namespaceSelector": {"matchLabels": {"team": "data"}},
    "topologyKey": "kubernetes.io/hostname",
}


def test_anti_affinity_to_pods_of_selected_namespaces_only_avoids_those(
    *, make_node, make_cluster, make_pod, schedule
):
    db_elsewhere = dataclasses.replace(
        make_pod("db", namespace="other", labels={"app": "db"}), node_name="node-1"
    )
    node_1 = make_node("node-1")
    node_1 = dataclasses.replace(node_1, pods=(db_elsewhere,))
    pod = dataclasses.replace(make_pod(), pod_anti_affinity=(AWAY_FROM_TEAM_DATA,))
    cluster = make_cluster(node_1)

    labelled = {"other": {"team": "web"}, "shop": {}}
    known = dataclasses.replace(cluster, namespace_labels=labelled)
    unknown = cluster  # no Namespace watch yet: the restrictive answer

    assert schedule(pod=pod, snapshot=known).node == "node-1"
    refused = schedule(pod=pod, snapshot=unknown)
    assert refused.outcome is model.Outcome.UNSCHEDULABLE
    assert "node(s) didn't match pod anti-affinity rules" in refused.message
