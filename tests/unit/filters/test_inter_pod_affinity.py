"""InterPodAffinity: required pod affinity and anti-affinity, both directions."""

from __future__ import annotations

import pytest

from metricsched.core.plugins import inter_pod_affinity
from tests.unit.filters.conftest import node_reasons, plugin_reason, pre_filter_refusal

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
DB = {"app": "db"}
WEB = {"app": "web"}


def near(labels: dict[str, str], key: str = "zone", **extra: object) -> dict[str, object]:
    found: dict[str, object] = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    found.update(extra)
    return found


@pytest.fixture
def zones(node, pod, cluster):
    """Zone a (a1, a2) and zone b (b1); a db pod runs on a1; ``bare`` has no zone label."""

    def make(*pods, with_db: bool = True):
        existing = [pod("db-0", labels=DB, node_name="a1")] if with_db else []
        return cluster(
            nodes=[
                node("a1", labels={"zone": "a"}),
                node("a2", labels={"zone": "a"}),
                node("b1", labels={"zone": "b"}),
                node("bare"),
            ],
            pods=[*existing, *pods],
        )

    return make


def test_affinity_admits_only_the_domain_of_matching_pods(pod, zones):
    verdicts = node_reasons(pod(labels=WEB, pod_affinity=[near(DB)]), zones())
    assert verdicts == {"a1": (), "a2": (), "b1": (AFFINITY,), "bare": (AFFINITY,)}


def test_affinity_by_hostname_admits_only_that_node(pod, zones):
    verdicts = node_reasons(
        pod(labels=WEB, pod_affinity=[near(DB, "kubernetes.io/hostname")]), zones()
    )
    assert [name for name, reasons in verdicts.items() if not reasons] == ["a1"]


def test_affinity_to_pods_that_do_not_exist_fits_nowhere(pod, zones):
    verdicts = node_reasons(pod(labels=WEB, pod_affinity=[near({"app": "cache"})]), zones())
    assert set(verdicts.values()) == {(AFFINITY,)}


def test_first_pod_of_a_self_affine_group_may_start_in_any_domain(pod, zones):
    first = pod(labels=WEB, pod_affinity=[near(WEB)])
    verdicts = node_reasons(first, zones())
    # ... but only on nodes that carry the topology key.
    assert verdicts == {"a1": (), "a2": (), "b1": (), "bare": (AFFINITY,)}


def test_second_pod_of_a_self_affine_group_follows_the_first(pod, zones):
    second = pod("web-2", labels=WEB, pod_affinity=[near(WEB)])
    verdicts = node_reasons(second, zones(pod("web-1", labels=WEB, node_name="b1")))
    assert verdicts == {"a1": (AFFINITY,), "a2": (AFFINITY,), "b1": (), "bare": (AFFINITY,)}


def test_pods_of_another_namespace_do_not_satisfy_affinity_by_default(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    verdicts = node_reasons(pod(labels=WEB, pod_affinity=[near(DB)]), snapshot)
    assert set(verdicts.values()) == {(AFFINITY,)}


def test_listed_namespaces_widen_the_scope(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    listing = pod(labels=WEB, pod_affinity=[near(DB, namespaces=["other"])])
    assert node_reasons(listing, snapshot)["b1"] == ()


def test_empty_namespace_selector_means_every_namespace(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    everywhere = pod(labels=WEB, pod_affinity=[near(DB, namespaceSelector={})])
    assert node_reasons(everywhere, snapshot)["b1"] == ()


def test_namespace_selector_uses_known_namespace_labels(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    selecting = pod(
        labels=WEB,
        pod_affinity=[near(DB, namespaceSelector={"matchLabels": {"team": "data"}})],
    )
    known = {"other": {"team": "data"}, "shop": {}}
    assert node_reasons(selecting, snapshot, namespace_labels=known)["b1"] == ()
    # Unknown labels: affinity cannot be proven, so it is not assumed.
    assert node_reasons(selecting, snapshot)["b1"] == (AFFINITY,)


def test_anti_affinity_keeps_the_pod_out_of_domains_with_matching_pods(pod, zones):
    verdicts = node_reasons(pod(labels=WEB, pod_anti_affinity=[near(DB)]), zones())
    assert verdicts == {"a1": (ANTI,), "a2": (ANTI,), "b1": (), "bare": ()}


def test_anti_affinity_by_hostname_spreads_replicas_one_per_node(pod, zones):
    replica = pod("web-2", labels=WEB, pod_anti_affinity=[near(WEB, "kubernetes.io/hostname")])
    verdicts = node_reasons(replica, zones(pod("web-1", labels=WEB, node_name="a2")))
    assert verdicts == {"a1": (), "a2": (ANTI,), "b1": (), "bare": ()}


def test_anti_affinity_namespace_selector_with_unknown_labels_assumes_a_match(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    avoiding = pod(
        labels=WEB,
        pod_anti_affinity=[near(DB, namespaceSelector={"matchLabels": {"team": "data"}})],
    )
    assert node_reasons(avoiding, snapshot)["b1"] == (ANTI,)
    known = {"other": {"team": "ops"}}
    assert node_reasons(avoiding, snapshot, namespace_labels=known)["b1"] == ()


def test_existing_pods_anti_affinity_repels_a_matching_newcomer(pod, zones):
    loner = pod("loner", labels=DB, node_name="b1", pod_anti_affinity=[near(WEB)])
    verdicts = node_reasons(pod(labels=WEB), zones(loner))
    assert verdicts == {"a1": (), "a2": (), "b1": (EXISTING,), "bare": ()}


def test_existing_pods_anti_affinity_ignores_pods_it_does_not_select(pod, zones):
    loner = pod("loner", labels=DB, node_name="b1", pod_anti_affinity=[near({"app": "cache"})])
    verdicts = node_reasons(pod(labels=WEB), zones(loner))
    assert all(reasons == () for reasons in verdicts.values())


def test_existing_pods_anti_affinity_is_scoped_to_its_own_namespace(pod, zones):
    loner = pod(
        "loner", namespace="other", labels=DB, node_name="b1", pod_anti_affinity=[near(WEB)]
    )
    assert node_reasons(pod(labels=WEB), zones(loner))["b1"] == ()


# kube-scheduler v1.35.4 matches the incoming pod's namespaceSelector against empty labels
# as well (its PreFilter clears a copy of the merged selector): one that matches empty labels
# puts every namespace in scope. The differential oracle found it; metricsched follows.
NO_TEAM = {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}
NOT_DATA = {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["data"]}]}
LABELLED = {"other": {"team": "data"}, "shop": {"team": "web"}}


def test_anti_affinity_selecting_unlabelled_namespaces_avoids_every_namespace_as_kube(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    avoiding = pod(labels=WEB, pod_anti_affinity=[near(DB, namespaceSelector=NO_TEAM)])
    assert node_reasons(avoiding, snapshot, namespace_labels=LABELLED)["b1"] == (ANTI,)


def test_affinity_with_a_not_in_namespace_selector_counts_every_namespace_as_kube(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    near_db = pod(labels=WEB, pod_affinity=[near(DB, namespaceSelector=NOT_DATA)])
    verdicts = node_reasons(near_db, snapshot, namespace_labels=LABELLED)
    assert verdicts == {"a1": (AFFINITY,), "a2": (AFFINITY,), "b1": (), "bare": (AFFINITY,)}


def test_first_pod_exception_holds_for_a_namespace_selector_matching_empty_labels(pod, zones):
    # Its own namespace is labelled team=web, yet kube-scheduler counts the pod in scope.
    first = pod(labels=WEB, pod_affinity=[near(WEB, namespaceSelector=NO_TEAM)])
    verdicts = node_reasons(first, zones(), namespace_labels=LABELLED)
    assert verdicts == {"a1": (), "a2": (), "b1": (), "bare": (AFFINITY,)}


def test_existing_pods_namespace_selector_keeps_its_meaning(pod, zones):
    loner = pod(
        "loner",
        namespace="other",
        labels=DB,
        node_name="b1",
        pod_anti_affinity=[near(WEB, namespaceSelector=NO_TEAM)],
    )
    assert node_reasons(pod(labels=WEB), zones(loner), namespace_labels=LABELLED)["b1"] == ()


def test_existing_pod_with_an_unreadable_anti_affinity_term_is_ignored(pod, zones):
    broken = {"labelSelector": {"matchLabels": WEB}}  # no topologyKey
    loner = pod("loner", labels=DB, node_name="b1", pod_anti_affinity=[broken])
    assert node_reasons(pod(labels=WEB), zones(loner))["b1"] == ()


def test_affinity_is_reported_before_anti_affinity_and_existing_rules(pod, zones):
    loner = pod("loner", labels=DB, node_name="b1", pod_anti_affinity=[near(WEB)])
    both = pod(labels=WEB, pod_affinity=[near({"app": "cache"})], pod_anti_affinity=[near(DB)])
    verdicts = node_reasons(both, zones(loner))
    assert verdicts["b1"] == (AFFINITY,)
    anti_only = pod(labels=WEB, pod_anti_affinity=[near(DB)])
    assert node_reasons(anti_only, zones(loner))["b1"] == (ANTI,)


def test_unreadable_incoming_term_rules_the_pod_out_everywhere(pod, zones):
    broken = pod(labels=WEB, pod_affinity=[{"labelSelector": {"matchLabels": DB}}])
    reason = pre_filter_refusal(broken, zones())
    assert reason.startswith("parsing pod: podAffinity[0].topologyKey")
    assert set(node_reasons(broken, zones()).values()) == {(reason,)}


def test_single_filter_function_agrees_with_run_filters(pod, zones):
    loner = pod("loner", labels=DB, node_name="b1", pod_anti_affinity=[near(WEB)])
    snapshot = zones(loner)
    picky = pod(labels=WEB, pod_affinity=[near(DB, "kubernetes.io/hostname")])
    verdicts = node_reasons(picky, snapshot)
    for name, state in snapshot.nodes.items():
        single = plugin_reason(inter_pod_affinity.filtering, picky, state, snapshot=snapshot)
        assert verdicts[name] == ((single,) if single else ())


def test_reused_snapshot_answers_each_pods_own_terms(pod, zones):
    snapshot = zones(pod("cache-0", labels={"app": "cache"}, node_name="b1"))
    near_db = pod(labels=WEB, pod_affinity=[near(DB)])
    near_cache = pod(labels=WEB, pod_affinity=[near({"app": "cache"})])
    for _ in range(2):  # the second round is answered from memoised per-node matches
        assert node_reasons(near_db, snapshot)["b1"] == (AFFINITY,)
        assert node_reasons(near_cache, snapshot)["b1"] == ()


def test_namespace_labels_are_honoured_after_a_memoised_answer(pod, zones):
    snapshot = zones(pod("db-x", namespace="other", labels=DB, node_name="b1"), with_db=False)
    avoiding = pod(
        labels=WEB,
        pod_anti_affinity=[near(DB, namespaceSelector={"matchLabels": {"team": "data"}})],
    )
    assert node_reasons(avoiding, snapshot)["b1"] == (ANTI,)
    assert node_reasons(avoiding, snapshot, namespace_labels={"other": {}})["b1"] == ()
    assert node_reasons(avoiding, snapshot)["b1"] == (ANTI,)


def test_assumed_pod_with_anti_affinity_repels_the_next_one(pod, zones):
    from metricsched.core import model, node_state

    snapshot = zones(with_db=False)
    first = pod("web-1", labels=WEB, pod_anti_affinity=[near(WEB, "kubernetes.io/hostname")])
    assert node_reasons(pod("web-2", labels=WEB), snapshot)["a1"] == ()
    nodes = dict(snapshot.nodes)
    a1 = model.NodeName("a1")
    nodes[a1] = node_state.add_pod(nodes[a1], first)
    after = node_reasons(pod("web-2", labels=WEB), model.ClusterSnapshot(nodes=nodes))
    assert after["a1"] == (EXISTING,)
    assert after["a2"] == ()
