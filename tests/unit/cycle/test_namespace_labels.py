"""schedule_one decides namespaceSelector affinity terms with the namespace labels it gets.

Found by the differential oracle (tests/parity): without namespace labels, an
anti-affinity term with a namespaceSelector is assumed to match pods of every namespace,
so the pod was refused nodes that kube-scheduler gives it.
"""

from __future__ import annotations

from metricsched.core import cycle, model

AWAY_FROM_TEAM_B = {
    "topologyKey": "kubernetes.io/hostname",
    "labelSelector": {},
    "namespaceSelector": {"matchLabels": {"team": "b"}},
}


def decide(pod, snapshot, namespace_labels=None):
    return cycle.schedule_one(
        pod=pod,
        snapshot=snapshot,
        policies=(),
        metrics={},
        default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
        now=0.0,
        scheduler_names=frozenset({pod.scheduler_name}),
        rr_counter=0,
        seed=0,
        namespace_labels=namespace_labels,
    )


def test_anti_affinity_to_another_team_ignores_pods_of_a_namespace_outside_it(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1")], pods=[pod("old", namespace="team-a", node_name="n1")])
    newcomer = pod("new", pod_anti_affinity=[AWAY_FROM_TEAM_B])
    labels = {"team-a": {"team": "a"}, "shop": {"team": "b"}}

    decision = decide(newcomer, snapshot, namespace_labels=labels)

    assert (decision.outcome, decision.node) == (model.Outcome.BIND, "n1")


def test_without_namespace_labels_the_restrictive_answer_stands(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1")], pods=[pod("old", namespace="team-a", node_name="n1")])
    newcomer = pod("new", pod_anti_affinity=[AWAY_FROM_TEAM_B])

    decision = decide(newcomer, snapshot)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert decision.message == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. "
        "no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
