"""The cluster cache: bound pods count on their node, assumed pods too, pending pods wait."""

from __future__ import annotations

from typing import Any

from metricsched.core import model, parse
from metricsched.runtime import cache as cache_mod


def _node(name: str, cpu: str = "4") -> model.NodeInfo:
    return parse.node_from_body(
        {
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }
    )


def _pod(
    name: str,
    *,
    node: str = "",
    cpu: str = "500m",
    phase: str = "Pending",
    scheduler: str = "metricsched",
) -> model.PodInfo:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }
    return parse.pod_from_body(body)


def _cpu(cache: cache_mod.ClusterCache, node: str) -> int:
    return cache.snapshot(now=0.0).nodes[model.NodeName(node)].requested.milli_cpu


def test_bound_pod_counts_on_its_node() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_pod(_pod("a", node="n1"), ours=False)
    assert _cpu(c, "n1") == 500
    assert c.pending == {}


def test_our_unbound_pod_is_pending_and_another_schedulers_is_not() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_pod(_pod("a"), ours=True)
    c.upsert_pod(_pod("b", scheduler="other"), ours=False)
    assert set(c.pending) == {"uid-a"}


def test_assumed_pod_takes_capacity_at_once_and_the_watch_confirms_it() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    pod = _pod("a")
    c.upsert_pod(pod, ours=True)
    c.assume(pod, model.NodeName("n1"), now=10.0)
    assert _cpu(c, "n1") == 500
    assert "uid-a" not in c.pending
    # A stale watch event (still unbound) must not make it pending again.
    c.upsert_pod(pod, ours=True)
    assert "uid-a" not in c.pending
    c.upsert_pod(_pod("a", node="n1"), ours=True)
    assert not c.is_assumed("uid-a")
    assert _cpu(c, "n1") == 500


def test_forgetting_an_assumed_pod_frees_capacity_and_makes_it_pending_again() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    pod = _pod("a")
    c.upsert_pod(pod, ours=True)
    c.assume(pod, model.NodeName("n1"), now=10.0)
    c.forget(pod)
    assert _cpu(c, "n1") == 0
    assert "uid-a" in c.pending
    assert c.snapshot(now=10.0).nodes[model.NodeName("n1")].recent_binds == ()


def test_assume_records_a_recent_bind_for_the_burst_penalty() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    pod = _pod("a")
    c.assume(pod, model.NodeName("n1"), now=42.0)
    assert c.snapshot(now=42.0).nodes[model.NodeName("n1")].recent_binds == (42.0,)


def test_finished_or_deleted_pods_free_their_node() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_pod(_pod("a", node="n1"), ours=False)
    c.upsert_pod(_pod("b", node="n1"), ours=False)
    c.upsert_pod(_pod("a", node="n1", phase="Succeeded"), ours=False)
    assert _cpu(c, "n1") == 500
    c.remove_pod("uid-b")
    assert _cpu(c, "n1") == 0


def test_pod_bound_to_a_node_not_seen_yet_counts_once_the_node_arrives() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_pod(_pod("a", node="n1"), ours=False)
    c.upsert_node(_node("n1"))
    assert _cpu(c, "n1") == 500


def test_generation_moves_on_changes_that_can_help_a_pending_pod() -> None:
    c = cache_mod.ClusterCache()
    g0 = c.generation
    c.upsert_node(_node("n1"))
    g1 = c.generation
    c.upsert_pod(_pod("a", node="n1"), ours=False)
    c.remove_pod("uid-a")
    assert g0 < g1 < c.generation


def test_snapshot_rebuilds_only_nodes_that_changed() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_node(_node("n2"))
    first = c.snapshot(now=0.0).nodes
    n2_before = first[model.NodeName("n2")]
    c.upsert_pod(_pod("a", node="n1"), ours=False)
    second = c.snapshot(now=0.0).nodes
    assert second[model.NodeName("n2")] is n2_before
    assert second[model.NodeName("n1")].requested.milli_cpu == 500
