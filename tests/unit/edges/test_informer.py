"""edges/informer.py: LIST in pages then WATCH from the LIST's version; bookmarks move the
version; a dropped watch resumes where it was; a 410 (or an ERROR event) lists again, and
every LIST reports all the keys it held so the sink can drop what vanished."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

from metricsched.edges import errors, informer, kube_http


def _node(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}}


class FakeApi:
    """What the informer asks of ``kube_http.AsyncApi``: LIST pages and watch streams,
    scripted. ``streams`` are the successive watches' events (a list of events, or an
    exception to raise after them)."""

    def __init__(self, objects: list[dict[str, Any]], version: int) -> None:
        self.objects = objects
        self.version = version
        self.streams: list[tuple[list[dict[str, Any]], BaseException | None]] = []
        self.lists: list[Mapping[str, str]] = []
        self.watches: list[Mapping[str, str]] = []

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str], **_: Any
    ) -> kube_http.Answer:
        self.lists.append(dict(params))
        start = int(params.get("continue") or 0)
        limit = int(params["limit"])
        page = self.objects[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.version)}
        if start + limit < len(self.objects):
            meta["continue"] = str(start + limit)
        return kube_http.Answer(200, orjson.dumps({"items": page, "metadata": meta}))

    async def lines(
        self, path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[bytes]:
        self.watches.append(dict(params))
        if not self.streams:
            await asyncio.sleep(3600)  # a quiet watch
        events, error = self.streams.pop(0)
        for event in events:
            yield orjson.dumps(event)
        if error is not None:
            raise error


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lists: list[tuple[set[str], str]] = []
        self.relists = 0
        self.failures: list[str] = []
        self.alive_lines = 0

    def event(self, kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        self.events.append((event_type, body["metadata"]["name"]))

    def listed(self, kind: str, keys: set[str], version: str, started: float) -> None:
        self.lists.append((keys, version))

    def relisting(self, kind: str) -> None:
        self.relists += 1

    def failing(self, kind: str, reason: str) -> None:
        self.failures.append(reason)

    def alive(self, kind: str) -> None:
        self.alive_lines += 1


def run(
    api: FakeApi, sink: Recorder, *, until: Any, page: int = 2, stall_relist: bool = False
) -> informer.Reflector:
    reflector = informer.Reflector(
        api,  # type: ignore[arg-type]
        informer.Resource("Node", "/api/v1/nodes", stall_relist=stall_relist),
        sink,
        page=page,
    )

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(reflector.run(stop))
        for _ in range(500):
            if until():
                break
            await asyncio.sleep(0.01)
        stop.set()
        task.cancel()

    asyncio.run(go())
    return reflector


def test_a_list_comes_in_pages_then_the_watch_starts_at_its_version_with_bookmarks() -> None:
    api = FakeApi([_node(f"n{i}", i) for i in range(5)], version=10)
    api.streams.append(
        (
            [
                {"type": "ADDED", "object": _node("n5", 11)},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
            ],
            None,  # the server ends the watch
        )
    )
    sink = Recorder()
    reflector = run(api, sink, until=lambda: len(api.watches) >= 2)
    assert [p.get("continue") for p in api.lists] == [None, "2", "4"]
    assert sink.events[:5] == [("LISTED", f"n{i}") for i in range(5)]
    assert sink.lists == [({f"n{i}" for i in range(5)}, "10")]
    assert sink.events[5] == ("ADDED", "n5")
    first, second = api.watches[:2]
    assert first["resourceVersion"] == "10" and first["allowWatchBookmarks"] == "true"
    assert second["resourceVersion"] == "15"  # resumed after the bookmark, no LIST
    assert len(sink.lists) == 1 and sink.relists == 0
    assert reflector.synced.is_set()


def test_a_dropped_watch_resumes_from_the_last_event_without_listing_again() -> None:
    api = FakeApi([_node("n1", 1)], version=10)
    api.streams.append(
        (
            [{"type": "MODIFIED", "object": _node("n1", 12)}],
            aiohttp.ClientPayloadError("connection reset"),
        )
    )
    sink = Recorder()
    run(api, sink, until=lambda: len(api.watches) >= 2)
    assert api.watches[1]["resourceVersion"] == "12"
    assert len(api.lists) == 1
    assert sink.failures and "connection reset" in sink.failures[0]


def test_a_watch_too_old_lists_again_and_reports_every_key_the_new_list_holds() -> None:
    api = FakeApi([_node("n1", 1), _node("n2", 2)], version=10)
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    api.streams.append(([gone], None))
    sink = Recorder()

    original = api.request

    async def shrink_then_list(*args: Any, **kwargs: Any) -> kube_http.Answer:
        if api.lists:  # the re-list: n2 was deleted while nobody watched
            api.objects, api.version = [_node("n1", 1)], 30
        return await original(*args, **kwargs)

    api.request = shrink_then_list  # type: ignore[method-assign]
    run(api, sink, until=lambda: len(sink.lists) >= 2)
    assert sink.relists == 1
    assert sink.lists == [({"n1", "n2"}, "10"), ({"n1"}, "30")]
    assert sink.failures == []


def test_a_410_answer_to_the_watch_request_lists_again() -> None:
    api = FakeApi([_node("n1", 1)], version=10)
    api.streams.append(([], errors.ApiError(410, "too old resource version")))
    sink = Recorder()
    run(api, sink, until=lambda: len(sink.lists) >= 2)
    assert sink.relists == 1 and len(api.lists) == 2


def test_pods_are_keyed_by_uid_and_namespaced_objects_by_namespace_and_name() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}}
    claim = {"metadata": {"name": "c", "namespace": "ns"}}
    assert informer.Resource("Pod", "/api/v1/pods").key(pod) == "u-1"
    assert informer.Resource("PersistentVolumeClaim", "/x").key(claim) == "ns/c"
    assert informer.Resource("Node", "/api/v1/nodes").key(_node("n", 1)) == "n"


def test_a_watch_silent_past_the_idle_bound_is_a_stall_and_the_kind_is_listed_again() -> None:
    api = FakeApi([_node("n1", 1)], version=10)
    api.streams.append(([], aiohttp.SocketTimeoutError("Timeout on reading data from socket")))
    sink = Recorder()
    reflector = run(api, sink, until=lambda: len(sink.lists) >= 2, stall_relist=True)
    assert reflector.stalls == 1
    assert sink.relists == 1 and len(sink.lists) == 2  # listed again, not resumed
    assert api.watches[0]["resourceVersion"] == "10"


def test_a_quiet_kinds_silent_watch_is_resumed_not_listed_again() -> None:
    # The API server bookmarks a watch only once its kind had an event since it started:
    # a StorageClass watch may say nothing for its whole life.
    api = FakeApi([_node("n1", 1)], version=10)
    api.streams.append(([], aiohttp.SocketTimeoutError("Timeout on reading data from socket")))
    sink = Recorder()
    reflector = run(api, sink, until=lambda: len(api.watches) >= 2)
    assert reflector.stalls == 0 and sink.relists == 0 and len(sink.lists) == 1
    assert [w["resourceVersion"] for w in api.watches[:2]] == ["10", "10"]
    assert not sink.failures


def test_the_watch_asks_for_an_idle_bound_not_the_server_timeout() -> None:
    seen: list[aiohttp.ClientTimeout] = []
    api = FakeApi([], version=10)
    lines = api.lines

    def recording(path: str, *, params: Mapping[str, str], timeout: aiohttp.ClientTimeout) -> Any:
        seen.append(timeout)
        return lines(path, params=params, timeout=timeout)

    api.lines = recording  # type: ignore[method-assign]
    run(api, Recorder(), until=lambda: bool(seen), stall_relist=True)
    assert seen[0].sock_read == informer.IDLE_TIMEOUT_S < 300
    # The total never ends a silent watch before its idle bound tells the stall.
    assert seen[0].total is not None
    assert seen[0].total > int(api.watches[0]["timeoutSeconds"]) + informer.IDLE_TIMEOUT_S


def test_a_bookmark_tells_the_sink_the_watch_is_alive() -> None:
    api = FakeApi([], version=10)
    api.streams.append(
        ([{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}], None)
    )
    sink = Recorder()
    run(api, sink, until=lambda: sink.alive_lines >= 1)
    assert sink.alive_lines >= 1 and not sink.events


# --- a watch's end proves its connection (the kinds whose silence holds decisions) -----


def test_a_judged_kind_asks_the_server_to_end_its_watch_within_the_liveness_bound() -> None:
    api = FakeApi([], version=10)
    run(api, Recorder(), until=lambda: bool(api.watches), stall_relist=True)
    low, high = informer.LIVENESS_WATCH_S
    assert low <= int(api.watches[0]["timeoutSeconds"]) <= high < informer.IDLE_TIMEOUT_S


def test_another_kind_keeps_the_long_watch() -> None:
    api = FakeApi([], version=10)
    run(api, Recorder(), until=lambda: bool(api.watches))
    low, high = informer.WATCH_TIMEOUT_S
    assert low <= int(api.watches[0]["timeoutSeconds"]) <= high


def test_a_watch_the_server_ends_with_no_line_tells_the_sink_it_is_alive() -> None:
    # A quiet kind: no event and no bookmark, only the end at the server's timeout.
    api = FakeApi([], version=10)
    api.streams.extend([([], None), ([], None)])
    sink = Recorder()
    reflector = run(api, sink, until=lambda: len(api.watches) >= 3, stall_relist=True)
    assert sink.alive_lines == 2 and reflector.stalls == 0 and sink.relists == 0
    assert [w["resourceVersion"] for w in api.watches[:3]] == ["10", "10", "10"]


def test_a_dropped_connection_is_not_taken_for_the_servers_end() -> None:
    api = FakeApi([], version=10)
    api.streams.append(([], aiohttp.ClientPayloadError("Response payload is not completed")))
    sink = Recorder()
    run(api, sink, until=lambda: len(api.watches) >= 2, stall_relist=True)
    assert sink.alive_lines == 0 and len(sink.failures) == 1


def test_any_error_from_the_sink_is_retried_and_reported_never_the_end_of_the_run() -> None:
    api = FakeApi([_node("n1", 1)], version=10)
    sink = Recorder()
    calls = {"n": 0}
    record = sink.event

    def event(kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("a bug in a handler")
        record(kind, event_type, body)

    sink.event = event  # type: ignore[method-assign]
    run(api, sink, until=lambda: bool(sink.lists))
    assert sink.failures and "KeyError" in sink.failures[0]
    assert sink.lists == [({"n1"}, "10")]
