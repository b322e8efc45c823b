"""Events look like kube-scheduler's, merge when repeated, and cannot flood the API."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import socket
from typing import Any

import edges_fakes as fakes
import pytest

from metricsched.edges import events, kube_http, observe

POD = events.ObjectRef.pod(namespace="shop", name="web-7d4", uid="uid-123")
FAILED = "0/3 nodes are available: 3 Insufficient cpu."
Recorded = events.Recorded


def recorder(
    api: kube_http.AsyncApi, clock: fakes.FakeClock, **overrides: object
) -> events.EventRecorder:
    settings: dict[str, object] = {
        "component": "metricsched",
        "instance": "metricsched-7f9c-host1",
        "clock": clock,
        "timeout_s": 2.0,
        **overrides,
    }
    return events.EventRecorder(api, **settings)  # type: ignore[arg-type]


def fail(
    run: fakes.Runner,
    rec: events.EventRecorder,
    obj: events.ObjectRef = POD,
    message: str = FAILED,
) -> Recorded:
    return run(rec.record(obj, event_type="Warning", reason="FailedScheduling", message=message))


def pod(i: int) -> events.ObjectRef:
    return events.ObjectRef.pod(namespace="shop", name=f"web-{i}", uid=f"uid-{i}")


def test_an_event_names_the_pod_by_uid_and_comes_from_the_scheduler(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock)
    outcome = run(
        rec.record(
            POD,
            event_type="Normal",
            reason="Scheduled",
            message="Successfully assigned shop/web-7d4 to node-3",
            action="Binding",
        )
    )
    assert outcome is Recorded.CREATED
    (request,) = fake_kube.requests
    assert (request.method, request.path) == ("POST", "/api/v1/namespaces/shop/events")
    body = request.json()
    assert body["metadata"]["namespace"] == "shop"
    assert body["metadata"]["name"].startswith("web-7d4.")
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "web-7d4",
        "namespace": "shop",
        "uid": "uid-123",
    }
    assert body["source"] == {"component": "metricsched"}
    assert body["reportingComponent"] == "metricsched"
    assert body["reportingInstance"] == "metricsched-7f9c-host1"
    assert (body["type"], body["reason"], body["action"]) == ("Normal", "Scheduled", "Binding")
    assert body["message"] == "Successfully assigned shop/web-7d4 to node-3"
    assert body["count"] == 1
    first, last = (
        datetime.datetime.fromisoformat(body[k]) for k in ("firstTimestamp", "lastTimestamp")
    )
    assert first == last == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert "eventTime" not in body  # classic core/v1 event: no MicroTime pitfalls


def test_pods_are_recorded_by_their_uid_and_the_instance_defaults_to_name_and_host(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = events.EventRecorder(writes_api, component="metricsched", clock=clock)
    pod_info = dataclasses.replace(fakes.pod_info("web-7d4"), uid="uid-777")

    async def go() -> None:
        rec.post_pod(pod=pod_info, event_type="Warning", reason="FailedScheduling", message=FAILED)
        await rec.drain()

    run(go())
    body = fake_kube.requests[0].json()
    assert body["involvedObject"]["uid"] == "uid-777"
    assert body["reportingInstance"] == f"metricsched-{socket.gethostname()}"[:128]


def test_a_long_message_is_cut_to_1024_bytes_with_an_ellipsis_suffix(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    fail(run, recorder(writes_api, clock), message="é" * 1000)  # 2000 bytes of UTF-8
    message = fake_kube.requests[0].json()["message"]
    assert message.endswith("é ...")
    assert len(message.encode()) <= 1024


def test_identical_events_merge_into_one_event_whose_count_is_patched_later(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=10.0)
    assert fail(run, rec) is Recorded.CREATED
    for _ in range(4):
        clock.advance(1.0)
        assert fail(run, rec) is Recorded.DEFERRED
    assert len(fake_kube.requests) == 1
    assert run(rec.flush()) == 0  # the coalescing interval has not passed yet
    clock.advance(10.0)
    assert run(rec.flush()) == 1
    created, patch = fake_kube.requests
    assert patch.method == "PATCH"
    assert patch.path == f"/api/v1/namespaces/shop/events/{created.json()['metadata']['name']}"
    assert patch.headers["content-type"] == "application/strategic-merge-patch+json"
    assert patch.json() == {"count": 5, "lastTimestamp": "2026-01-01T00:00:04Z"}
    assert rec.stats().pending == 0


def test_a_repeat_after_the_interval_patches_at_once(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=10.0)
    fail(run, rec)
    clock.advance(11.0)
    assert fail(run, rec) is Recorded.MERGED
    assert [r.method for r in fake_kube.requests] == ["POST", "PATCH"]
    assert fake_kube.requests[1].json()["count"] == 2


def test_different_messages_or_objects_are_separate_events(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock)
    fail(run, rec)
    fail(run, rec, message="0/3 nodes are available: 3 Insufficient memory.")
    fail(run, rec, obj=pod(2))
    posts = fake_kube.received("POST")
    assert len(posts) == 3
    assert len({p.json()["metadata"]["name"] for p in posts}) == 3


def test_a_repeat_after_the_merge_window_starts_a_new_event(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, merge_window_s=600.0)
    fail(run, rec)
    clock.advance(601.0)
    assert fail(run, rec) is Recorded.CREATED
    assert [r.method for r in fake_kube.requests] == ["POST", "POST"]


def test_a_burst_beyond_the_budget_is_dropped_and_counted_without_blocking(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    metrics = observe.Metrics()
    rec = recorder(writes_api, clock, rate_per_s=2.0, burst=5, metrics=metrics)
    outcomes = [fail(run, rec, obj=pod(i)) for i in range(50)]
    assert outcomes.count(Recorded.CREATED) == 5
    assert outcomes.count(Recorded.DROPPED) == 45
    assert len(fake_kube.requests) == 5
    assert rec.dropped == 45
    registry = metrics.registry
    assert registry.get_sample_value("metricsched_events_dropped_total") == 45
    assert registry.get_sample_value("metricsched_api_writes_total", {"kind": "event"}) == 5
    clock.advance(1.0)  # two tokens back
    assert [fail(run, rec, obj=pod(100 + i)) for i in range(3)] == [
        Recorded.CREATED,
        Recorded.CREATED,
        Recorded.DROPPED,
    ]


def test_one_namespaces_flood_does_not_drop_another_namespaces_events(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, rate_per_s=2.0, burst=10)

    def flooded(i: int) -> events.ObjectRef:
        return events.ObjectRef.pod(namespace="flood", name=f"job-{i}", uid=f"uid-flood-{i}")

    def quiet(i: int) -> events.ObjectRef:
        return events.ObjectRef.pod(namespace="shop", name=f"web-{i}", uid=f"uid-shop-{i}")

    assert fail(run, rec, obj=quiet(0)) is Recorded.CREATED  # both namespaces are active
    quiet_outcomes = []
    for second in range(30):
        for i in range(20):  # 20 FailedScheduling a second against a budget of 2
            fail(run, rec, obj=flooded(second * 20 + i))
        quiet_outcomes.append(fail(run, rec, obj=quiet(1 + second)))
        clock.advance(1.0)
    assert quiet_outcomes == [Recorded.CREATED] * 30
    created = sum(
        1 for r in fake_kube.requests if r.method == "POST" and "/namespaces/flood/" in r.path
    )
    assert created > 0  # the flood gets what is left, not nothing


def test_a_namespace_alone_has_the_whole_budget(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, rate_per_s=2.0, burst=10)
    outcomes = []
    for second in range(30):
        outcomes.extend(fail(run, rec, obj=pod(second * 20 + i)) for i in range(20))
        clock.advance(1.0)
    assert outcomes.count(Recorded.CREATED) == 10 + 29 * 2


def test_merges_over_the_budget_wait_instead_of_being_lost(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, rate_per_s=1.0, burst=1, patch_interval_s=0.0)
    fail(run, rec)
    assert fail(run, rec) is Recorded.DEFERRED  # no token left for the PATCH
    assert fail(run, rec) is Recorded.DEFERRED
    clock.advance(1.0)
    assert run(rec.flush()) == 1
    assert fake_kube.requests[-1].json()["count"] == 3


def test_api_errors_are_counted_and_logged_never_raised(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_kube.responder = lambda r: (500, fakes.status_body(500, "InternalError", "etcd down"))
    rec = recorder(writes_api, clock)
    assert fail(run, rec) is Recorded.FAILED
    assert fail(run, rec) is Recorded.FAILED  # not merged into an event that does not exist
    assert rec.stats().failed == 2
    assert "etcd down" in caplog.text
    assert all(r.levelname == "WARNING" for r in caplog.records)


def test_a_repeat_of_an_expired_event_posts_a_new_event(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=0.0)
    fail(run, rec)
    fake_kube.responder = lambda r: (
        (404, fakes.status_body(404, "NotFound", "events not found"))
        if r.method == "PATCH"
        else fakes.kube_default(r)
    )
    clock.advance(1.0)
    assert fail(run, rec) is Recorded.CREATED
    assert rec.stats().failed == 0  # an expired event is not an error
    assert [r.method for r in fake_kube.requests] == ["POST", "PATCH", "POST"]
    assert fake_kube.requests[-1].json()["count"] == 1


def test_concurrent_repeats_create_one_event_and_count_every_occurrence(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=3600.0)

    async def repeats() -> None:
        for _ in range(25):
            await rec.record(POD, event_type="Warning", reason="FailedScheduling", message=FAILED)

    async def go() -> None:
        await asyncio.gather(*(repeats() for _ in range(8)))
        await rec.aclose()  # the final flush writes what was merged

    run(go())
    assert len(fake_kube.received("POST")) == 1
    assert fake_kube.requests[-1].json()["count"] == 200
    assert rec.stats().pending == 0


def test_the_background_flusher_writes_pending_merges(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=5.0)
    fail(run, rec)
    fail(run, rec)

    async def go() -> None:
        rec.start(interval_s=0.01)
        clock.advance(5.0)
        for _ in range(200):
            if len(fake_kube.requests) == 2:
                break
            await asyncio.sleep(0.01)
        await rec.aclose()

    run(go())
    assert len(fake_kube.requests) == 2
    assert fake_kube.requests[1].json()["count"] == 2


# --- posting without waiting (the scheduler's way) ---------------------------------------


def test_a_post_over_the_budget_builds_no_event_and_makes_no_task(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec = recorder(writes_api, clock, rate_per_s=2.0, burst=5)
    built: list[str] = []
    create = events.EventRecorder._create

    async def spy(self: events.EventRecorder, entry: Any, what: Any) -> bool:
        built.append(what.obj.name)
        return await create(self, entry, what)

    monkeypatch.setattr(events.EventRecorder, "_create", spy)

    async def go() -> tuple[list[Recorded], int]:
        before = len(asyncio.all_tasks())
        outcomes = [
            rec.post(pod(i), event_type="Warning", reason="FailedScheduling", message=FAILED)
            for i in range(50)
        ]
        made = len(asyncio.all_tasks()) - before
        await rec.drain()
        return outcomes, made

    outcomes, made = run(go())
    assert outcomes == [Recorded.SENDING] * 5 + [Recorded.DROPPED] * 45
    assert made == 5
    assert built == [f"web-{i}" for i in range(5)]
    assert len(fake_kube.received("POST")) == 5
    assert rec.stats().created == 5


def test_a_merged_post_makes_no_task_until_its_patch_is_due(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock, patch_interval_s=10.0)

    async def go() -> list[Recorded]:
        outcomes = [rec.post(POD, event_type="Warning", reason="FailedScheduling", message=FAILED)]
        await rec.drain()
        clock.advance(1.0)
        outcomes.append(
            rec.post(POD, event_type="Warning", reason="FailedScheduling", message=FAILED)
        )
        clock.advance(10.0)
        outcomes.append(
            rec.post(POD, event_type="Warning", reason="FailedScheduling", message=FAILED)
        )
        await rec.drain()
        return outcomes

    assert run(go()) == [Recorded.SENDING, Recorded.DEFERRED, Recorded.SENDING]
    assert [r.method for r in fake_kube.requests] == ["POST", "PATCH"]
    assert fake_kube.requests[1].json()["count"] == 3


def test_a_post_from_a_worker_thread_is_written_on_the_loop(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    clock: fakes.FakeClock,
) -> None:
    rec = recorder(writes_api, clock)

    async def go() -> Recorded:
        rec.start()
        outcome = await asyncio.to_thread(
            rec.post, POD, event_type="Warning", reason="FailedScheduling", message=FAILED
        )
        for _ in range(200):
            if rec.stats().created:
                break
            await asyncio.sleep(0.01)
        await rec.aclose()
        return outcome

    assert run(go()) is Recorded.SENDING
    (request,) = fake_kube.requests
    assert request.json()["reason"] == "FailedScheduling"
