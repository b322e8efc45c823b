"""PodTopologySpread's score: ScheduleAnyway constraints and the system default spreading."""

from __future__ import annotations

import pytest

from metricsched.core.plugins import pod_topology_spread
from tests.unit.kube_scores.conftest import HOSTNAME, ZONE, table_scores

RS = ("ReplicaSet", "rs-1")


def soft(key: str, max_skew: int = 1, **extra: object) -> dict[str, object]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
        **extra,
    }


def web(pod, name: str, node_name: str, owner=RS):
    return pod(name, node_name=node_name, labels={"app": "web"}, owner=owner)


def score(pod_info, scene):
    return table_scores(pod_topology_spread.scoring, pod_info, scene)


def test_a_hostname_constraint_favours_the_node_with_fewest_matching_pods(node, pod, snapshot):
    placed = [web(pod, "w1", "n1"), web(pod, "w2", "n1"), web(pod, "w3", "n2")]
    scene = snapshot([node("n1"), node("n2"), node("n3")], placed)
    incoming = pod(labels={"app": "web"}, spread=[soft(HOSTNAME)])
    # weight ln(3 + 2); raw round(2*1.609)=3, round(1.609)=2, 0; 100*(3+0-s)//3.
    assert score(incoming, scene) == (0.0, 33.0, 100.0)


def test_the_system_default_spreads_a_workloads_pods_by_hostname(node, pod, snapshot):
    placed = [web(pod, "w1", "n1"), web(pod, "w2", "n1")]
    scene = snapshot([node("n1"), node("n2"), node("n3")], placed)
    incoming = pod(labels={"app": "web"}, owner=RS)
    # hostname maxSkew 3: raw round(2*ln 5 + 2) = 5, then 2 and 2 (no zone labels).
    assert score(incoming, scene) == (40.0, 100.0, 100.0)


def test_the_system_default_spreads_by_zone_too(node, pod, snapshot):
    nodes = [
        node("n1", labels={ZONE: "a"}),
        node("n2", labels={ZONE: "a"}),
        node("n3", labels={ZONE: "b"}),
    ]
    scene = snapshot(nodes, [web(pod, "w1", "n1"), web(pod, "w2", "n1")])
    incoming = pod(labels={"app": "web"}, owner=RS)
    # hostname: 2*ln5 + 2 | 2 | 2; zone (2 domains, ln 4): 2*ln4 + 4 | 2*ln4 + 4 | 4.
    # raw 12, 9, 6 -> 100*(12+6-s)//12.
    assert score(incoming, scene) == (50.0, 75.0, 100.0)


def test_the_default_counts_only_pods_of_the_same_controller(node, pod, snapshot):
    others = [
        web(pod, "other", "n1", owner=("ReplicaSet", "rs-2")),
        pod("bare", node_name="n1", labels={"app": "web"}),
    ]
    scene = snapshot([node("n1"), node("n2")], others)
    incoming = pod(labels={"app": "web"}, owner=RS)
    assert score(incoming, scene) == (100.0, 100.0)


def test_a_pod_without_a_controller_or_constraints_is_not_scored(node, pod, snapshot):
    scene = snapshot([node("n1")], [web(pod, "w1", "n1")])
    assert score(pod(labels={"app": "web"}), scene) is None


def test_do_not_schedule_constraints_are_the_filters_and_turn_the_default_off(node, pod, snapshot):
    hard = {**soft(HOSTNAME), "whenUnsatisfiable": "DoNotSchedule"}
    scene = snapshot([node("n1")], [web(pod, "w1", "n1")])
    incoming = pod(labels={"app": "web"}, owner=RS, spread=[hard])
    assert score(incoming, scene) is None


def test_a_node_without_an_own_constraints_key_is_ignored_and_scores_zero(node, pod, snapshot):
    nodes = [node("n1", labels={ZONE: "a"}), node("n2", labels={ZONE: "b"}), node("n3")]
    scene = snapshot(nodes, [web(pod, "w1", "n1")])
    incoming = pod(labels={"app": "web"}, spread=[soft(ZONE)])
    # zone weight ln(2 + 2); raw round(1.386)=1 and 0; n3 ignored.
    assert score(incoming, scene) == (0.0, 100.0, 0.0)


@pytest.mark.parametrize(
    ("policy", "expected"), [("Honor", (100.0, 100.0)), ("Ignore", (0.0, 100.0))]
)
def test_node_affinity_policy_decides_whether_pods_on_unselected_nodes_count(
    node, pod, snapshot, policy, expected
):
    nodes = [
        node("n1", labels={ZONE: "a", "pool": "x"}),
        node("n2", labels={ZONE: "a"}),
        node("n3", labels={ZONE: "b", "pool": "x"}),
    ]
    scene = snapshot(nodes, [web(pod, "w1", "n2")])
    incoming = pod(
        labels={"app": "web"},
        node_selector={"pool": "x"},
        spread=[soft(ZONE, nodeAffinityPolicy=policy)],
    )
    selected = (scene.nodes["n1"], scene.nodes["n3"])  # what the filters leave
    # Ignore: zone a counts n2's pod, round(1 x ln 4) = 1 against 0.
    assert table_scores(pod_topology_spread.scoring, incoming, scene, selected) == expected
