"""run_filters: every node, kube-scheduler's plugin order, first failing filter wins."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import model
from metricsched.core.plugins import (
    node_affinity,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
)
from tests.unit.filters.conftest import (
    node_reasons,
    plugin_reason,
    plugin_reasons,
    pre_filter_refusal,
)

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_every_node_gets_a_verdict_and_feasible_ones_an_empty_tuple(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1"), node("n2", cpu="100m"), node("n3")])
    assert node_reasons(pod(cpu="1"), snapshot) == {
        "n1": (),
        "n2": ("Insufficient cpu",),
        "n3": (),
    }


def test_first_failing_filter_is_the_only_one_reported(pod, node, cluster):
    # Tainted *and* too small: TaintToleration runs before NodeResourcesFit.
    snapshot = cluster(nodes=[node("n1", cpu="100m", taints=[GPU_TAINT])])
    assert node_reasons(pod(cpu="1"), snapshot)["n1"] == ("node(s) had untolerated taint(s)",)


def test_cordon_is_reported_before_taints(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1", unschedulable=True, taints=[GPU_TAINT])])
    assert node_reasons(pod(), snapshot)["n1"] == ("node(s) were unschedulable",)


def test_node_affinity_is_reported_before_ports_and_resources(pod, node, cluster):
    holder = pod("holder", node_name="n1", host_ports=[{"containerPort": 80, "hostPort": 80}])
    snapshot = cluster(nodes=[node("n1", cpu="100m")], pods=[holder])
    picky = pod(
        cpu="1", node_selector={"disk": "ssd"}, host_ports=[{"containerPort": 80, "hostPort": 80}]
    )
    assert node_reasons(picky, snapshot)["n1"] == (
        "node(s) didn't match Pod's node affinity/selector",
    )


def test_ports_are_reported_before_resources(pod, node, cluster):
    holder = pod("holder", node_name="n1", host_ports=[{"containerPort": 80, "hostPort": 80}])
    snapshot = cluster(nodes=[node("n1", cpu="100m")], pods=[holder])
    wanting = pod(cpu="1", host_ports=[{"containerPort": 80, "hostPort": 80}])
    assert node_reasons(wanting, snapshot)["n1"] == (
        "node(s) didn't have free ports for the requested pod ports",
    )


def test_resources_are_reported_before_spread_and_affinity(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1", cpu="100m")])
    constrained = pod(
        cpu="1",
        labels={"app": "web"},
        spread=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        pod_affinity=[{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}],
    )
    assert node_reasons(constrained, snapshot)["n1"] == ("Insufficient cpu",)


def test_spread_is_reported_before_inter_pod_affinity(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1")])
    constrained = pod(
        spread=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        pod_affinity=[{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}],
    )
    assert node_reasons(constrained, snapshot)["n1"] == (
        "node(s) didn't match pod topology spread constraints (missing required label)",
    )


def test_all_resource_shortfalls_of_a_node_are_kept(pod, node, cluster):
    snapshot = cluster(nodes=[node("n1", cpu="100m", memory="100Mi")])
    assert node_reasons(pod(cpu="1", memory="1Gi"), snapshot)["n1"] == (
        "Insufficient cpu",
        "Insufficient memory",
    )


def test_pod_needing_an_unsupported_feature_is_refused_everywhere_with_a_clear_reason(
    pod, node, cluster
):
    claiming = dataclasses.replace(pod(), unsupported=("volume topology",))
    reason = pre_filter_refusal(claiming, cluster(nodes=[node("n1")]))
    assert reason == (
        "metricsched does not support volume topology yet; remove it from the pod or let "
        "another scheduler place the pod (spec.schedulerName)"
    )
    verdicts = node_reasons(claiming, cluster(nodes=[node("n1"), node("n2")]))
    assert verdicts == {"n1": (reason,), "n2": (reason,)}


def test_plain_pod_passes_the_pre_filter(pod, node, cluster):
    assert pre_filter_refusal(pod(cpu="1"), cluster(nodes=[node("n1")])) == ""


def test_empty_cluster_gives_no_verdicts(pod, cluster):
    assert node_reasons(pod(), cluster(nodes=[])) == {}


CPUS = ["100m", "1", "4"]
TAINTS = [(), (GPU_TAINT,), ({"key": "spot", "effect": "NoExecute"},)]
ZONES = ["a", "b", None]


@settings(max_examples=60)
@given(
    layout=st.lists(
        st.tuples(
            st.sampled_from(CPUS),
            st.sampled_from(TAINTS),
            st.sampled_from(ZONES),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    wanted_cpu=st.sampled_from(["0", "500m", "2"]),
    tolerate=st.booleans(),
    pick_zone=st.sampled_from(["", "a"]),
)
def test_run_filters_equals_the_first_failing_single_filter(
    *, pod, node, cluster, layout, wanted_cpu, tolerate, pick_zone
):
    nodes = [
        node(
            f"n{index}",
            cpu=cpu,
            taints=list(taints),
            labels={} if zone is None else {"zone": zone},
            unschedulable=cordoned,
        )
        for index, (cpu, taints, zone, cordoned) in enumerate(layout)
    ]
    snapshot = cluster(nodes=nodes, pods=[pod("old", node_name="n0", cpu="100m")])
    incoming = pod(
        cpu=wanted_cpu,
        tolerations=[{"operator": "Exists", "effect": "NoSchedule"}] if tolerate else [],
        node_selector={"zone": pick_zone} if pick_zone else None,
    )
    verdicts = node_reasons(incoming, snapshot)
    for name, state in snapshot.nodes.items():
        expected: tuple[str, ...] = ()
        for single in (
            plugin_reason(node_unschedulable, incoming, state.node),
            plugin_reason(taint_toleration.filtering, incoming, state.node),
            plugin_reason(node_affinity.filtering, incoming, state.node),
            plugin_reason(node_ports, incoming, state),
        ):
            if single:
                expected = (single,)
                break
        else:
            expected = plugin_reasons(node_resources_fit.filtering, incoming, state)
        assert verdicts[name] == expected
    assert set(verdicts) == set(snapshot.nodes)


def test_reasons_are_typed_per_node_name(pod, node, cluster):
    verdicts = node_reasons(pod(), cluster(nodes=[node("n1")]))
    assert verdicts[model.NodeName("n1")] == ()
