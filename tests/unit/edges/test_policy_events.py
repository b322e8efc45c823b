"""Policy events have a budget of their own and are re-sent while their condition lasts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import edges_fakes as fakes
import pytest

from metricsched.edges import events as events_mod
from metricsched.edges import kube_http, observe, policy_events

WEB = events_mod.ObjectRef.policy(namespace="shop", name="web", uid="uid-web")
API = events_mod.ObjectRef.policy(namespace="shop", name="api", uid="uid-api")
FAILED = "metric latency: Unreachable: Prometheus at http://prom:9090 unreachable"


@pytest.fixture
def events(writes_api: kube_http.AsyncApi, clock: fakes.FakeClock) -> policy_events.PolicyEvents:
    return policy_events.PolicyEvents(
        writes_api,
        component="metricsched",
        rate_per_s=0.01,
        burst=3,
        resend_interval_s=300.0,
        retry_s=10.0,
        clock=clock,
        wall_clock=clock,
    )


def posts(server: fakes.FakeServer) -> list[tuple[str, str, int]]:
    """(method, reason, count) of every event write, in order."""
    return [
        (r.method, r.json().get("reason", ""), int(r.json().get("count") or 0))
        for r in server.received(path_part="/events")
    ]


def warn(events: policy_events.PolicyEvents, ref: events_mod.ObjectRef = WEB, **kw: str) -> None:
    events.warn(
        ref,
        topic=kw.get("topic", "metric/latency"),
        reason=kw.get("reason", "MetricQueryFailed"),
        message=kw.get("message", FAILED),
        action="QueryMetrics",
    )


class TestResending:
    def test_a_new_warning_is_posted_at_once_and_not_again_within_the_interval(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        warn(events)
        assert run(events.pump()) == 1
        for _ in range(10):  # every refresh confirms it
            clock.advance(15)
            warn(events)
            run(events.pump())
        assert posts(fake_kube) == [("POST", "MetricQueryFailed", 1)]

    def test_a_lasting_warning_is_re_sent_every_interval_as_a_growing_count(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        warn(events)
        run(events.pump())
        for _ in range(2):
            clock.advance(301)
            warn(events)
            run(events.pump())
        assert [(m, c) for m, _, c in posts(fake_kube)] == [("POST", 1), ("PATCH", 2), ("PATCH", 3)]

    def test_a_resolved_warning_is_not_re_sent_and_one_recovery_is_posted(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        warn(events)
        run(events.pump())
        assert events.resolve(
            WEB, topic="metric/latency", reason="MetricsRecovered", message="latency back"
        )
        clock.advance(1000)
        run(events.pump())
        run(events.pump())
        assert [r for _, r, _ in posts(fake_kube)] == ["MetricQueryFailed", "MetricsRecovered"]
        assert events.active("shop/web") == {}

    def test_resolving_what_never_failed_posts_nothing(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
    ) -> None:
        assert not events.resolve(WEB, topic="metric/latency", reason="MetricsRecovered")
        run(events.pump())
        assert posts(fake_kube) == []

    def test_a_new_reason_for_a_topic_is_posted_at_once(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        warn(events)
        run(events.pump())
        clock.advance(15)
        warn(events, reason="ResultTooLarge", message="too large")
        run(events.pump())
        assert [r for _, r, _ in posts(fake_kube)] == ["MetricQueryFailed", "ResultTooLarge"]


class TestOwnBudget:
    def test_a_warning_dropped_by_the_budget_is_posted_once_there_is_room(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        for i in range(4):  # one more than the burst of 3
            warn(events, topic=f"metric/m{i}", message=f"metric m{i} failed")
        assert run(events.pump()) == 3
        clock.advance(100)  # 0.01/s refills one token
        assert run(events.pump()) == 1
        assert len(posts(fake_kube)) == 4

    def test_a_burst_of_pod_events_does_not_spend_the_policy_budget(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        writes_api: kube_http.AsyncApi,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        pods = events_mod.EventRecorder(writes_api, component="metricsched", burst=5, clock=clock)
        for i in range(20):
            pod = events_mod.ObjectRef.pod(namespace="shop", name=f"p{i}", uid=f"u{i}")
            run(pods.record(pod, event_type="Warning", reason="FailedScheduling", message="x"))
        assert pods.dropped == 15
        warn(events)
        assert run(events.pump()) == 1


class TestDeletedPolicies:
    def test_a_forgotten_policy_gets_no_more_events(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        warn(events)
        warn(events, API)
        run(events.pump())
        assert events.forget("shop/web") == 1
        clock.advance(301)
        run(events.pump())
        # A PATCH goes to the Event, which is named "<object>.<suffix>".
        patched = [r.path.rsplit("/", 1)[1].split(".")[0] for r in fake_kube.received("PATCH")]
        assert patched == ["api"]
        assert events.active("shop/web") == {}
        assert events.active("shop/api") == {"metric/latency": "MetricQueryFailed"}

    def test_replaced_metrics_drop_their_warnings_but_not_the_others(
        self, events: policy_events.PolicyEvents
    ) -> None:
        warn(events)
        warn(events, topic="fallback", reason="FallbackActive")
        assert events.forget("shop/web", topic_prefix="metric/") == 1
        assert events.active("shop/web") == {"fallback": "FallbackActive"}

    def test_a_deleted_policy_loses_its_series_in_metrics(self) -> None:
        metrics = observe.Metrics()
        metrics.observe_refresh(policy="shop/web", metric="latency", seconds=0.1)
        metrics.observe_refresh(policy="shop/web", metric="cpu", seconds=0.1)
        metrics.observe_refresh(policy="shop/api", metric="latency", seconds=0.1)
        assert metrics.forget_policy("shop/web") == 2
        text = metrics.exposition().decode()
        assert 'policy="shop/web"' not in text
        assert 'policy="shop/api"' in text

    def test_a_metric_removed_from_a_spec_loses_its_series(self) -> None:
        metrics = observe.Metrics()
        metrics.observe_refresh(policy="shop/web", metric="latency", seconds=0.1)
        metrics.observe_refresh(policy="shop/web", metric="cpu", seconds=0.1)
        assert metrics.retain_policy_metrics([("shop/web", "cpu")]) == 1
        text = metrics.exposition().decode()
        assert 'metric="latency"' not in text
        assert 'metric="cpu"' in text


def test_the_posting_task_posts_a_new_warning_without_waiting_for_its_interval(
    writes_api: kube_http.AsyncApi, fake_kube: fakes.FakeServer, run: fakes.Runner
) -> None:
    events = policy_events.PolicyEvents(writes_api, component="metricsched")

    async def go() -> None:
        events.start(interval_s=3600.0)
        try:
            await asyncio.sleep(0.05)  # the first pump: nothing due yet
            warn(events)
            await _until(lambda: len(posts(fake_kube)) == 1)
            # A warning from a worker thread (the start-up sync) wakes the task too.
            await asyncio.to_thread(warn, events, API)
            await _until(lambda: len(posts(fake_kube)) == 2)
        finally:
            await events.aclose()

    run(go())
    assert [r for _, r, _ in posts(fake_kube)] == ["MetricQueryFailed", "MetricQueryFailed"]


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)


class TestFairAcrossNamespaces:
    """Regression (issue 24, finding 9): the budget went to due posts in the order they
    were first warned, so one namespace's thousand failing policies kept another
    namespace's only warning unposted."""

    def test_each_namespace_gets_a_post_before_any_gets_a_second(
        self,
        events: policy_events.PolicyEvents,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        for i in range(40):
            ref = events_mod.ObjectRef.policy(namespace="team-a", name=f"p{i}", uid=f"a{i}")
            warn(events, ref)
        warn(events, events_mod.ObjectRef.policy(namespace="team-b", name="only", uid="b"))
        warn(events, events_mod.ObjectRef.policy(namespace="team-c", name="only", uid="c"))
        assert run(events.pump()) == 3  # the burst
        namespaces = [r.path.split("/")[4] for r in fake_kube.received("POST")]
        assert sorted(namespaces) == ["team-a", "team-b", "team-c"]

    def test_a_namespace_served_last_waits_for_the_others(
        self,
        writes_api: kube_http.AsyncApi,
        run: fakes.Runner,
        fake_kube: fakes.FakeServer,
        clock: fakes.FakeClock,
    ) -> None:
        events = policy_events.PolicyEvents(
            writes_api,
            component="metricsched",
            rate_per_s=0.01,
            burst=3,
            resend_interval_s=3600.0,  # no re-send within the test
            clock=clock,
            wall_clock=clock,
        )
        for ns in ("team-a", "team-b"):
            for i in range(5):
                warn(
                    events, events_mod.ObjectRef.policy(namespace=ns, name=f"p{i}", uid=f"{ns}{i}")
                )
        run(events.pump())  # the burst of 3: a, b, a
        for _ in range(4):
            clock.advance(100)  # one token each
            assert run(events.pump()) == 1
        namespaces = [r.path.split("/")[4] for r in fake_kube.received("POST")]
        assert namespaces == ["team-a", "team-b", "team-a", "team-b", "team-a", "team-b", "team-a"]
