"""PodTopologySpread: DoNotSchedule constraints keep the skew within maxSkew."""

from __future__ import annotations

import pytest

from metricsched.core import model
from metricsched.core.plugins import pod_topology_spread
from tests.unit.filters.conftest import node_reasons, plugin_reason, pre_filter_refusal

SKEWED = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
WEB = {"app": "web"}


def zone_spread(max_skew: int = 1, **extra: object) -> dict[str, object]:
    found: dict[str, object] = {
        "maxSkew": max_skew,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": WEB},
    }
    found.update(extra)
    return found


@pytest.fixture
def two_zones(node, pod, cluster):
    """Zone a (a1, a2) runs two web pods; zone b (b1) runs none."""

    def make(*more_pods: model.PodInfo, nodes: tuple[model.NodeInfo, ...] = ()):
        return cluster(
            nodes=[
                node("a1", labels={"zone": "a"}),
                node("a2", labels={"zone": "a"}),
                node("b1", labels={"zone": "b"}),
                *nodes,
            ],
            pods=[
                pod("w1", labels=WEB, node_name="a1"),
                pod("w2", labels=WEB, node_name="a2"),
                *more_pods,
            ],
        )

    return make


def test_pod_goes_to_the_emptier_zone_only(pod, two_zones):
    verdicts = node_reasons(pod(labels=WEB, spread=[zone_spread()]), two_zones())
    assert verdicts == {"a1": (SKEWED,), "a2": (SKEWED,), "b1": ()}


def test_larger_max_skew_allows_the_fuller_zone(pod, two_zones):
    verdicts = node_reasons(pod(labels=WEB, spread=[zone_spread(3)]), two_zones())
    assert verdicts == {"a1": (), "a2": (), "b1": ()}


def test_node_without_the_topology_key_is_infeasible(pod, node, two_zones):
    snapshot = two_zones(nodes=(node("bare"),))
    verdicts = node_reasons(pod(labels=WEB, spread=[zone_spread(5)]), snapshot)
    assert verdicts["bare"] == (MISSING_LABEL,)


def test_schedule_anyway_constraints_never_filter(pod, two_zones):
    soft = zone_spread(whenUnsatisfiable="ScheduleAnyway")
    verdicts = node_reasons(pod(labels=WEB, spread=[soft]), two_zones())
    assert all(reasons == () for reasons in verdicts.values())


def test_pod_not_matching_its_own_selector_does_not_add_to_the_skew(pod, two_zones):
    # a has 2, b has 0: an unselected pod keeps a's skew at 2 <= 2; a selected one makes 3.
    verdicts = node_reasons(pod(labels={"app": "other"}, spread=[zone_spread(2)]), two_zones())
    assert verdicts == {"a1": (), "a2": (), "b1": ()}


def test_pods_of_other_namespaces_and_terminating_pods_are_not_counted(pod, two_zones):
    snapshot = two_zones(
        pod("foreign", namespace="other", labels=WEB, node_name="b1"),
        pod("leaving", labels=WEB, node_name="b1", deleting=True),
    )
    verdicts = node_reasons(pod(labels=WEB, spread=[zone_spread()]), snapshot)
    assert verdicts["a1"] == (SKEWED,)
    assert verdicts["b1"] == ()


def test_min_domains_above_the_domain_count_treats_the_minimum_as_zero(pod, node, cluster):
    snapshot = cluster(
        nodes=[node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})],
        pods=[pod("w1", labels=WEB, node_name="a1")],
    )
    plain = node_reasons(pod(labels=WEB, spread=[zone_spread()]), snapshot)
    assert plain == {"a1": (SKEWED,), "b1": ()}
    # With three domains required but two present, b (0 + 1 - 0 = 1) fits, a (1 + 1) not.
    strict = node_reasons(pod(labels=WEB, spread=[zone_spread(minDomains=3)]), snapshot)
    assert strict == {"a1": (SKEWED,), "b1": ()}
    # maxSkew 1 with minDomains 3 and a single-zone cluster: only the first pod fits.
    one_zone = cluster(
        nodes=[node("a1", labels={"zone": "a"})], pods=[pod("w1", labels=WEB, node_name="a1")]
    )
    assert node_reasons(pod(labels=WEB, spread=[zone_spread(minDomains=3)]), one_zone) == {
        "a1": (SKEWED,)
    }
    assert node_reasons(pod(labels=WEB, spread=[zone_spread()]), one_zone) == {"a1": ()}


def test_nodes_outside_the_pods_node_affinity_are_not_domains_by_default(pod, node, cluster):
    snapshot = cluster(
        nodes=[
            node("a1", labels={"zone": "a", "pool": "web"}),
            node("b1", labels={"zone": "b", "pool": "web"}),
            node("c1", labels={"zone": "c", "pool": "batch"}),
        ],
        pods=[
            pod("w1", labels=WEB, node_name="a1"),
            pod("w2", labels=WEB, node_name="b1"),
        ],
    )
    honoring = pod(labels=WEB, node_selector={"pool": "web"}, spread=[zone_spread()])
    # Zone c does not count (Honor), so the minimum is 1 and a/b both fit.
    assert node_reasons(honoring, snapshot) == {
        "a1": (),
        "b1": (),
        "c1": ("node(s) didn't match Pod's node affinity/selector",),
    }
    ignoring = pod(
        labels=WEB,
        node_selector={"pool": "web"},
        spread=[zone_spread(nodeAffinityPolicy="Ignore")],
    )
    # Zone c counts with 0 pods, so a and b are now too full.
    assert node_reasons(ignoring, snapshot)["a1"] == (SKEWED,)


def test_tainted_nodes_are_domains_unless_taints_are_honored(pod, node, cluster):
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    snapshot = cluster(
        nodes=[
            node("a1", labels={"zone": "a"}),
            node("b1", labels={"zone": "b"}),
            node("c1", labels={"zone": "c"}, taints=[taint]),
        ],
        pods=[pod("w1", labels=WEB, node_name="a1"), pod("w2", labels=WEB, node_name="b1")],
    )
    ignoring = pod(labels=WEB, spread=[zone_spread()])
    assert node_reasons(ignoring, snapshot)["a1"] == (SKEWED,)
    honoring = pod(labels=WEB, spread=[zone_spread(nodeTaintsPolicy="Honor")])
    assert node_reasons(honoring, snapshot)["a1"] == ()


def test_match_label_keys_narrow_the_selector_to_the_pods_own_revision(pod, two_zones):
    snapshot = two_zones()  # the two existing web pods have no "rev" label
    new_revision = pod(labels={**WEB, "rev": "2"}, spread=[zone_spread(matchLabelKeys=["rev"])])
    assert node_reasons(new_revision, snapshot) == {"a1": (), "a2": (), "b1": ()}


def test_constraint_without_label_selector_counts_nothing(pod, two_zones):
    blind = zone_spread()
    del blind["labelSelector"]
    verdicts = node_reasons(pod(labels=WEB, spread=[blind]), two_zones())
    assert all(reasons == () for reasons in verdicts.values())


def test_every_constraint_must_hold(pod, node, cluster):
    snapshot = cluster(
        nodes=[
            node("a1", labels={"zone": "a", "rack": "r1"}),
            node("a2", labels={"zone": "a", "rack": "r2"}),
            node("b1", labels={"zone": "b", "rack": "r3"}),
        ],
        pods=[pod("w1", labels=WEB, node_name="a1"), pod("w2", labels=WEB, node_name="b1")],
    )
    by_rack = zone_spread(topologyKey="rack")
    verdicts = node_reasons(pod(labels=WEB, spread=[zone_spread(), by_rack]), snapshot)
    # zone: a=1, b=1 -> both fine; rack: r1=1, r2=0, r3=1 -> only r2 fine.
    assert verdicts == {"a1": (SKEWED,), "a2": (), "b1": (SKEWED,)}


def test_single_filter_function_agrees_with_run_filters(pod, two_zones):
    spreading = pod(labels=WEB, spread=[zone_spread()])
    snapshot = two_zones()
    verdicts = node_reasons(spreading, snapshot)
    for name, state in snapshot.nodes.items():
        single = plugin_reason(pod_topology_spread.filtering, spreading, state, snapshot=snapshot)
        assert verdicts[name] == ((single,) if single else ())


@pytest.mark.parametrize(
    "broken",
    [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 0,
        },
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
        },
    ],
)
def test_unreadable_constraint_rules_the_pod_out_everywhere(pod, two_zones, broken):
    spreading = pod(labels=WEB, spread=[broken])
    reason = pre_filter_refusal(spreading, two_zones())
    assert reason.startswith("get constraints from pod: topologySpreadConstraints[0]")
    assert set(node_reasons(spreading, two_zones()).values()) == {(reason,)}


def test_reused_snapshot_counts_each_pods_own_selector(pod, two_zones):
    snapshot = two_zones(pod("c1", labels={"app": "cache"}, node_name="b1"))
    web = pod(labels=WEB, spread=[zone_spread()])
    cache = pod(
        labels={"app": "cache"},
        spread=[zone_spread(labelSelector={"matchLabels": {"app": "cache"}})],
    )
    for _ in range(2):  # the second round is answered from memoised per-node counts
        assert node_reasons(web, snapshot)["b1"] == ()
        assert node_reasons(cache, snapshot) == {"a1": (), "a2": (), "b1": (SKEWED,)}


def test_assuming_a_pod_changes_the_spread_for_the_next_replica(pod, two_zones):
    from metricsched.core import node_state

    snapshot = two_zones()
    replica = pod(labels=WEB, spread=[zone_spread()])
    assert node_reasons(replica, snapshot)["a1"] == (SKEWED,)
    nodes = dict(snapshot.nodes)
    b1 = model.NodeName("b1")
    for name in ("w3", "w4", "w5"):  # zone b now holds 3 web pods to zone a's 2
        nodes[b1] = node_state.add_pod(nodes[b1], pod(name, labels=WEB, node_name="b1"))
    after = node_reasons(replica, model.ClusterSnapshot(nodes=nodes))
    assert after == {"a1": (), "a2": (), "b1": (SKEWED,)}
