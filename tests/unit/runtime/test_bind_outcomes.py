"""The scheduler's handling of Binding outcomes: never free capacity a Binding may hold,
never mark a bound pod failed, never bind while fenced."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import inspect
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import kubernetes.client
import pytest
from aiohttp import web

from metricsched import config as config_mod
from metricsched.core import model, parse
from metricsched.edges import events, kube_http, metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import scheduler as scheduler_mod

T = TypeVar("T")

# An answer: (status, body), or LOST: the request arrived, then the connection broke
# before any answer (a reset, a proxy restart): the client cannot know what happened.
LOST = "lost"
Answer = tuple[int, dict[str, Any]] | str
Answers = Callable[[], Answer | Awaitable[Answer]]


class FakeCore:
    """The API the bind path talks to, served by aiohttp on loopback (``serve``): the
    Binding, the pod read-back, Events and pod status; ``binding`` and ``pod`` decide
    answers, ``calls`` records what arrived."""

    def __init__(self) -> None:
        self.binding: Answers = lambda: (201, {"kind": "Status"})
        self.pod: Answers = lambda: (200, _pod_body(node=""))
        self.calls: list[str] = []
        self.target = ""  # the node of the last Binding sent

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        path = request.path
        if path.endswith("/binding"):
            answer = self.create_binding(body)
        elif request.method == "GET":
            self.calls.append("read pod")
            answer = self.pod()
        elif request.method == "PATCH" and path.endswith("/status"):
            reason = body["status"]["conditions"][0]["message"]
            self.calls.append(f"PodScheduled=False {reason}")
            answer = (200, {})
        else:
            assert request.method == "POST" and path.endswith("/events"), (request.method, path)
            self.calls.append(f"event {body['reason']}")
            answer = (201, {})
        if inspect.isawaitable(answer):
            answer = await answer
        if answer == LOST:
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)  # never reaches the client
        status, payload = answer
        return web.json_response(payload, status=status)

    def create_binding(self, body: dict[str, Any]) -> Answer | Awaitable[Answer]:
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
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        configuration = kubernetes.client.Configuration()
        configuration.host = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.http = kube_http.AsyncApi(kubernetes.client.ApiClient(configuration))
        self.cache = cache_mod.ClusterCache()
        self.queue = queue_mod.SchedulingQueue()
        metrics = observe.Metrics()
        self.scheduler = scheduler_mod.Scheduler(
            config=config_mod.from_args(parser.parse_args([]), {}),
            cache=self.cache,
            queue=self.queue,
            store=metric_store.MetricStore(),
            http=self.http,
            recorder=events.EventRecorder(self.http, component="metricsched"),
            metrics=metrics,
            gates=gates_mod.Gates.open(),
        )
        for name in ("node-a", "node-b"):
            self.cache.upsert_node(_node(name))
        self.pod = _pod()
        self.cache.upsert_pod(self.pod, ours=True)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.api.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.SockSite(runner, self._socket).start()
        try:
            yield
        finally:
            await self.http.close()
            await runner.cleanup()

    def run(self, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``body()`` on a loop with the fake API served."""

        async def go() -> T:
            async with self.serving():
                return await body()

        return asyncio.run(go())

    def schedule(self) -> model.Decision:
        async def go() -> model.Decision:
            decision = self.scheduler.attempt(self.pod, now=1.0)
            await self.scheduler.drain()
            return decision

        return self.run(go)

    def cpu(self, node: str) -> int:
        return self.cache.snapshot(now=1.0).nodes[model.NodeName(node)].requested.milli_cpu


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    monkeypatch.setattr(scheduler_mod, "_READ_BACK_S", (0.0, 0.0))
    return Rig()


def test_a_binding_whose_answer_was_lost_but_landed_counts_as_scheduled(rig: Rig) -> None:
    rig.api.binding = lambda: LOST
    rig.api.pod = lambda: (200, _pod_body(node=rig.api.target))
    decision = rig.schedule()
    node = str(decision.node)
    assert rig.api.calls == [f"bind {node}", "read pod", "event Scheduled"]
    assert rig.cpu(node) == 1000
    assert rig.cache.is_assumed("uid-web")
    assert "uid-web" not in rig.cache.pending
    assert "uid-web" not in rig.queue


def test_a_lost_answer_with_the_pod_still_unbound_holds_the_node_and_retries(rig: Rig) -> None:
    rig.api.binding = lambda: LOST
    decision = rig.schedule()
    node = str(decision.node)
    assert rig.api.calls == [f"bind {node}", "read pod"]  # no "Binding rejected", no status
    assert rig.cpu(node) == 1000  # held: the Binding may still land
    assert "uid-web" in rig.cache.pending
    assert "uid-web" in rig.queue


def test_a_read_back_that_fails_keeps_the_pod_assumed_until_it_succeeds(rig: Rig) -> None:
    rig.api.binding = lambda: LOST
    answers: list[Answer] = [LOST, LOST]

    def pod() -> Answer:
        if answers:
            return answers.pop(0)
        return (200, _pod_body(node="node-a"))

    rig.api.pod = pod
    rig.schedule()
    assert rig.api.calls.count("read pod") == 3
    assert rig.cache.is_assumed("uid-web")
    assert rig.cpu("node-a") == 1000


def test_a_409_naming_another_node_counts_the_pod_there(rig: Rig) -> None:
    rig.api.binding = lambda: (409, {"message": 'pod web is already assigned to node "node-b"'})
    rig.cache.upsert_node(dataclasses.replace(_node("node-b"), unschedulable=True))
    decision = rig.schedule()
    assert decision.node == "node-a"  # node-b is cordoned: we chose node-a
    assert (rig.cpu("node-a"), rig.cpu("node-b")) == (0, 1000)
    assert rig.api.calls == ["bind node-a"]  # no event, no PodScheduled=False
    assert "uid-web" not in rig.queue


def test_a_definite_rejection_frees_the_node_and_reports_it(rig: Rig) -> None:
    rig.api.binding = lambda: (400, {"message": "bad binding"})
    decision = rig.schedule()
    assert rig.cpu(str(decision.node)) == 0
    assert "event FailedScheduling" in rig.api.calls
    assert any(c.startswith("PodScheduled=False Binding rejected") for c in rig.api.calls)


def test_a_fenced_replica_sends_no_binding_and_frees_its_assumption(rig: Rig) -> None:
    rig.scheduler.gates.fence = lambda: 0.0
    decision = rig.schedule()
    assert rig.api.calls == []
    assert rig.cpu(str(decision.node)) == 0
    assert "uid-web" in rig.cache.pending


def test_losing_the_lease_cancels_binds_in_flight(rig: Rig) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow() -> Answer:
        started.set()
        await release.wait()
        return (201, {})

    async def go() -> int:
        rig.api.binding = slow
        rig.scheduler.gates.leading.set()
        rig.scheduler.attempt(rig.pod, now=1.0)
        await started.wait()
        cancelled = rig.scheduler.cancel_binds()
        release.set()
        await rig.scheduler.drain()
        return cancelled

    assert rig.run(go) == 1
    assert not rig.scheduler.gates.leading.is_set()
    assert "event Scheduled" not in rig.api.calls


def test_a_node_deleted_after_the_decision_gets_no_binding(rig: Rig) -> None:
    """Regression (issue 24, finding 12): the Binding went to the deleted node, which the
    API server accepts; PodGC then deleted the pod (a bare pod was lost)."""

    async def go() -> model.Decision:
        decision = rig.scheduler.attempt(rig.pod, now=1.0)
        assert decision.node is not None
        rig.cache.remove_node(decision.node)  # before the bind task got its turn
        await rig.scheduler.drain()
        return decision

    asyncio.run(go())
    assert rig.api.calls == []
    assert not rig.cache.is_assumed("uid-web")
    assert "uid-web" in rig.cache.pending
    assert "uid-web" in rig.queue  # decided again, among the nodes that are left
