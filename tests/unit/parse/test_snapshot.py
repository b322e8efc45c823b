"""Aggregating bound pods into per-node state, and the assume cache's add_pod."""

from __future__ import annotations

from metricsched.core import model, node_state, pod_resources

GI = 2**30


def test_bound_pods_are_summed_on_their_node(node, pod, cluster):
    snapshot = cluster(
        nodes=[node("n1"), node("n2")],
        pods=[
            pod("a", node_name="n1", cpu="500m", memory="1Gi"),
            pod("b", node_name="n1", cpu="250m", requests={"nvidia.com/gpu": "1"}),
            pod("c", node_name="n2", cpu="1"),
        ],
    )
    n1 = snapshot.nodes[model.NodeName("n1")]
    assert n1.requested == model.Resources(
        milli_cpu=750, memory=GI, pods=2, scalar={"nvidia.com/gpu": 1}
    )
    assert [p.name for p in n1.pods] == ["a", "b"]
    assert snapshot.nodes[model.NodeName("n2")].requested.milli_cpu == 1000


def test_pending_pods_are_not_on_any_node(node, pod, cluster):
    snapshot = cluster(nodes=[node("n1")], pods=[pod("waiting", cpu="1")])
    assert snapshot.nodes[model.NodeName("n1")].requested == model.Resources()


def test_finished_pods_free_their_resources(node, pod, cluster):
    snapshot = cluster(
        nodes=[node("n1")],
        pods=[
            pod("done", node_name="n1", cpu="1", phase="Succeeded"),
            pod("crashed", node_name="n1", cpu="1", phase="Failed"),
            pod("running", node_name="n1", cpu="1", phase="Running"),
        ],
    )
    n1 = snapshot.nodes[model.NodeName("n1")]
    assert [p.name for p in n1.pods] == ["running"]
    assert n1.requested.pods == 1


def test_deleting_pods_still_hold_their_resources(node, pod, cluster):
    snapshot = cluster(
        nodes=[node("n1")], pods=[pod("going", node_name="n1", cpu="1", deleting=True)]
    )
    assert snapshot.nodes[model.NodeName("n1")].requested.milli_cpu == 1000


def test_pods_on_unknown_nodes_are_ignored(node, pod, cluster):
    snapshot = cluster(nodes=[node("n1")], pods=[pod("orphan", node_name="gone", cpu="1")])
    assert set(snapshot.nodes) == {"n1"}
    assert snapshot.nodes[model.NodeName("n1")].pods == ()


def test_used_host_ports_are_collected(node, pod, cluster):
    snapshot = cluster(
        nodes=[node("n1")],
        pods=[pod("proxy", node_name="n1", host_ports=[{"containerPort": 80, "hostPort": 80}])],
    )
    assert snapshot.nodes[model.NodeName("n1")].used_ports == frozenset(
        {model.HostPort(protocol="TCP", host_ip="0.0.0.0", port=80)}
    )


def test_recent_binds_are_attached_to_their_node(node, cluster):
    snapshot = cluster(
        nodes=[node("n1"), node("n2")], recent_binds={model.NodeName("n1"): [10.0, 12.5]}
    )
    assert snapshot.nodes[model.NodeName("n1")].recent_binds == (10.0, 12.5)
    assert snapshot.nodes[model.NodeName("n2")].recent_binds == ()


def test_nodes_keep_their_listing_order(node, cluster):
    snapshot = cluster(nodes=[node("b"), node("a"), node("c")])
    assert list(snapshot.nodes) == ["b", "a", "c"]


def test_adding_a_pod_updates_requests_ports_and_pods(node, pod, cluster):
    snapshot = cluster(nodes=[node("n1")], pods=[pod("a", node_name="n1", cpu="1")])
    before = snapshot.nodes[model.NodeName("n1")]
    assumed = pod(
        "b",
        cpu="500m",
        requests={"nvidia.com/gpu": "1"},
        host_ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}],
    )
    after = node_state.add_pod(before, assumed)
    assert after.requested == model.Resources(milli_cpu=1500, pods=2, scalar={"nvidia.com/gpu": 1})
    assert model.HostPort(protocol="UDP", host_ip="0.0.0.0", port=53) in after.used_ports
    assert [p.name for p in after.pods] == ["a", "b"]
    assert before.requested.pods == 1  # the original state is untouched


def test_adding_a_pod_matches_building_the_snapshot_with_it(node, pod, cluster):
    pods = [pod("a", node_name="n1", cpu="1"), pod("b", node_name="n1", memory="1Gi")]
    built = cluster(nodes=[node("n1")], pods=pods).nodes[model.NodeName("n1")]
    empty = cluster(nodes=[node("n1")]).nodes[model.NodeName("n1")]
    assert node_state.add_pod(node_state.add_pod(empty, pods[0]), pods[1]) == built


def test_sum_of_no_resources_is_zero():
    assert pod_resources.sum_resources([]) == model.Resources()
