"""The scheduler's handling of Binding outcomes: never free capacity a Binding may hold,
never mark a bound pod failed, never bind while fenced."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import kubernetes.client.exceptions
import kubernetes.client.rest
import pytest
import urllib3.exceptions

from metricsched import config as config_mod
from metricsched.core import model, parse
from metricsched.edges import events, metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import scheduler as scheduler_mod


class _Raw:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


def _lost() -> Exception:
    return urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError())


class FakeCore:
    """What the bind path uses of a CoreV1Api: ``read_namespaced_pod``, and its
    ``api_client`` (this object) for writes; ``binding`` and ``pod`` decide answers."""

    def __init__(self) -> None:
        self.binding: Callable[[], _Raw] = lambda: _Raw(201, {"kind": "Status"})
        self.pod: Callable[[], _Raw] = lambda: _Raw(200, _pod_body(node=""))
        self.calls: list[str] = []
        self.target = ""  # the node of the last Binding sent
        self.api_client = self

    def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> _Raw:
        self.calls.append("read pod")
        return self.pod()

    # the two ApiClient methods kube.write calls

    def param_serialize(self, *, method: str, resource_path: str, **_: Any) -> tuple[Any, ...]:
        return method, resource_path, {}, None, None

    def call_api(
        self, method: str, url: str, headers: Any, body: Any, **_: Any
    ) -> kubernetes.client.rest.RESTResponse:
        return kubernetes.client.rest.RESTResponse(self.answer(method, url, body))

    def answer(self, method: str, url: str, body: Any) -> _Raw:
        if url.endswith("/binding"):
            return self.create_binding(body)
        if method == "PATCH" and url.endswith("/status"):
            reason = body["status"]["conditions"][0]["message"]
            self.calls.append(f"PodScheduled=False {reason}")
            return _Raw(200, {})
        assert method == "POST" and url.endswith("/events"), (method, url)
        self.calls.append(f"event {body['reason']}")
        return _Raw(201, {})

    def create_binding(self, body: dict[str, Any]) -> _Raw:
        self.target = body["target"]["name"]
        self.calls.append(f"bind {self.target}")
        return self.binding()


def _pod_body(*, node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"},
        "spec": {"nodeName": node, "schedulerName": "metricsched"},
    }


def _node(name: str) -> model.NodeInfo:
    return parse.node_from_body(
        {
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
    )


def _pod() -> model.PodInfo:
    return parse.pod_from_body(
        {
            **_pod_body(node=""),
            "spec": {
                "schedulerName": "metricsched",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
    )


class Rig:
    def __init__(self) -> None:
        parser = argparse.ArgumentParser()
        config_mod.add_run_arguments(parser)
        self.api = FakeCore()
        self.cache = cache_mod.ClusterCache()
        self.queue = queue_mod.SchedulingQueue()
        metrics = observe.Metrics()
        self.scheduler = scheduler_mod.Scheduler(
            config=config_mod.from_args(parser.parse_args([]), {}),
            cache=self.cache,
            queue=self.queue,
            store=metric_store.MetricStore(),
            api=self.api,
            recorder=events.EventRecorder(self.api, component="metricsched"),  # type: ignore[arg-type]
            metrics=metrics,
        )
        for name in ("node-a", "node-b"):
            self.cache.upsert_node(_node(name))
        self.pod = _pod()
        self.cache.upsert_pod(self.pod, ours=True)

    def schedule(self) -> model.Decision:
        async def go() -> model.Decision:
            decision = self.scheduler.attempt(self.pod, now=1.0)
            await self.scheduler.drain()
            return decision

        return asyncio.run(go())

    def cpu(self, node: str) -> int:
        return self.cache.snapshot(now=1.0).nodes[model.NodeName(node)].requested.milli_cpu


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    monkeypatch.setattr(scheduler_mod, "_READ_BACK_S", (0.0, 0.0))
    return Rig()


def _raise(e: Exception) -> Callable[[], _Raw]:
    def answer() -> _Raw:
        raise e

    return answer


def test_a_binding_whose_answer_was_lost_but_landed_counts_as_scheduled(rig: Rig) -> None:
    rig.api.binding = _raise(_lost())
    rig.api.pod = lambda: _Raw(200, _pod_body(node=rig.api.target))
    decision = rig.schedule()
    node = str(decision.node)
    assert rig.api.calls == [f"bind {node}", "read pod", "event Scheduled"]
    assert rig.cpu(node) == 1000
    assert rig.cache.is_assumed("uid-web")
    assert "uid-web" not in rig.cache.pending
    assert "uid-web" not in rig.queue


def test_a_lost_answer_with_the_pod_still_unbound_holds_the_node_and_retries(rig: Rig) -> None:
    rig.api.binding = _raise(_lost())
    decision = rig.schedule()
    node = str(decision.node)
    assert rig.api.calls == [f"bind {node}", "read pod"]  # no "Binding rejected", no status
    assert rig.cpu(node) == 1000  # held: the Binding may still land
    assert "uid-web" in rig.cache.pending
    assert "uid-web" in rig.queue


def test_a_read_back_that_fails_keeps_the_pod_assumed_until_it_succeeds(rig: Rig) -> None:
    rig.api.binding = _raise(_lost())
    answers = [_raise(OSError("down")), _raise(OSError("down"))]

    def pod() -> _Raw:
        if answers:
            return answers.pop(0)()
        return _Raw(200, _pod_body(node="node-a"))

    rig.api.pod = pod
    rig.schedule()
    assert rig.api.calls.count("read pod") == 3
    assert rig.cache.is_assumed("uid-web")
    assert rig.cpu("node-a") == 1000


def test_a_409_naming_another_node_counts_the_pod_there(rig: Rig) -> None:
    def answer() -> _Raw:
        e = kubernetes.client.exceptions.ApiException(status=409, reason="Conflict")
        e.body = json.dumps({"message": 'pod web is already assigned to node "node-b"'})
        raise e

    rig.api.binding = answer
    rig.cache.upsert_node(dataclasses.replace(_node("node-b"), unschedulable=True))
    decision = rig.schedule()
    assert decision.node == "node-a"  # node-b is cordoned: we chose node-a
    assert (rig.cpu("node-a"), rig.cpu("node-b")) == (0, 1000)
    assert rig.api.calls == ["bind node-a"]  # no event, no PodScheduled=False
    assert "uid-web" not in rig.queue


def test_a_definite_rejection_frees_the_node_and_reports_it(rig: Rig) -> None:
    def answer() -> _Raw:
        e = kubernetes.client.exceptions.ApiException(status=400, reason="BadRequest")
        e.body = json.dumps({"message": "bad binding"})
        raise e

    rig.api.binding = answer
    decision = rig.schedule()
    assert rig.cpu(str(decision.node)) == 0
    assert "event FailedScheduling" in rig.api.calls
    assert any(c.startswith("PodScheduled=False Binding rejected") for c in rig.api.calls)


def test_a_fenced_replica_sends_no_binding_and_frees_its_assumption(rig: Rig) -> None:
    rig.scheduler.fence = lambda: 0.0
    decision = rig.schedule()
    assert rig.api.calls == []
    assert rig.cpu(str(decision.node)) == 0
    assert "uid-web" in rig.cache.pending


def test_losing_the_lease_cancels_binds_in_flight(rig: Rig) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def go() -> int:
        loop = asyncio.get_running_loop()

        def slow() -> _Raw:
            loop.call_soon_threadsafe(started.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
            return _Raw(201, {})

        rig.api.binding = slow
        rig.scheduler.active.set()
        rig.scheduler.attempt(rig.pod, now=1.0)
        await started.wait()
        cancelled = rig.scheduler.cancel_binds()
        release.set()
        await rig.scheduler.drain()
        return cancelled

    assert asyncio.run(go()) == 1
    assert not rig.scheduler.active.is_set()
    assert "event Scheduled" not in rig.api.calls
