"""The incoming pod's namespaceSelector in InterPodAffinity, per version: kube-scheduler
to v1.36 clears a copy of it in PreFilter, so the selector is matched against empty labels
(one matching empty labels, such as ``DoesNotExist``, puts every namespace in scope); from
v1.37 it is matched against the namespaces' own labels (found by the v1.37.2 oracle)."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import model, parse, profile, versions
from tests.unit.conftest import build_cluster, build_node_body, build_pod_body

AFFINITY = "node(s) didn't match pod affinity rules"
# in scope: pods of "default" and of namespaces without an env label
NEAR_UNLABELLED = {
    "topologyKey": "topology.kubernetes.io/zone",
    "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    "namespaces": ["default"],
    "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
}


def _scene(rules: versions.Rules) -> model.ClusterSnapshot:
    node = parse.node_from_body(
        build_node_body("node-0", labels={"topology.kubernetes.io/zone": "zone-a"})
    )
    placed = parse.pod_from_body(build_pod_body("old-1", namespace="ops", node_name="node-0"))
    return dataclasses.replace(
        build_cluster(nodes=[node], pods=[placed]),
        namespace_labels={"default": {}, "ops": {"env": "prod"}},
        rules=rules,
    )


def _incoming() -> model.PodInfo:
    body = build_pod_body("new-3", namespace="default", labels={"tier": "back"})
    body["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [NEAR_UNLABELLED]}
    }
    return parse.pod_from_body(body)


def test_from_v1_37_a_pod_of_a_labelled_namespace_is_out_of_scope() -> None:
    # ops has env=prod: its pod does not match, nor does the pod itself (tier=back).
    assert profile.node_reasons(_incoming(), _scene(versions.V1_37)) == {"node-0": (AFFINITY,)}


@pytest.mark.parametrize("rules", [versions.V1_35, versions.V1_36])
def test_to_v1_36_the_selector_is_matched_against_empty_labels(rules: versions.Rules) -> None:
    # env DoesNotExist holds for empty labels: the ops pod is in scope and attracts.
    assert profile.node_reasons(_incoming(), _scene(rules)) == {"node-0": ()}
