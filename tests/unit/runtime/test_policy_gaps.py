"""After a gap in the policy watch no pod is placed under a policy the API no longer has
(issue 28: 3 of 18 pods were placed under a policy deleted in a 20-s gap, ≈10 s after
the heal), and the reconciler's LIST never brings back a policy deleted or changed while
it was in flight (N13)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from metricsched.core import model
from metricsched.edges import kube_http, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers, ingest, kopf_source, reconcile
from metricsched.runtime import scheduler as scheduler_mod

from . import test_bind_outcomes as bind_rig
from . import test_watches_and_relist as relist

_watches = relist._watches


def _policy(
    name: str, rv: str, *, namespace: str = "shop", uid: str = "", priority: int = 0
) -> dict[str, Any]:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"p-{name}",
            "resourceVersion": rv,
        },
        "spec": {
            "priority": priority,
            "metrics": [
                {
                    "name": "cpu",
                    "prometheus": {"query": "node_cpu", "nodeLabel": "node"},
                    "goal": "Minimize",
                }
            ],
        },
    }


class PolicyListApi:
    """``AsyncApi.request`` for one-page LISTs of policies (and of pending pods: none).
    ``during`` runs while the policy LIST is in flight; ``fail`` answers it with 503s."""

    def __init__(self, policies: list[dict[str, Any]], *, version: str = "20") -> None:
        self.policies = policies
        self.version = version
        self.during: Callable[[], None] = lambda: None
        self.fail = 0
        self.lists = 0

    async def request(self, method: str, path: str, **_: Any) -> kube_http.Answer:
        if "schedulingpolicies" not in path:
            body = {"items": [], "metadata": {"resourceVersion": self.version}}
            return kube_http.Answer(200, json.dumps(body).encode())
        self.lists += 1
        if self.fail:
            self.fail -= 1
            return kube_http.Answer(503, b'{"kind":"Status","message":"unavailable"}')
        items = list(self.policies)  # the API's answer is taken now ...
        self.during()  # ... and what happens before it arrives, kopf delivers first
        body: dict[str, Any] = {"items": items, "metadata": {"resourceVersion": self.version}}
        return kube_http.Answer(200, json.dumps(body).encode())


def _reconciler(
    w: ingest.Ingest,
    api: PolicyListApi,
    *,
    health: probes.HealthState | None = None,
    **kwargs: Any,
) -> reconcile.Reconciler:
    return reconcile.Reconciler(
        api=api,  # type: ignore[arg-type]
        watches=w,
        metrics=w.metrics,
        interval_s=3600,
        health=health if health is not None else probes.HealthState(),
        **kwargs,
    )


async def _until(check: Callable[[], bool], *, timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


# --- what opens a gap, and what closes it -------------------------------------------------


class TestAGapHoldsDecisionsUntilAPolicyListSentAfterItConfirmsThem:
    def test_kopf_listing_the_policies_again_holds_decisions_until_the_list(self) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("gone", "5"))
        assert w.policies.confirmed.is_set()
        w.on_policy(None, _policy("kept", "6"))  # kopf listed again (after a 410)
        assert not w.policies.confirmed.is_set()
        assert w.relisted.is_set()
        api = PolicyListApi([_policy("kept", "6")])
        assert asyncio.run(_reconciler(w, api).once()) == (0, 1)
        assert w.policies.confirmed.is_set()
        assert sorted(w.cache.policies) == ["shop/kept"]

    def test_kopf_listing_pending_pods_again_is_a_gap_for_the_policies_too(self) -> None:
        # With no policy left to list, kopf's policy listing sends nothing at all.
        w = _watches()
        w.on_policy("ADDED", _policy("gone", "5"))
        w.on_pending_pod(None, bind_rig._pod_body(node=""))
        assert not w.policies.confirmed.is_set()

    def test_an_informer_relisting_is_a_gap(self) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("gone", "5"))
        state = informers.ClusterState(
            api=None,  # type: ignore[arg-type]
            sink=w,
            gates=gates_mod.Gates(),
            metrics=w.metrics,
            health=probes.HealthState(),
            resources=tuple(r for r in informers.RESOURCES if r.kind == "Node"),
        )
        state.relisting("Node")
        assert not w.policies.confirmed.is_set()

    def test_kopf_failing_is_a_gap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("gone", "5"))
        confirmed: list[bool] = []

        async def fake_operator(*, stop_flag: asyncio.Event, **_: Any) -> None:
            if confirmed:
                stop_flag.set()
                return
            confirmed.append(w.policies.confirmed.is_set())
            raise RuntimeError("connection reset")

        monkeypatch.setattr(kopf_source.kopf, "operator", fake_operator)
        monkeypatch.setattr(kopf_source, "_RESTART_BACKOFF", (0.01, 0.01))
        asyncio.run(asyncio.wait_for(relist._kopf(w).run(asyncio.Event()), timeout=5))
        assert confirmed == [True]
        assert not w.policies.confirmed.is_set()

    def test_a_gap_that_begins_while_the_list_is_in_flight_is_not_confirmed_by_it(
        self,
    ) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("kept", "6"))
        w.on_policy(None, _policy("kept", "6"))
        api = PolicyListApi([_policy("kept", "6")])
        api.during = lambda: w.on_policy(None, _policy("kept", "6"))  # kopf lists again
        r = _reconciler(w, api)
        asyncio.run(r.once())
        assert not w.policies.confirmed.is_set()
        api.during = lambda: None
        asyncio.run(r.once())
        assert w.policies.confirmed.is_set()

    def test_with_no_policy_cached_a_gap_holds_nothing(self) -> None:
        w = _watches()
        w.on_pending_pod(None, bind_rig._pod_body(node=""))
        assert w.policies.confirmed.is_set()
        assert w.relisted.is_set()  # reconciled all the same


class TestTheWaitIsBoundedAndSaid:
    def test_a_failed_list_is_retried_soon_while_decisions_wait(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(reconcile, "RETRY_S", (0.01, 0.02))
        monkeypatch.setattr(reconcile, "SETTLE_S", 0.01)
        w = _watches()
        w.on_policy("ADDED", _policy("gone", "5"))
        w.on_policy(None, _policy("kept", "6"))
        api = PolicyListApi([_policy("kept", "6")])
        api.fail = 3  # the API answers again only after three tries

        async def go() -> None:
            task = asyncio.create_task(_reconciler(w, api).run(asyncio.Event()))
            await asyncio.wait_for(w.policies.confirmed.wait(), 5)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        asyncio.run(go())
        assert api.lists == 4
        assert sorted(w.cache.policies) == ["shop/kept"]

    def test_unconfirmed_past_the_bound_makes_readyz_false_until_a_list_confirms(self) -> None:
        w = _watches()
        now = [1000.0]
        w.policies.clock = lambda: now[0]
        health = probes.HealthState()
        health.set_ready(True, "caches synced")
        w.on_policy("ADDED", _policy("gone", "5"))
        w.on_policy(None, _policy("kept", "6"))
        api = PolicyListApi([_policy("kept", "6")])
        api.fail = 10**6  # the LIST cannot complete
        readiness: list[tuple[bool, str]] = []

        async def go() -> None:
            stop = asyncio.Event()
            r = _reconciler(w, api, health=health, confirm_bound_s=0.2)
            watchdog = asyncio.create_task(r._watch_confirmed(stop))
            now[0] += 0.1  # within the bound: nothing said yet
            await asyncio.sleep(0.15)
            readiness.append(health.readiness())
            now[0] += 60.0
            await _until(lambda: not health.readiness()[0])
            readiness.append(health.readiness())
            api.fail = 0
            await r.once()
            await _until(lambda: health.readiness()[0])
            readiness.append(health.readiness())
            stop.set()
            await asyncio.wait_for(watchdog, 5)

        asyncio.run(go())
        assert readiness[0] == (True, "caches synced")
        assert readiness[1][0] is False
        assert "policies not confirmed for 60s" in readiness[1][1]
        assert "kopf listed again" in readiness[1][1]
        assert readiness[2] == (True, "policies confirmed")


# --- the scheduler and the rebalancer wait for it -----------------------------------------


class TestNoPodIsPlacedUnderAPolicyDeletedInTheGap:
    def test_a_pod_arriving_after_the_gap_goes_by_the_policies_the_list_confirmed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(scheduler_mod, "_READ_BACK_S", (0.0, 0.0))
        rig = bind_rig.Rig()
        w = _watches(rig.cache)
        rig.scheduler.gates.policies_confirmed = w.policies.confirmed
        w.on_policy("ADDED", _policy("gone", "5"))  # governs every pod of "shop"
        w.on_policy(None, _policy("other", "6", namespace="elsewhere"))  # kopf lists again
        api = PolicyListApi([_policy("other", "6", namespace="elsewhere")])
        decided: list[model.Decision] = []
        real = rig.scheduler.attempt

        def attempt(pod: model.PodInfo, *, now: float) -> model.Decision:
            decision = real(pod, now=now)
            decided.append(decision)
            stop.set()
            return decision

        async def go() -> None:
            rig.scheduler.attempt = attempt  # type: ignore[method-assign]
            rig.scheduler.gates.leading.set()
            rig.queue.add(rig.pod.uid)
            task = asyncio.create_task(rig.scheduler.run(stop))
            await asyncio.sleep(0.2)
            assert decided == []  # leading, consistent, a pod ready: still waiting
            await _reconciler(w, api).once()
            await asyncio.wait_for(task, 5)
            await rig.scheduler.drain()

        stop = asyncio.Event()
        rig.run(go)
        assert [d.policy for d in decided] == [None]  # the default policy, not shop/gone
        assert decided[0].outcome is model.Outcome.BIND


# --- the reconciler's LIST against what kopf delivered meanwhile (N13) --------------------


def _listed_during(
    w: ingest.Ingest, listed: list[dict[str, Any]], during: Callable[[], None]
) -> None:
    api = PolicyListApi(listed)
    api.during = during
    asyncio.run(_reconciler(w, api).once())


class TestAListedCopyNeverUndoesWhatKopfDeliveredMeanwhile:
    def test_a_policy_deleted_while_the_list_was_in_flight_does_not_come_back(self) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("web", "10"))
        _listed_during(
            w, [_policy("web", "10")], lambda: w.on_policy("DELETED", _policy("web", "25"))
        )
        assert w.cache.policies == {}
        assert "shop/web" not in w.policies.status.records

    def test_a_policy_edited_while_the_list_was_in_flight_keeps_its_new_spec(self) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("web", "10"))
        _listed_during(
            w,
            [_policy("web", "10")],
            lambda: w.on_policy("MODIFIED", _policy("web", "25", priority=7)),
        )
        assert w.cache.policies[model.PolicyKey("shop/web")].priority == 7

    def test_with_opaque_versions_a_deletion_seen_after_the_list_was_sent_is_final(
        self,
    ) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("web", "a"))
        deleted = _policy("web", "b")
        del deleted["metadata"]["uid"]
        _listed_during(w, [_policy("web", "a")], lambda: w.on_policy("DELETED", deleted))
        assert w.cache.policies == {}

    def test_a_policy_created_again_under_its_name_is_not_held_back_by_the_deletion(
        self,
    ) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("web", "10", uid="first"))
        w.on_policy("DELETED", _policy("web", "25", uid="first"))
        w.on_policy("ADDED", _policy("web", "30", uid="second"))
        assert list(w.cache.policies) == ["shop/web"]
        assert w.policies.status.records[model.PolicyKey("shop/web")].uid == "second"

    def test_a_policy_dropped_as_a_ghost_does_not_come_back_with_an_older_copy(self) -> None:
        w = _watches()
        w.on_policy("ADDED", _policy("web", "10"))
        _listed_during(w, [], lambda: None)  # deleted while nobody watched
        assert w.cache.policies == {}
        w.on_policy("MODIFIED", _policy("web", "15"))  # kopf, late, from before the LIST
        assert w.cache.policies == {}
