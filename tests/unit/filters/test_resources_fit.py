"""NodeResourcesFit: free pod slots and room for every requested resource."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from metricsched.core import model
from metricsched.core.plugins import node_resources_fit
from tests.unit.filters.conftest import plugin_reasons


def on_node(cluster, node, *pods) -> model.NodeState:
    return cluster(nodes=[node], pods=list(pods)).nodes[node.name]


def test_pod_that_fits_free_capacity_is_feasible(pod, node, cluster):
    state = on_node(cluster, node("n1", cpu="2", memory="4Gi"), pod("a", node_name="n1", cpu="1"))
    assert plugin_reasons(node_resources_fit.filtering, pod(cpu="1", memory="4Gi"), state) == ()


def test_exact_fit_is_feasible(pod, node, cluster):
    state = on_node(cluster, node("n1", cpu="1500m"), pod("a", node_name="n1", cpu="1"))
    assert plugin_reasons(node_resources_fit.filtering, pod(cpu="500m"), state) == ()


def test_pod_needing_more_cpu_than_is_free_is_rejected(pod, node, cluster):
    state = on_node(cluster, node("n1", cpu="2"), pod("a", node_name="n1", cpu="1500m"))
    assert plugin_reasons(node_resources_fit.filtering, pod(cpu="501m"), state) == (
        "Insufficient cpu",
    )


def test_memory_and_ephemeral_storage_shortfalls_are_named(pod, node, cluster):
    state = on_node(cluster, node("n1", memory="1Gi", ephemeral="1Gi"))
    assert plugin_reasons(
        node_resources_fit.filtering, pod(memory="2Gi", ephemeral="2Gi"), state
    ) == (
        "Insufficient memory",
        "Insufficient ephemeral-storage",
    )


def test_every_shortfall_is_reported_in_kube_scheduler_order(pod, node, cluster):
    state = on_node(
        cluster,
        node("n1", cpu="1", memory="1Gi", ephemeral="1Gi", pods="1", extended={"b.io/x": "1"}),
        pod("a", node_name="n1"),
    )
    greedy = pod(
        cpu="2",
        memory="2Gi",
        ephemeral="2Gi",
        requests={"b.io/x": "2", "a.io/y": "1"},
    )
    assert plugin_reasons(node_resources_fit.filtering, greedy, state) == (
        "Too many pods",
        "Insufficient cpu",
        "Insufficient memory",
        "Insufficient ephemeral-storage",
        "Insufficient a.io/y",
        "Insufficient b.io/x",
    )


def test_extended_resource_the_node_lacks_is_insufficient(pod, node, cluster):
    state = on_node(cluster, node("n1"))
    assert plugin_reasons(
        node_resources_fit.filtering, pod(requests={"nvidia.com/gpu": "1"}), state
    ) == ("Insufficient nvidia.com/gpu",)


def test_extended_resource_in_use_counts_against_the_node(pod, node, cluster):
    state = on_node(
        cluster,
        node("n1", extended={"nvidia.com/gpu": "2"}),
        pod("a", node_name="n1", requests={"nvidia.com/gpu": "1"}),
    )
    assert (
        plugin_reasons(node_resources_fit.filtering, pod(requests={"nvidia.com/gpu": "1"}), state)
        == ()
    )
    assert plugin_reasons(
        node_resources_fit.filtering, pod(requests={"nvidia.com/gpu": "2"}), state
    ) == ("Insufficient nvidia.com/gpu",)


def test_hugepages_are_checked_like_extended_resources(pod, node, cluster):
    state = on_node(cluster, node("n1", extended={"hugepages-2Mi": "64Mi"}))
    assert plugin_reasons(
        node_resources_fit.filtering, pod(requests={"hugepages-2Mi": "128Mi"}), state
    ) == ("Insufficient hugepages-2Mi",)


def test_full_node_rejects_even_a_pod_requesting_nothing(pod, node, cluster):
    state = on_node(cluster, node("n1", pods="1"), pod("a", node_name="n1"))
    assert plugin_reasons(node_resources_fit.filtering, pod(), state) == ("Too many pods",)


def test_overcommitted_node_still_takes_pods_that_do_not_ask_for_that_resource(pod, node, cluster):
    # Allocatable shrank below what is already requested; a pod asking no cpu still fits.
    state = on_node(cluster, node("n1", cpu="1"), pod("a", node_name="n1", cpu="2"))
    assert plugin_reasons(node_resources_fit.filtering, pod(memory="1Gi"), state) == ()
    assert plugin_reasons(node_resources_fit.filtering, pod(cpu="1m"), state) == (
        "Insufficient cpu",
    )


def test_init_container_peak_is_what_must_fit(pod, container, node, cluster):
    state = on_node(cluster, node("n1", cpu="1"))
    migrating = pod(
        init_containers=[container("m", cpu="2")], containers=[container("a", cpu="100m")]
    )
    assert plugin_reasons(node_resources_fit.filtering, migrating, state) == ("Insufficient cpu",)


def test_assumed_pods_count_like_bound_ones(pod, node, cluster):
    from metricsched.core import node_state

    state = on_node(cluster, node("n1", cpu="1"))
    assumed = node_state.add_pod(state, pod("just-bound", cpu="800m"))
    assert plugin_reasons(node_resources_fit.filtering, pod(cpu="300m"), assumed) == (
        "Insufficient cpu",
    )


amounts = st.integers(min_value=0, max_value=64_000)


@given(allocatable=amounts, used=amounts, wanted=amounts)
def test_pod_fitting_free_cpu_is_never_rejected_and_one_exceeding_it_is(
    *, pod, node, cluster, allocatable, used, wanted
):
    state = on_node(
        cluster,
        node("n1", cpu=f"{allocatable}m"),
        pod("a", node_name="n1", cpu=f"{used}m"),
    )
    reasons = plugin_reasons(node_resources_fit.filtering, pod(cpu=f"{wanted}m"), state)
    if wanted == 0 or wanted <= allocatable - used:
        assert reasons == ()
    else:
        assert reasons == ("Insufficient cpu",)


@given(
    free=st.lists(st.integers(0, 10**12), min_size=4, max_size=4),
    wanted=st.lists(st.integers(0, 10**12), min_size=4, max_size=4),
)
def test_each_resource_is_rejected_exactly_when_it_exceeds_what_is_free(
    pod, node, cluster, free, wanted
):
    names = ("memory", "ephemeral-storage", "example.com/dongle", "hugepages-1Gi")
    state = on_node(
        cluster,
        node(
            "n1",
            memory=str(free[0]),
            ephemeral=str(free[1]),
            extended={names[2]: str(free[2]), names[3]: str(free[3])},
        ),
    )
    reasons = plugin_reasons(
        node_resources_fit.filtering,
        pod(requests={name: str(amount) for name, amount in zip(names, wanted, strict=True)}),
        state,
    )
    expected = {f"Insufficient {n}" for n, f, w in zip(names, free, wanted, strict=True) if w > f}
    assert set(reasons) == expected
