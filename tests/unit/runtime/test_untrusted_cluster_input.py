"""Every byte from the cluster is untrusted input (issue 28, N1): the informer reads every
bound pod of the cluster, written by any user, so one object that cannot be read is a
counted, logged skip of that object, never the end of the reflector that reads its kind;
a restarted informer run never doubles its watches; a state that cannot sync says so on
/readyz; readiness is per subsystem."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson
import pytest

from metricsched.core import decision_record, model, parse
from metricsched.edges import errors, informer, kube_http, observe, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers
from tests.unit.runtime import test_watches_and_relist as relist

POISON = "[" * 3000  # a decision annotation 3,000 arrays deep: json.loads recurses out


def _bound_pod(name: str, rv: int, *, node: str = "n1", annotation: str = "") -> dict[str, Any]:
    body = relist._pod(name, str(rv), node=node)
    body["spec"]["schedulerName"] = "default-scheduler"
    body["metadata"]["namespace"] = "someone-else"
    if annotation:
        body["metadata"]["annotations"] = {decision_record.ANNOTATION: annotation}
    return body


class ClusterApi:
    """LIST answers per path, then quiet watches (or scripted watch errors): what the
    informers ask of ``kube_http.AsyncApi``."""

    def __init__(self, objects: Mapping[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.list_errors: dict[str, BaseException] = {}
        self.open_watches: dict[str, int] = {}
        self.most_open: dict[str, int] = {}

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str], **_: Any
    ) -> kube_http.Answer:
        if path in self.list_errors:
            raise self.list_errors[path]
        items = self.objects.get(path, [])
        return kube_http.Answer(
            200, orjson.dumps({"items": items, "metadata": {"resourceVersion": "100"}})
        )

    async def lines(
        self, path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[bytes]:
        self.open_watches[path] = self.open_watches.get(path, 0) + 1
        self.most_open[path] = max(self.most_open.get(path, 0), self.open_watches[path])
        try:
            await asyncio.sleep(3600)  # a quiet watch
            yield b""
        finally:
            self.open_watches[path] -= 1


def _state(api: ClusterApi, **options: Any) -> tuple[informers.ClusterState, Any]:
    w = relist._watches()
    state = informers.ClusterState(
        api=api,  # type: ignore[arg-type]
        sink=w,
        gates=gates_mod.Gates(),
        metrics=w.metrics,
        health=probes.HealthState(),
        resources=tuple(r for r in informers.RESOURCES if r.kind in ("Node", "Pod")),
        **options,
    )
    return state, w


def _skipped(metrics: observe.Metrics, kind: str) -> float:
    return metrics.objects_skipped.labels(kind=kind)._value.get()  # type: ignore[attr-defined,no-any-return]


# --- the annotation itself -----------------------------------------------------------


def test_a_deeply_nested_decision_annotation_names_no_policy() -> None:
    assert decision_record.policy_of(POISON) == ""
    assert decision_record.policy_of('{"a":' * 2000) == ""


def test_explain_reads_a_deeply_nested_decision_annotation_as_not_ours() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        decision_record.decode("[" * 2000)


def test_an_annotation_longer_than_any_record_names_no_policy_without_being_decoded() -> None:
    text = json.dumps({"v": 1, "policy": "ns/p", "pad": "x" * decision_record.MAX_READ_CHARS})
    assert decision_record.policy_of(text) == ""


def test_a_bound_pod_with_a_poison_annotation_parses_as_placed_by_no_policy() -> None:
    pod = parse.pod_from_body(_bound_pod("p", 1, annotation=POISON))
    assert pod.placed_by == "" and pod.requests.milli_cpu == 1000


def test_any_other_error_reading_a_body_is_a_parse_error_of_that_object() -> None:
    body = _bound_pod("p", 1)
    body["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": ["1"]}}}]
    with pytest.raises(parse.ParseError):
        parse.pod_from_body(body)
    node = relist._node("n1", "1")
    node["status"]["allocatable"] = {"cpu": {"nested": True}}
    with pytest.raises(parse.ParseError):
        parse.node_from_body(node)


# --- the informer goes on ------------------------------------------------------------


def test_one_poison_pod_of_another_scheduler_does_not_stop_the_cluster_state_syncing() -> None:
    api = ClusterApi(
        {
            "/api/v1/nodes": [relist._node("n1", "1")],
            "/api/v1/pods": [
                _bound_pod("before", 2),
                _bound_pod("poison", 3, annotation=POISON),
                _bound_pod("after", 4),
            ],
        }
    )
    state, w = _state(api)

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        await asyncio.wait_for(state.consistent.wait(), timeout=10)
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    # The poison pod reads (as placed by no policy): its cpu counts on its node with the rest.
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 3000
    assert state.health.readiness()[0] is False  # only because the operator never said ready
    assert "starting" in state.health.readiness()[1]


def test_an_object_whose_handling_raises_is_skipped_and_counted_and_the_list_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = ClusterApi(
        {
            "/api/v1/nodes": [relist._node("n1", "1")],
            "/api/v1/pods": [_bound_pod("a", 2), _bound_pod("bad", 3), _bound_pod("c", 4)],
        }
    )
    state, w = _state(api)
    handle = w.on_bound_pod

    def on_bound_pod(event_type: str | None, body: Mapping[str, Any]) -> None:
        if body["metadata"]["name"] == "bad":
            raise RecursionError("maximum recursion depth exceeded")  # a reader's bug
        handle(event_type, body)

    state._handlers["Pod"] = on_bound_pod

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        await asyncio.wait_for(state.consistent.wait(), timeout=10)
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert w.cache.snapshot().nodes[model.NodeName("n1")].requested.milli_cpu == 2000
    assert _skipped(w.metrics, "Pod") == 1


def test_a_restarted_informer_run_never_runs_beside_the_one_it_replaces() -> None:
    api = ClusterApi({"/api/v1/nodes": [relist._node("n1", "1")], "/api/v1/pods": []})
    state, _ = _state(api)

    async def go() -> None:
        stop = asyncio.Event()
        for _ in range(3):  # the supervisor restarting the informers' task
            task = asyncio.create_task(state.run(stop))
            await asyncio.wait_for(state.consistent.wait(), timeout=10)
            await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert api.open_watches == {"/api/v1/nodes": 0, "/api/v1/pods": 0}
        stop.set()

    asyncio.run(go())
    assert api.most_open == {"/api/v1/nodes": 1, "/api/v1/pods": 1}


def test_a_reflector_refuses_a_second_concurrent_run() -> None:
    api = ClusterApi({"/api/v1/nodes": []})
    reflector = informer.Reflector(
        api,  # type: ignore[arg-type]
        informer.Resource("Node", "/api/v1/nodes"),
        informers._OneShot(lambda _t, _b: None),
    )

    async def go() -> None:
        stop = asyncio.Event()
        first = asyncio.create_task(reflector.run(stop))
        await asyncio.sleep(0.05)
        with pytest.raises(RuntimeError, match="already running"):
            await reflector.run(stop)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)

    asyncio.run(go())


# --- a sync that cannot complete says so ----------------------------------------------


def test_a_kind_that_cannot_list_past_the_bound_makes_readyz_false_naming_it() -> None:
    api = ClusterApi({"/api/v1/nodes": [relist._node("n1", "1")]})
    api.list_errors["/api/v1/pods"] = errors.ApiError(403, "pods is forbidden")
    state, _ = _state(api, sync_bound_s=0.2)
    state.health.set_ready(True, "caches synced")

    async def go() -> tuple[bool, str]:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        for _ in range(400):
            await asyncio.sleep(0.01)
            ready, reason = state.health.readiness()
            if "not synced" in reason:
                break
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return ready, reason

    ready, reason = asyncio.run(go())
    assert not ready
    assert "cluster state not synced" in reason and "Pod (" in reason and "forbidden" in reason
    assert not state.consistent.is_set()


def test_the_sync_reason_clears_once_the_state_is_whole() -> None:
    api = ClusterApi({"/api/v1/nodes": [relist._node("n1", "1")], "/api/v1/pods": []})
    api.list_errors["/api/v1/pods"] = errors.ApiError(500, "etcd unavailable")
    state, _ = _state(api, sync_bound_s=0.2)
    state.health.set_ready(True, "caches synced")

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        for _ in range(400):
            await asyncio.sleep(0.01)
            if "not synced" in state.health.readiness()[1]:
                break
        assert "not synced" in state.health.readiness()[1]
        del api.list_errors["/api/v1/pods"]  # the API answers again
        await asyncio.wait_for(state.consistent.wait(), timeout=10)
        for _ in range(400):
            await asyncio.sleep(0.01)
            if state.health.readiness()[0]:
                break
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert state.health.readiness()[0] is True


# --- readiness per subsystem ------------------------------------------------------------


def test_one_subsystem_recovering_does_not_hide_another_still_failing() -> None:
    health = probes.HealthState()
    health.set_ready(True, "caches synced")
    health.set_ready(False, "Pod watch failing: 500", subsystem="Pod")
    health.set_ready(False, "StorageClass watch failing: reset", subsystem="StorageClass")
    health.set_ready(True, "watches delivering again", subsystem="Pod")
    ready, reason = health.readiness()
    assert not ready and reason == "StorageClass watch failing: reset"
    health.set_ready(True, "watches delivering again", subsystem="StorageClass")
    assert health.readiness() == (True, "watches delivering again")


def test_a_bookmark_on_a_quiet_kind_clears_its_failure() -> None:
    state, _ = _state(ClusterApi({}))
    state.health.set_ready(True, "caches synced")
    state.failing("Node", "ClientConnectionError: connection reset")
    assert not state.health.readiness()[0]
    state.alive("Node")  # the resumed watch delivered a bookmark, no event
    assert state.health.readiness()[0]


# --- a silent watch holds decisions (issue 28, N3) -------------------------------------------


def test_a_watch_silent_past_a_bookmark_interval_holds_decisions_until_it_delivers() -> None:
    now = [1000.0]
    state, _ = _state(ClusterApi({}), clock=lambda: now[0])
    state.listed("Node", set(), "1", 0.0)
    state.listed("Pod", set(), "1", 0.0)
    assert state.consistent.is_set()
    now[0] += 30.0
    state.alive("Node")  # a bookmark
    now[0] += 30.0  # Pod: 60 s silent, Node: 30 s
    state.check_silence()
    assert state.consistent.is_set()
    now[0] += informers.SUSPECT_S - 59  # Pod: 66 s without an event or a bookmark
    state.check_silence()
    assert not state.consistent.is_set()  # kopf's pod watch may hand out pods: not decided
    state.alive("Node")
    assert not state.consistent.is_set()  # another kind delivering does not clear it
    state.alive("Pod")  # the Pod watch was only quiet: its bookmark came
    assert state.consistent.is_set()


class EndingApi(ClusterApi):
    """Watches that deliver no line and end at the server's timeout, the clock moved by
    that timeout first; the silence check runs just before each end, its worst moment."""

    def __init__(self, objects: Mapping[str, list[dict[str, Any]]], clock: list[float]) -> None:
        super().__init__(objects)
        self.clock = clock
        self.state: informers.ClusterState | None = None
        self.held: list[bool] = []
        self.ends = 0

    async def lines(
        self, path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[bytes]:
        if path != "/api/v1/nodes" or self.ends >= 8:
            async for line in super().lines(path, params=params, timeout=timeout):
                yield line
            return
        assert self.state is not None
        if not self.ends:
            await self.state.consistent.wait()  # both kinds listed
        self.clock[0] += int(params["timeoutSeconds"])
        self.state.check_silence()
        self.held.append(not self.state.consistent.is_set())
        self.ends += 1


def test_a_quiet_node_watch_the_server_ends_in_time_never_holds_decisions() -> None:
    # No node changes: the Node watch gets no event and no bookmark for minutes, only
    # its end. The Pod watch is kept talking (``alive``), so Node's silence is judged alone.
    now = [1000.0]
    api = EndingApi({"/api/v1/nodes": [relist._node("n1", "1")], "/api/v1/pods": []}, now)
    state, _ = _state(api, clock=lambda: now[0])
    api.state = state
    original = state.check_silence

    def check() -> None:
        state.alive("Pod")
        original()

    state.check_silence = check  # type: ignore[method-assign]

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(state.run(stop))
        for _ in range(500):
            if api.ends >= 8:
                break
            await asyncio.sleep(0.01)
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert api.ends == 8 and now[0] - 1000.0 >= 8 * informer.LIVENESS_WATCH_S[0]
    assert api.held == [False] * 8  # minutes of quiet, never a pause


def test_a_silent_kind_listed_again_clears_the_hold() -> None:
    now = [1000.0]
    state, _ = _state(ClusterApi({}), clock=lambda: now[0])
    state.listed("Node", set(), "1", 0.0)
    state.listed("Pod", set(), "1", 0.0)
    now[0] += 100.0
    state.check_silence()
    assert not state.consistent.is_set()
    state.relisting("Node")  # the informer's watchdog (90 s): both kinds listed again
    state.relisting("Pod")
    state.listed("Node", set(), "2", now[0])
    assert not state.consistent.is_set()  # Pod still being listed
    state.listed("Pod", set(), "2", now[0])
    assert state.consistent.is_set()
