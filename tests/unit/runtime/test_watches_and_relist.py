"""Watches: kopf is restarted, never fatal; a re-list removes what vanished unwatched."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import pytest

from metricsched import config as config_mod
from metricsched.edges import metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import reconcile
from metricsched.runtime import status as status_mod
from metricsched.runtime import watches as watches_mod


def _watches() -> watches_mod.Watches:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    cache = cache_mod.ClusterCache()
    metrics = observe.Metrics()
    return watches_mod.Watches(
        config=config_mod.from_args(parser.parse_args([]), {}),
        api_client=None,
        cache=cache,
        queue=queue_mod.SchedulingQueue(),
        status=status_mod.PolicyStatus(
            api=None,  # type: ignore[arg-type]
            policies=lambda: cache.policies,
            nodes=cache.nodes,
            counters=lambda key: (0, 0),
            metrics=metrics,
            interval_s=15.0,
        ),
        store=metric_store.MetricStore(),
        metrics=metrics,
        health=observe.HealthState(),
        record=lambda *a, **kw: None,
        refresh_now=asyncio.Event(),
    )


def _node(name: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str, rv: str, *, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {
            "schedulerName": "metricsched",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


# --- kopf under a supervisor ------------------------------------------------------------


def test_a_failing_watch_makes_readyz_false_and_kopf_restarts_instead_of_exiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = _watches()
    w.health.set_ready(True, "caches synced")
    runs: list[str] = []
    readiness: list[tuple[bool, str]] = []

    async def fake_operator(*, stop_flag: asyncio.Event, **_: Any) -> None:
        runs.append("run")
        if len(runs) == 1:
            raise RuntimeError("403 Forbidden: cannot watch nodes")
        readiness.append(w.health.readiness())
        w.on_node(None, _node("n1", "5"))  # the restarted watches deliver
        await asyncio.sleep(0.05)
        readiness.append(w.health.readiness())
        stop_flag.set()

    monkeypatch.setattr(watches_mod.kopf, "operator", fake_operator)
    monkeypatch.setattr(watches_mod, "_RESTART_BACKOFF", (0.01, 0.01))

    async def go() -> None:
        await asyncio.wait_for(w.run_kopf(asyncio.Event()), timeout=5)

    asyncio.run(go())
    assert runs == ["run", "run"]
    assert readiness[0][0] is False
    assert "403 Forbidden" in readiness[0][1]
    assert readiness[1] == (True, "watches delivering again")
    assert w.metrics.registry.get_sample_value("metricsched_watch_restarts_total") == 1


def test_kopf_listing_again_asks_for_a_reconciliation() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    assert not w.relisted.is_set()
    w.on_node(None, _node("n1", "5"))
    assert w.relisted.is_set()


# --- re-list ----------------------------------------------------------------------------


def test_a_relist_removes_pods_and_nodes_deleted_while_unwatched_and_adds_missed_ones() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    w.on_node("ADDED", _node("deleted-node", "6"))
    w.on_pod("ADDED", _pod("bound", "7", node="n1"))
    w.on_pod("ADDED", _pod("deleted-pod", "8", node="n1"))
    listing = reconcile.Listing(
        nodes=[_node("n1", "5"), _node("missed-node", "15")],
        nodes_version="20",
        pods=[_pod("bound", "7", node="n1"), _pod("missed-pending", "16")],
        pods_version="20",
    )
    outcome = reconcile.apply(listing, cache=w.cache, on_pod=w.on_pod, on_node=w.on_node)
    assert (outcome.nodes_removed, outcome.pods_removed, outcome.applied) == (1, 1, 2)
    assert sorted(n.name for n in w.cache.nodes()) == ["missed-node", "n1"]
    snapshot = w.cache.snapshot(now=0.0)
    assert snapshot.nodes["n1"].requested.milli_cpu == 1000  # the ghost pod's share is freed
    assert set(w.cache.pending) == {"uid-missed-pending"}
    assert "uid-missed-pending" in w.queue


def test_a_relist_keeps_what_the_watch_saw_after_the_list() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    w.on_pod("ADDED", _pod("new", "25"))  # created after the LIST was taken
    listing = reconcile.Listing(
        nodes=[_node("n1", "5")], nodes_version="20", pods=[], pods_version="20"
    )
    outcome = reconcile.apply(listing, cache=w.cache, on_pod=w.on_pod, on_node=w.on_node)
    assert outcome.pods_removed == 0
    assert "uid-new" in w.cache.pending


def test_a_relist_does_not_resurrect_a_pod_whose_deletion_the_watch_saw() -> None:
    w = _watches()
    w.on_pod("ADDED", _pod("gone", "7"))
    w.on_pod("DELETED", _pod("gone", "30"))
    listing = reconcile.Listing(
        nodes=[], nodes_version="20", pods=[_pod("gone", "7")], pods_version="20"
    )
    reconcile.apply(listing, cache=w.cache, on_pod=w.on_pod, on_node=w.on_node)
    assert w.cache.pending == {}


# --- no decision on a cache that may hold ghosts ------------------------------------------


class _Raw:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


class FakeCore:
    def __init__(self) -> None:
        self.fail = False

    def list_node(self, **_: Any) -> _Raw:
        if self.fail:
            raise OSError("down")
        return _Raw({"metadata": {"resourceVersion": "50"}, "items": [_node("n1", "5")]})

    def list_pod_for_all_namespaces(self, **_: Any) -> _Raw:
        return _Raw({"metadata": {"resourceVersion": "50"}, "items": []})


def _reconciler(w: watches_mod.Watches, core: FakeCore) -> reconcile.Reconciler:
    return reconcile.Reconciler(
        api=core,  # type: ignore[arg-type]
        cache=w.cache,
        watches=w,
        metrics=w.metrics,
        interval_s=60.0,
    )


def test_scheduling_waits_from_a_relist_until_its_reconciliation_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile, "SETTLE_S", 0.0)
    w = _watches()
    core = FakeCore()
    r = _reconciler(w, core)
    w.on_node("ADDED", _node("ghost", "6"))
    assert w.consistent.is_set()
    core.fail = True

    async def go() -> tuple[bool, bool, list[str]]:
        stop = asyncio.Event()
        task = asyncio.create_task(r.run(stop))
        w.on_node(None, _node("n1", "5"))  # kopf re-lists
        after_relist = w.consistent.is_set()
        await asyncio.sleep(0.2)
        while_list_fails = w.consistent.is_set()
        core.fail = False
        await asyncio.wait_for(w.consistent.wait(), timeout=5)
        stop.set()
        task.cancel()
        return after_relist, while_list_fails, sorted(n.name for n in w.cache.nodes())

    after_relist, while_list_fails, nodes = asyncio.run(go())
    assert not after_relist
    assert not while_list_fails
    assert nodes == ["n1"]  # the ghost is gone before scheduling resumes


# --- what a re-list keeps until it applies ----------------------------------------------


class ListingCore:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.nodes, self.pods = nodes, pods

    def list_node(self, **_: Any) -> _Raw:
        return _Raw({"metadata": {"resourceVersion": "20"}, "items": self.nodes})

    def list_pod_for_all_namespaces(self, **_: Any) -> _Raw:
        return _Raw({"metadata": {"resourceVersion": "20"}, "items": self.pods})


def test_a_fetched_relist_applies_the_bodies_exactly_as_listed() -> None:
    missed = _pod("missed-pending", "16")
    missed["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": ""}]
    core = ListingCore([_node("n1", "5"), _node("missed-node", "15")], [missed])
    listing = reconcile.fetch(core)  # type: ignore[arg-type]
    assert all(isinstance(item, reconcile.Listed) for item in (*listing.nodes, *listing.pods))
    assert listing.pods[0].body() == missed  # type: ignore[union-attr]
    seen: list[Any] = []
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))

    def on_pod(event_type: str | None, body: Any) -> None:
        seen.append(body)
        w.on_pod(event_type, body)

    outcome = reconcile.apply(listing, cache=w.cache, on_pod=on_pod, on_node=w.on_node)
    assert (outcome.nodes_removed, outcome.pods_removed, outcome.applied) == (0, 0, 2)
    assert seen == [missed]
    assert sorted(n.name for n in w.cache.nodes()) == ["missed-node", "n1"]
    assert set(w.cache.pending) == {"uid-missed-pending"}


def test_a_relist_keeps_bodies_only_of_objects_newer_than_the_cache() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    w.on_pod("ADDED", _pod("same", "6", node="n1"))
    w.on_pod("ADDED", _pod("changed", "7"))
    changed = _pod("changed", "12")
    changed["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": ""}]
    core = ListingCore(
        [_node("n1", "5"), _node("new-node", "11")],
        [_pod("same", "6", node="n1"), changed, _pod("new", "13")],
    )
    listing = reconcile.fetch(core, w.cache)  # type: ignore[arg-type]
    kept = {
        item.meta["name"]: bool(item.encoded)  # type: ignore[union-attr]
        for item in (*listing.nodes, *listing.pods)
    }
    assert kept == {"n1": False, "new-node": True, "same": False, "changed": True, "new": True}
    outcome = reconcile.apply(listing, cache=w.cache, on_pod=w.on_pod, on_node=w.on_node)
    assert (outcome.nodes_removed, outcome.pods_removed, outcome.applied) == (0, 0, 3)
    assert sorted(n.name for n in w.cache.nodes()) == ["n1", "new-node"]
    assert set(w.cache.pending) == {"uid-changed", "uid-new"}
    assert w.cache.pending["uid-changed"].tolerations  # the listed body, applied


def test_a_relist_does_not_bring_back_what_the_cache_let_go_after_the_list() -> None:
    # Listed while Running; then the watch saw it finish (no tombstone: a terminal phase
    # frees its node) before the re-list was applied: the stale listed copy stays out.
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    w.on_pod("ADDED", _pod("job", "6", node="n1"))
    listing = reconcile.fetch(
        ListingCore([_node("n1", "5")], [_pod("job", "6", node="n1")]), w.cache
    )  # type: ignore[arg-type]
    finished = _pod("job", "9", node="n1")
    finished["status"]["phase"] = "Succeeded"
    w.on_pod("MODIFIED", finished)
    assert w.cache.snapshot(now=0.0).nodes["n1"].requested.milli_cpu == 0
    outcome = reconcile.apply(listing, cache=w.cache, on_pod=w.on_pod, on_node=w.on_node)
    assert outcome.applied == 0
    assert w.cache.snapshot(now=0.0).nodes["n1"].requested.milli_cpu == 0


def test_a_copy_at_a_version_the_cache_holds_is_not_applied_again() -> None:
    # kopf's listing after the operator's own LIST brings every unchanged object again:
    # neither it nor an older copy is parsed or applied; a newer or unversioned one is.
    w = _watches()
    w.on_node("ADDED", _node("n1", "5"))
    w.on_pod("ADDED", _pod("p", "6"))

    def tolerating(rv: str) -> dict[str, Any]:
        body = _pod("p", rv)
        body["spec"]["tolerations"] = [{"key": rv or "none", "operator": "Exists"}]
        return body

    def cordoned(rv: str) -> dict[str, Any]:
        body = _node("n1", rv)
        body["spec"] = {"unschedulable": True}
        return body

    w.on_pod(None, tolerating("6"))
    w.on_pod(None, tolerating("4"))
    w.on_node(None, cordoned("5"))
    w.on_node("MODIFIED", cordoned("3"))
    assert not w.cache.pending["uid-p"].tolerations
    assert not w.cache.snapshot(now=0.0).nodes["n1"].node.unschedulable
    w.on_pod("MODIFIED", tolerating("7"))
    w.on_node("MODIFIED", cordoned("8"))
    assert w.cache.pending["uid-p"].tolerations[0].key == "7"
    assert w.cache.snapshot(now=0.0).nodes["n1"].node.unschedulable
    w.on_pod("MODIFIED", tolerating(""))  # no version: never taken as already held
    assert w.cache.pending["uid-p"].tolerations[0].key == "none"


class CountingCore(FakeCore):
    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list_node(self, **kw: Any) -> _Raw:
        self.lists += 1
        return super().list_node(**kw)


def test_a_long_listing_is_reconciled_once_after_it_has_gone_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile, "SETTLE_S", 0.1)
    w = _watches()
    core = CountingCore()
    r = _reconciler(w, core)

    async def go() -> tuple[int, bool, int]:
        stop = asyncio.Event()
        task = asyncio.create_task(r.run(stop))
        for i in range(20):  # kopf lists for 0.6 s: an event every 30 ms
            w.on_node(None, _node(f"listed-{i}", str(10 + i)))
            await asyncio.sleep(0.03)
        during = core.lists
        await asyncio.wait_for(w.consistent.wait(), timeout=5)
        consistent = w.consistent.is_set()
        stop.set()
        task.cancel()
        return during, consistent, core.lists

    during, consistent, lists = asyncio.run(go())
    assert during == 0  # no LIST while the listing goes on
    assert consistent
    assert lists == 1


def test_at_start_scheduling_waits_for_kopfs_first_listing_or_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The operator clears `consistent` after its own LIST; kopf listing nothing (an
    # empty cluster) must not keep scheduling waiting for the whole re-list interval.
    monkeypatch.setattr(reconcile, "FIRST_LISTING_WAIT_S", 0.2)
    w = _watches()
    w.consistent.clear()
    core = CountingCore()
    r = _reconciler(w, core)

    async def go() -> tuple[bool, float, int]:
        stop = asyncio.Event()
        started = asyncio.get_running_loop().time()
        task = asyncio.create_task(r.run(stop))
        await asyncio.sleep(0.1)
        early = w.consistent.is_set()
        await asyncio.wait_for(w.consistent.wait(), timeout=5)
        waited = asyncio.get_running_loop().time() - started
        stop.set()
        task.cancel()
        return early, waited, core.lists

    early, waited, lists = asyncio.run(go())
    assert not early
    assert 0.2 <= waited < 5
    assert lists == 1
