"""The cluster cache: bound pods count on their node, assumed pods too, pending pods wait."""

from __future__ import annotations

import dataclasses
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


# --- what wakes waiting pods ------------------------------------------------------------


def test_a_node_heartbeat_is_not_a_change_that_can_help_a_pending_pod() -> None:
    c = cache_mod.ClusterCache()
    assert c.upsert_node(_node("n1"), resource_version="10")
    g = c.generation
    assert not c.upsert_node(_node("n1"), resource_version="11")  # same spec, new status
    assert c.generation == g
    assert c.upsert_node(_node("n1", cpu="8"), resource_version="12")
    assert c.generation > g


# --- holds and corrections after a lost Binding answer -----------------------------------


def test_a_hold_keeps_the_capacity_while_the_pod_is_tried_elsewhere() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_node(_node("n2"))
    pod = _pod("a")
    c.upsert_pod(pod, ours=True)
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.forget(pod)
    c.hold(pod, model.NodeName("n1"), until=90.0)
    assert "uid-a" in c.pending
    assert _cpu(c, "n1") == 500
    c.assume(pod, model.NodeName("n2"), now=1.0)
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (500, 500)  # counted twice, never zero times
    c.upsert_pod(_pod("a", node="n2"), ours=True)  # the watch: bound on n2
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (0, 500)


def test_a_hold_expires() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.hold(_pod("a"), model.NodeName("n1"), until=90.0)
    assert c.expire_holds(89.0) == 0
    assert _cpu(c, "n1") == 500
    assert c.expire_holds(90.0) == 1
    assert _cpu(c, "n1") == 0


def test_a_409_naming_another_node_moves_the_pod_there() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_node(_node("n2"))
    pod = _pod("a")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.correct(pod, model.NodeName("n2"), now=0.0)
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (0, 500)
    assert c.is_assumed("uid-a")


# --- reconciliation with a LIST ---------------------------------------------------------


def test_pods_and_nodes_missing_from_a_newer_list_are_ghosts() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    c.upsert_node(_node("gone"), resource_version="6")
    c.upsert_pod(_pod("kept", node="n1"), ours=False, resource_version="7")
    c.upsert_pod(_pod("deleted", node="n1"), ours=False, resource_version="8")
    c.upsert_pod(_pod("newer", node="n1"), ours=False, resource_version="30")  # after the LIST
    c.upsert_pod(_pod("pending"), ours=True, resource_version="9")  # kopf's, not this LIST's
    assert c.node_ghosts({model.NodeName("n1")}, list_version="20") == ["gone"]
    assert c.bound_ghosts({"uid-kept"}, list_version="20", started=100.0) == ["uid-deleted"]
    assert c.pending_ghosts(set(), list_version="20") == ["uid-pending"]


def test_an_assumed_pod_is_no_ghost_while_its_binding_may_still_land() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    pod = _pod("a")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    assert c.bound_ghosts(set(), list_version="20", started=100.0) == []
    c.confirm_bound("uid-a", at=150.0)  # accepted after the LIST was sent: not in it yet
    assert c.bound_ghosts(set(), list_version="20", started=100.0) == []


def test_a_pod_we_bound_that_ended_while_unwatched_frees_its_node_after_the_next_list() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1", cpu="1"), resource_version="5")
    pod = _pod("a", cpu="1")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.confirm_bound("uid-a", at=50.0)  # accepted; the watch never showed it (a gap)
    assert c.bound_ghosts(set(), list_version="20", started=100.0) == ["uid-a"]
    c.remove_pod("uid-a", resource_version="20")
    assert c.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 0


def test_a_hold_on_a_deleted_node_does_not_come_back_with_a_node_of_that_name() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    pod = _pod("a", cpu="1")
    c.hold(pod, model.NodeName("n1"), until=1e12)
    c.remove_node(model.NodeName("n1"), resource_version="9")
    assert c.holds() == {}
    c.upsert_node(_node("n1"), resource_version="12")  # registered again
    state = c.snapshot().nodes[model.NodeName("n1")]
    assert state.pods == () and state.requested.milli_cpu == 0


# --- pods whose node is gone (orphans) --------------------------------------------------


def test_a_node_registered_again_never_adopts_a_pod_bound_elsewhere_meanwhile() -> None:
    # The review's N6 path: the node is deleted after the decision (the Binding is never
    # sent), the pod goes to n2, n1 registers again, then the pod is deleted.
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    c.upsert_node(_node("n2"), resource_version="6")
    pod = _pod("a", cpu="1")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.remove_node(model.NodeName("n1"), resource_version="8")
    c.forget(pod)  # the bind path finds n1 gone and sends nothing
    c.assume(c.pending["uid-a"], model.NodeName("n2"), now=1.0)
    c.upsert_pod(_pod("a", node="n2", cpu="1"), ours=True, resource_version="9")
    c.upsert_node(_node("n1"), resource_version="10")
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (0, 1000)
    c.remove_pod("uid-a", resource_version="11")
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (0, 0)
    assert c.bound_ghosts(set(), list_version="20", started=100.0) == []


def test_a_forgotten_pod_whose_node_was_deleted_is_not_adopted_by_a_node_of_that_name() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    pod = _pod("a", cpu="1")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.remove_node(model.NodeName("n1"), resource_version="8")
    c.forget(pod)
    c.upsert_node(_node("n1"), resource_version="10")
    assert _cpu(c, "n1") == 0
    assert "uid-a" in c.pending


def test_a_hold_on_a_node_not_known_is_not_adopted_by_a_node_of_that_name() -> None:
    c = cache_mod.ClusterCache()
    c.hold(_pod("a", cpu="1"), model.NodeName("n1"), until=1e12)
    c.upsert_node(_node("n1"), resource_version="10")
    assert _cpu(c, "n1") == 0


def test_a_pod_bound_to_a_deleted_node_counts_there_again_when_the_node_comes_back() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    c.upsert_pod(_pod("a", node="n1", cpu="1"), ours=False, resource_version="7")
    c.remove_node(model.NodeName("n1"), resource_version="8")
    c.upsert_node(_node("n1"), resource_version="10")  # the kubelet registers again
    assert _cpu(c, "n1") == 1000
    c.remove_pod("uid-a", resource_version="11")
    assert _cpu(c, "n1") == 0


def test_an_orphan_moved_to_a_known_node_or_deleted_is_no_longer_held_for_its_old_node() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n2"), resource_version="5")
    c.upsert_pod(_pod("a", node="n1", cpu="1"), ours=False, resource_version="7")  # n1 unknown
    c.upsert_pod(_pod("b", node="n1", cpu="1"), ours=False, resource_version="8")
    c.upsert_pod(_pod("a", node="n2", cpu="1"), ours=False, resource_version="9")  # re-created
    c.remove_pod("uid-b", resource_version="10")
    c.upsert_node(_node("n1"), resource_version="11")
    assert (_cpu(c, "n1"), _cpu(c, "n2")) == (0, 1000)


def test_leaving_the_pending_watch_never_frees_what_an_assumed_pod_holds() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    pod = _pod("a", cpu="1")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.leave_pending("uid-a")  # kopf: DELETED at the bind's version, the unbound object
    assert c.is_assumed("uid-a")
    assert c.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000
    c.upsert_pod(_pod("a", node="n1", cpu="1"), ours=True, resource_version="8")  # informer
    assert not c.is_assumed("uid-a") and c.pending == {}
    assert c.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000


def test_a_failed_binding_puts_back_the_newest_copy_of_the_pod() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    old = _pod("a", cpu="1")
    c.upsert_pod(old, ours=True, resource_version="7")
    c.assume(old, model.NodeName("n1"), now=0.0)
    newer = dataclasses.replace(old, labels={"tier": "web"})
    c.upsert_pod(newer, ours=True, resource_version="8")  # changed while the bind was out
    c.forget(old)
    assert c.pending["uid-a"] == newer


def test_a_failed_binding_of_a_pod_that_left_the_pending_watch_does_not_make_it_pending() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    pod = _pod("a", cpu="1")
    c.upsert_pod(pod, ours=True, resource_version="7")
    c.assume(pod, model.NodeName("n1"), now=0.0)
    c.leave_pending("uid-a")  # deleted meanwhile
    c.forget(pod)
    assert c.pending == {}
    assert c.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 0


def test_a_listed_copy_older_than_a_seen_deletion_does_not_come_back() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_pod(_pod("a"), ours=True, resource_version="7")
    c.remove_pod("uid-a", resource_version="9")
    c.upsert_pod(_pod("a"), ours=True, resource_version="7")  # from a LIST taken earlier
    assert c.pending == {}


def test_a_listed_copy_older_than_a_seen_node_deletion_does_not_come_back() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"), resource_version="5")
    c.remove_node(model.NodeName("n1"), resource_version="9")
    assert not c.upsert_node(_node("n1"), resource_version="5")  # from a LIST taken earlier
    assert c.nodes() == []
    assert c.upsert_node(_node("n1"), resource_version="12")  # re-created later
    assert [n.name for n in c.nodes()] == ["n1"]


def test_a_correction_to_where_the_watch_already_put_the_pod_changes_nothing() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.upsert_pod(_pod("a", node="n1"), ours=True)
    c.correct(_pod("a"), model.NodeName("n1"), now=0.0)
    assert not c.is_assumed("uid-a")
    assert _cpu(c, "n1") == 500


def test_an_annotation_change_is_told_apart_from_a_change_every_pod_cares_about() -> None:
    c = cache_mod.ClusterCache()
    node = _node("n1")
    c.upsert_node(node, resource_version="10")
    g = c.generation
    annotated = dataclasses.replace(node, annotations={"example.com/price": "0.3"})
    assert not c.upsert_node(annotated, resource_version="11")
    assert c.generation == g
    assert c.changed_annotations == {"example.com/price"}
    assert c.snapshot(now=0.0).nodes[model.NodeName("n1")].node.annotations == {
        "example.com/price": "0.3"
    }


def test_node_state_sums_pods_requests_as_kube_schedulers_scores_count_them():
    cache = cache_mod.ClusterCache()
    cache.upsert_node(_node("n1"))
    cache.upsert_pod(_pod("a", node="n1", cpu="500m"), ours=False)
    cache.upsert_pod(_pod("b", node="n1", cpu="0"), ours=False)
    state = cache.snapshot(now=0).nodes[model.NodeName("n1")]
    assert state.requested.milli_cpu == 500
    assert state.nonzero_requested is not None
    # b's explicit 0 stays 0; neither asks memory: 200Mi each.
    assert state.nonzero_requested.milli_cpu == 500
    assert state.nonzero_requested.memory == 2 * 200 * 1024**2


def test_a_bound_pod_arriving_or_changing_labels_or_requests_can_help_a_pending_pod() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    gen = c.generation
    c.upsert_pod(_pod("db", node="n1", scheduler="other"), ours=False)  # required affinity
    assert c.generation > gen
    gen = c.generation
    relabelled = dataclasses.replace(_pod("db", node="n1", scheduler="other"), labels={"a": "b"})
    c.upsert_pod(relabelled, ours=False)
    assert c.generation > gen
    gen = c.generation
    c.upsert_pod(relabelled, ours=False)  # the same pod again (a status write)
    assert c.generation == gen
    c.upsert_pod(
        dataclasses.replace(relabelled, requests=_pod("x", cpu="100m").requests), ours=False
    )
    assert c.generation > gen  # resized in place: capacity freed


def test_our_own_binding_confirmed_by_the_watch_is_not_a_change() -> None:
    c = cache_mod.ClusterCache()
    c.upsert_node(_node("n1"))
    c.assume(_pod("web"), model.NodeName("n1"), now=0.0)
    gen = c.generation
    c.upsert_pod(_pod("web", node="n1"), ours=True)
    assert c.generation == gen
