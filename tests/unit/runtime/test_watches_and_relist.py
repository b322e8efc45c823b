"""Watches: kopf is restarted, never fatal; kopf's pending pods and the informers' state
meet in one cache; every LIST removes what vanished unwatched, of every kind."""

from __future__ import annotations

import argparse
import asyncio
import json
import types
from collections.abc import Callable
from typing import Any

import pytest

from metricsched import config as config_mod
from metricsched.core import model
from metricsched.edges import kube_http, observe, probes
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers, ingest, kopf_source, reconcile
from metricsched.runtime import policies as policies_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import status as status_mod


def _watches(
    cache: cache_mod.ClusterCache | None = None,
    *,
    recorded: list[tuple[Any, dict[str, Any]]] | None = None,
    leading: asyncio.Event | None = None,
    forget: tuple[policies_mod.Forget, ...] = (),
) -> ingest.Ingest:
    """Watches on a fresh cache (or ``cache``), the default configuration; Events posted
    are appended to ``recorded``; ``leading``: the leader's event (None: always leads);
    ``forget``: parties told when a policy is forgotten."""
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    cache = cache if cache is not None else cache_mod.ClusterCache()
    metrics = observe.Metrics()
    config = config_mod.from_args(parser.parse_args([]), {})
    record: Callable[..., None] = (
        (lambda *a, **kw: None)
        if recorded is None
        else (lambda ref, **kw: recorded.append((ref, kw)))
    )
    return ingest.Ingest(
        config=config,
        cache=cache,
        queue=queue_mod.SchedulingQueue(),
        policies=policies_mod.Policies(
            config=config,
            cache=cache,
            status=status_mod.PolicyStatus(
                api=None,  # type: ignore[arg-type]
                policies=lambda: cache.policies,
                nodes=cache.nodes,
                counters=lambda key: (0, 0),
                metrics=metrics,
                gates=gates_mod.Gates(),
                interval_s=15.0,
            ),
            signals=policies_mod.Signals(record=record, refresh_now=asyncio.Event()),
            forget=(metrics.forget_policy, *forget),
        ),
        metrics=metrics,
        record=record,
        gates=None if leading is None else gates_mod.Gates(leading=leading),
    )


def _kopf(w: ingest.Ingest, api_client: Any = None) -> kopf_source.KopfSource:
    """kopf, run into ``w``'s translation, with a /readyz of its own."""
    return kopf_source.KopfSource(
        config=w.config,
        api_client=api_client,
        sink=w,
        metrics=w.metrics,
        health=probes.HealthState(),
        record=lambda *a, **kw: None,
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
    k = _kopf(w)
    k.health.set_ready(True, "caches synced")
    runs: list[str] = []
    readiness: list[tuple[bool, str]] = []

    async def fake_operator(*, stop_flag: asyncio.Event, **_: Any) -> None:
        runs.append("run")
        if len(runs) == 1:
            raise RuntimeError("403 Forbidden: cannot watch nodes")
        readiness.append(k.health.readiness())
        w.on_node(None, _node("n1", "5"))  # the restarted watches deliver
        await asyncio.sleep(0.05)
        readiness.append(k.health.readiness())
        stop_flag.set()

    monkeypatch.setattr(kopf_source.kopf, "operator", fake_operator)
    monkeypatch.setattr(kopf_source, "_RESTART_BACKOFF", (0.01, 0.01))

    async def go() -> None:
        await asyncio.wait_for(k.run(asyncio.Event()), timeout=5)

    asyncio.run(go())
    assert runs == ["run", "run"]
    assert readiness[0][0] is False
    assert "403 Forbidden" in readiness[0][1]
    assert readiness[1] == (True, "watches delivering again")
    assert k.metrics.registry.get_sample_value("metricsched_watch_restarts_total") == 1


def test_kopf_logs_in_again_when_the_ca_file_changes_on_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """kopf builds its TLS context at login and logs in again only after a 401: with a
    rotated CA its watches would fail for good (issue 28, N11)."""
    ca = tmp_path / "ca.crt"
    ca.write_text("old CA")
    k = _kopf(
        _watches(),
        types.SimpleNamespace(
            configuration=types.SimpleNamespace(ssl_ca_cert=str(ca), cert_file=None, key_file=None)
        ),
    )
    runs: list[str] = []

    async def fake_operator(*, stop_flag: asyncio.Event, **_: Any) -> None:
        runs.append(ca.read_text())  # what the login reads
        if len(runs) == 1:
            ca.write_text("the new CA, longer")  # the kubelet swaps the projected file
        else:
            stop_flag.set()
        await stop_flag.wait()

    monkeypatch.setattr(kopf_source.kopf, "operator", fake_operator)
    monkeypatch.setattr(kopf_source, "TLS_CHECK_S", 0.01)
    monkeypatch.setattr(kopf_source, "_RESTART_BACKOFF", (30.0, 30.0))  # not waited for

    async def go() -> None:
        await asyncio.wait_for(k.run(asyncio.Event()), timeout=5)

    asyncio.run(go())
    assert runs == ["old CA", "the new CA, longer"]
    assert k.metrics.registry.get_sample_value("metricsched_watch_restarts_total") == 1


def test_kopf_listing_again_asks_for_a_reconciliation() -> None:
    w = _watches()
    w.on_pending_pod("ADDED", _pod("a", "5"))
    assert not w.relisted.is_set()
    w.on_pending_pod(None, _pod("a", "5"))
    assert w.relisted.is_set()


def test_kopf_watches_only_our_unassigned_pods() -> None:
    settings = kopf_source.kopf.OperatorSettings()
    kopf_source.configure_kopf(settings, frozenset({"metricsched"}))
    selector = settings.watching.field_selectors[("v1", "pods")]
    assert set(selector.split(",")) == {
        "spec.nodeName=",
        "spec.schedulerName=metricsched",
        "status.phase!=Succeeded",
        "status.phase!=Failed",
    }
    kopf_source.configure_kopf(settings, frozenset({"a", "b"}))  # "one of": filtered here
    assert "schedulerName" not in settings.watching.field_selectors[("v1", "pods")]


# --- the pod that leaves kopf's watch -----------------------------------------------------


def test_a_pod_leaving_the_pending_watch_leaves_the_pending_set_and_frees_nothing() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "2"))
    w.on_pending_pod("ADDED", _pod("a", "5"))
    pod = w.cache.pending["uid-a"]
    w.cache.assume(pod, model.NodeName("n1"), now=0.0)
    # kopf: DELETED at the bind's version, carrying the previous (unbound) object
    w.on_pending_pod("DELETED", _pod("a", "9"))
    assert w.cache.pending == {}
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000
    w.on_bound_pod("ADDED", _pod("a", "9", node="n1"))  # the informer: bound
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000
    w.on_bound_pod("DELETED", _pod("a", "12", node="n1"))  # deleted: now it frees
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 0


def test_a_late_pending_copy_does_not_undo_a_bind_the_informer_showed() -> None:
    w = _watches()
    w.on_node("ADDED", _node("n1", "2"))
    w.on_bound_pod("ADDED", _pod("a", "9", node="n1"))
    w.on_pending_pod("MODIFIED", _pod("a", "7"))  # kopf, behind
    assert w.cache.pending == {}
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000


# --- the informers' state: every kind reconciled after every LIST ------------------------


def _state(w: ingest.Ingest, kinds: tuple[str, ...]) -> informers.ClusterState:
    resources = tuple(r for r in informers.RESOURCES if r.kind in kinds)
    return informers.ClusterState(
        api=None,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
        resources=resources,
    )


def _attachment(name: str, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "3"},
        "spec": {
            "attacher": "csi.example",
            "nodeName": node,
            "source": {"persistentVolumeName": name},
        },
        "status": {"attached": True},
    }


def test_scheduling_waits_until_every_kind_is_listed_and_during_a_relist() -> None:
    w = _watches()
    state = _state(w, ("Node", "Pod"))
    assert not state.consistent.is_set()
    state.listed("Node", set(), "5", 0.0)
    assert not state.consistent.is_set()
    state.listed("Pod", set(), "5", 0.0)
    assert state.consistent.is_set()
    assert not w.relisted.is_set()
    state.relisting("Pod")
    assert not state.consistent.is_set()
    assert w.relisted.is_set()  # kopf's kinds are reconciled after an informer's gap too
    state.listed("Pod", set(), "9", 1.0)
    assert state.consistent.is_set()


def test_a_volume_attachment_deleted_while_unwatched_frees_its_slot_after_the_relist() -> None:
    w = _watches()
    state = _state(w, ("VolumeAttachment",))
    state.event("VolumeAttachment", "LISTED", _attachment("va-1", "n1"))
    state.event("VolumeAttachment", "LISTED", _attachment("va-2", "n1"))
    state.listed("VolumeAttachment", {"va-1", "va-2"}, "5", 0.0)
    assert len(w.cache.snapshot().volume_attachments["n1"]) == 2
    state.relisting("VolumeAttachment")
    state.event("VolumeAttachment", "LISTED", _attachment("va-1", "n1"))
    state.listed("VolumeAttachment", {"va-1"}, "9", 1.0)
    assert [a.name for a in w.cache.snapshot().volume_attachments["n1"]] == ["va-1"]
    assert (
        w.metrics.registry.get_sample_value(
            "metricsched_reconcile_removed_total", {"kind": "volumeattachment"}
        )
        == 1
    )


def test_a_bound_pod_deleted_while_unwatched_frees_its_node_after_the_relist() -> None:
    w = _watches()
    state = _state(w, ("Node", "Pod"))
    state.event("Node", "LISTED", _node("n1", "2"))
    state.listed("Node", {"n1"}, "5", 0.0)
    state.event("Pod", "LISTED", _pod("a", "3", node="n1"))
    state.listed("Pod", {"uid-a"}, "5", 0.0)
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 1000
    state.relisting("Pod")
    state.listed("Pod", set(), "9", 1.0)
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 0


def test_a_kind_that_keeps_failing_makes_readyz_false_until_it_delivers() -> None:
    w = _watches()
    state = _state(w, ("Node",))
    state.health.set_ready(True, "caches synced")
    state.failing("Node", "403 Forbidden: cannot list nodes")
    ready, reason = state.health.readiness()
    assert not ready and "403 Forbidden" in reason
    state.event("Node", "ADDED", _node("n1", "2"))
    assert state.health.readiness() == (True, "watches delivering again")


# --- kopf's kinds after kopf re-lists: pending pods and policies -------------------------


class ListingApi:
    """``AsyncApi.request`` for one-page LISTs of pods and policies."""

    def __init__(self, pods: list[dict[str, Any]], policies: list[dict[str, Any]]) -> None:
        self.pods, self.policies = pods, policies

    async def request(self, method: str, path: str, **_: Any) -> kube_http.Answer:
        items = self.policies if "schedulingpolicies" in path else self.pods
        body = {"items": items, "metadata": {"resourceVersion": "20"}}
        return kube_http.Answer(200, json.dumps(body).encode())


def _policy(name: str, rv: str) -> dict[str, Any]:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name, "namespace": "ns", "uid": f"p-{name}", "resourceVersion": rv},
        "spec": {
            "metrics": [
                {
                    "name": "cpu",
                    "prometheus": {"query": "node_cpu", "nodeLabel": "node"},
                    "goal": "Minimize",
                }
            ]
        },
    }


def test_a_policy_deleted_while_kopf_did_not_watch_stops_governing_after_the_reconcile() -> None:
    w = _watches()
    w.on_policy("ADDED", _policy("gone", "5"))
    w.on_policy("ADDED", _policy("kept", "6"))
    w.on_policy("ADDED", _policy("newer", "30"))  # created after the LIST
    w.on_pending_pod("ADDED", _pod("deleted", "7"))
    w.on_pending_pod("ADDED", _pod("waiting", "8"))
    api = ListingApi(pods=[_pod("waiting", "8")], policies=[_policy("kept", "6")])
    r = reconcile.Reconciler(api=api, watches=w, metrics=w.metrics, interval_s=60)  # type: ignore[arg-type]
    assert asyncio.run(r.once()) == (1, 1)
    assert sorted(w.cache.policies) == ["ns/kept", "ns/newer"]
    assert "ns/gone" not in w.policies.status.records
    assert sorted(w.cache.pending) == ["uid-waiting"]
