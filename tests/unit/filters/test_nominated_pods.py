"""Nominated pods (status.nominatedNodeName, unbound, any scheduler's) of equal or higher
priority occupy their node in Filter, as kube-scheduler's addGENominatedPods counts them:
the node is filtered with them and without them, and passes only if both pass."""

from __future__ import annotations

import dataclasses
from typing import Any

from metricsched.core import model, parse, profile
from tests.unit.conftest import build_cluster, build_node_body, build_pod_body


def _node(name: str, **features: Any) -> model.NodeInfo:
    return parse.node_from_body(build_node_body(name, **features))


def _pod(name: str, *, priority: int = 0, nominated: str = "", **features: Any) -> model.PodInfo:
    body = build_pod_body(name, **features)
    body["spec"]["priority"] = priority
    if nominated:
        body["status"]["nominatedNodeName"] = nominated
    return parse.pod_from_body(body)


def _reasons(pod: model.PodInfo, *pods: model.PodInfo, **node: Any) -> dict[str, tuple[str, ...]]:
    nodes = [_node("node-a", cpu="2", **node), _node("node-b", cpu="2", **node)]
    return dict(profile.node_reasons(pod, build_cluster(nodes=nodes, pods=pods)))


def test_the_nomination_is_read_from_an_unbound_pods_status_only() -> None:
    assert _pod("waiting", nominated="node-a").nominated_node == "node-a"
    bound = build_pod_body("bound", node_name="node-a")
    bound["status"]["nominatedNodeName"] = "node-b"
    assert parse.pod_from_body(bound).nominated_node == ""


def test_a_nominated_pod_of_equal_priority_takes_its_nodes_room() -> None:
    preemptor = _pod("preemptor", cpu="1500m", scheduler="default-scheduler", nominated="node-a")
    reasons = _reasons(_pod("web", cpu="1"), preemptor)
    assert reasons == {"node-a": ("Insufficient cpu",), "node-b": ()}


def test_a_nominated_pod_of_higher_priority_takes_its_nodes_room() -> None:
    preemptor = _pod("preemptor", priority=1000, cpu="1500m", nominated="node-a")
    assert _reasons(_pod("web", cpu="1"), preemptor)["node-a"] == ("Insufficient cpu",)


def test_a_nominated_pod_of_lower_priority_does_not_count() -> None:
    waiting = _pod("batch", priority=-10, cpu="1500m", nominated="node-a")
    assert _reasons(_pod("web", cpu="1"), waiting) == {"node-a": (), "node-b": ()}


def test_the_pod_does_not_count_against_its_own_nomination() -> None:
    pod = _pod("web", cpu="1500m", nominated="node-a")
    assert _reasons(pod, pod) == {"node-a": (), "node-b": ()}


def test_host_ports_of_a_nominated_pod_are_taken() -> None:
    port = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
    preemptor = _pod("preemptor", host_ports=port, nominated="node-b")
    reasons = _reasons(_pod("web", host_ports=port), preemptor)
    assert reasons["node-a"] == ()
    assert reasons["node-b"] == ("node(s) didn't have free ports for the requested pod ports",)


def test_anti_affinity_to_a_nominated_pod_rules_its_node_out() -> None:
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    preemptor = _pod("db", labels={"app": "db"}, nominated="node-a")
    reasons = _reasons(_pod("web", pod_anti_affinity=[term]), preemptor)
    assert reasons["node-a"] == ("node(s) didn't match pod anti-affinity rules",)
    assert reasons["node-b"] == ()


def test_affinity_that_only_a_nominated_pod_satisfies_does_not_hold() -> None:
    # The second pass runs without the nominated pods: it may still land elsewhere.
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    anchor = _pod("db-0", labels={"app": "db"}, node_name="node-b", phase="Running")
    nominated = _pod("db-1", labels={"app": "db"}, nominated="node-a")
    reasons = _reasons(_pod("web", pod_affinity=[term]), anchor, nominated)
    assert reasons["node-a"] == ("node(s) didn't match pod affinity rules",)
    assert reasons["node-b"] == ()


def test_pods_nominated_to_another_node_leave_this_one_alone() -> None:
    preemptor = _pod("preemptor", cpu="1500m", nominated="node-b")
    reasons = _reasons(_pod("web", cpu="1"), preemptor)
    assert reasons == {"node-a": (), "node-b": ("Insufficient cpu",)}


def test_a_nomination_ends_when_the_pod_is_bound() -> None:
    preemptor = _pod("preemptor", cpu="1500m", nominated="node-a")
    bound = dataclasses.replace(preemptor, node_name="node-b", nominated_node="", phase="Running")
    reasons = _reasons(_pod("web", cpu="1"), bound)
    assert reasons == {"node-a": (), "node-b": ("Insufficient cpu",)}


# kube-scheduler decides its PreFilter skips without the nominated pods, and adds them only
# to the plugins that did not skip: InterPodAffinity skips a pod without terms that no bound
# pod's anti-affinity matches, and then a nominated pod's anti-affinity is not checked.
_ANTI_WEB = {
    "labelSelector": {"matchLabels": {"app": "web"}},
    "topologyKey": "kubernetes.io/hostname",
}


def test_a_nominated_pods_anti_affinity_is_not_checked_where_inter_pod_affinity_skips() -> None:
    guard = _pod("guard", pod_anti_affinity=[_ANTI_WEB], nominated="node-a")
    reasons = _reasons(_pod("web", labels={"app": "web"}), guard)
    assert reasons == {"node-a": (), "node-b": ()}


def test_a_nominated_pods_anti_affinity_counts_where_inter_pod_affinity_runs() -> None:
    # A bound pod elsewhere whose anti-affinity matches the pod: InterPodAffinity runs.
    bound = _pod("bound", pod_anti_affinity=[_ANTI_WEB], node_name="node-b", phase="Running")
    guard = _pod("guard", pod_anti_affinity=[_ANTI_WEB], nominated="node-a")
    reasons = _reasons(_pod("web", labels={"app": "web"}), bound, guard)
    existing = "node(s) didn't satisfy existing pods anti-affinity rules"
    assert reasons == {"node-a": (existing,), "node-b": (existing,)}
