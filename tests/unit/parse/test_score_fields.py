"""Pod fields read for kube-scheduler's score plugins: preferred terms and the controller."""

from __future__ import annotations

from metricsched.core import parse

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def test_preferred_node_and_pod_terms_are_kept_raw(pod_body):
    body = pod_body()
    node_term = {"weight": 5, "preference": {"matchExpressions": []}}
    pod_term = {"weight": 7, "podAffinityTerm": {"topologyKey": "zone"}}
    body["spec"]["affinity"] = {
        "nodeAffinity": {PREFERRED: [node_term]},
        "podAffinity": {PREFERRED: [pod_term]},
        "podAntiAffinity": {PREFERRED: [pod_term, pod_term]},
    }
    parsed = parse.pod_from_body(body)
    assert parsed.preferred_node_affinity == (node_term,)
    assert parsed.preferred_pod_affinity == (pod_term,)
    assert parsed.preferred_pod_anti_affinity == (pod_term, pod_term)


def test_a_replica_set_controller_is_kept_as_kind_and_uid(pod_body):
    body = pod_body()
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u0"},
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": "u1",
            "controller": True,
        },
    ]
    assert parse.pod_from_body(body).controller == "ReplicaSet/u1"


def test_other_controllers_and_bare_pods_have_none(pod_body):
    bare = parse.pod_from_body(pod_body())
    job = pod_body()
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u2", "controller": True}
    ]
    assert bare.controller == parse.pod_from_body(job).controller == ""
