"""Unauthenticated load on the ports costs bounded work: a bounded pool of handler
threads per port, and bounded TokenReviews for unknown tokens (issue 24, finding 10)."""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import socket
import time
import urllib.error
import urllib.request

import edges_fakes as fakes
import pytest

from metricsched.edges import metrics_auth, observe

READER = metrics_auth.User(name="system:serviceaccount:monitoring:prometheus")


class CountingReviews:
    """Only the token "reader" is accepted, and may get /metrics; reviews are counted."""

    def __init__(self) -> None:
        self.token_reviews: list[str] = []

    def token_review(self, token: str) -> metrics_auth.User | None:
        self.token_reviews.append(token)
        return READER if token == "reader" else None

    def access_review(self, user: metrics_auth.User, path: str, verb: str) -> tuple[bool, str]:
        return True, ""


@pytest.fixture
def reviews() -> CountingReviews:
    return CountingReviews()


@pytest.fixture
def guard(reviews: CountingReviews, clock: fakes.FakeClock) -> metrics_auth.ReviewGuard:
    return metrics_auth.ReviewGuard(reviews, clock=clock)


def junk(n: int) -> list[str]:
    return [f"Bearer junk-{i}" for i in range(n)]


class TestUnknownTokensCostBoundedReviews:
    def test_a_flood_of_junk_tokens_costs_at_most_the_burst_of_reviews(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews
    ) -> None:
        denials = [guard(header, "/metrics") for header in junk(2_000)]
        assert len(reviews.token_reviews) == metrics_auth.UNKNOWN_REVIEWS_BURST
        statuses = collections.Counter(d.status for d in denials if d is not None)
        assert statuses == {
            401: metrics_auth.UNKNOWN_REVIEWS_BURST,
            429: 2_000 - metrics_auth.UNKNOWN_REVIEWS_BURST,
        }

    def test_the_budget_refills_with_time(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews, clock: fakes.FakeClock
    ) -> None:
        for header in junk(100):
            guard(header, "/metrics")
        clock.advance(5.0 / metrics_auth.UNKNOWN_REVIEWS_PER_S)
        for header in junk(200)[100:]:
            guard(header, "/metrics")
        assert len(reviews.token_reviews) == metrics_auth.UNKNOWN_REVIEWS_BURST + 5

    def test_a_rejected_token_is_not_reviewed_again_until_its_denial_expires(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews, clock: fakes.FakeClock
    ) -> None:
        for _ in range(50):
            denial = guard("Bearer junk-1", "/metrics")
            assert denial is not None and denial.status == 401
        assert reviews.token_reviews == ["junk-1"]
        clock.advance(metrics_auth.DENY_TTL_S + 1)
        guard("Bearer junk-1", "/metrics")
        assert reviews.token_reviews == ["junk-1", "junk-1"]

    def test_an_oversized_token_is_refused_without_a_review(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews
    ) -> None:
        denial = guard("Bearer " + "x" * (metrics_auth.MAX_TOKEN_CHARS + 1), "/metrics")
        assert denial is not None and denial.status == 401
        assert reviews.token_reviews == []

    def test_no_cache_keeps_a_token(self, guard: metrics_auth.ReviewGuard) -> None:
        guard("Bearer junk-secret", "/metrics")
        guard("Bearer reader", "/metrics")
        for cache in (guard._users, guard._rejected, guard._known):
            assert [k for k in cache._items if "secret" in str(k) or "reader" in str(k)] == []


class TestTheRealScraperIsNotPushedOutByJunk:
    def test_its_accepted_token_stays_cached_through_a_flood(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews, clock: fakes.FakeClock
    ) -> None:
        assert guard("Bearer reader", "/metrics") is None
        for step, header in enumerate(junk(2_000)):
            guard(header, "/metrics")
            if step % 100 == 0:
                clock.advance(1.0)  # the budget refills: junk keeps being reviewed
        assert guard("Bearer reader", "/metrics") is None
        assert reviews.token_reviews.count("reader") == 1

    def test_once_its_review_expires_it_is_reviewed_even_with_the_budget_spent(
        self, guard: metrics_auth.ReviewGuard, reviews: CountingReviews, clock: fakes.FakeClock
    ) -> None:
        assert guard("Bearer reader", "/metrics") is None
        clock.advance(metrics_auth.AUTHN_TTL_S + 1)
        for header in junk(500):
            guard(header, "/metrics")
        assert guard("Bearer reader", "/metrics") is None
        assert reviews.token_reviews.count("reader") == 2


# --- the HTTP servers ------------------------------------------------------------------


@pytest.fixture
def small_pool(
    monkeypatch: pytest.MonkeyPatch, metrics: observe.Metrics, clock: fakes.FakeClock
) -> collections.abc.Iterator[observe.Closer]:
    monkeypatch.setattr(observe._Server, "max_threads", 2)
    monkeypatch.setattr(observe._Server, "max_waiting", 2)
    health = observe.HealthState(max_heartbeat_age_s=30.0, clock=clock)
    closer = observe.serve(
        host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
    )
    yield closer
    closer.close()


def wait_for(condition: collections.abc.Callable[[], bool]) -> None:
    """Poll until ``condition`` holds (a guard against hanging, not a timing assertion)."""
    for _ in range(500):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


class TestConnectionsCostBoundedThreads:
    def test_idle_connections_past_the_pool_and_its_queue_are_closed_at_once(
        self, small_pool: observe.Closer
    ) -> None:
        port = small_pool.health_port
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(10)]
        try:
            wait_for(lambda: small_pool.shed() == 6)  # 2 being handled, 2 waiting
            assert small_pool.handler_threads() == 2
            closed = 0
            for conn in idle:
                conn.settimeout(0.05)
                with contextlib.suppress(TimeoutError):
                    closed += conn.recv(1) == b""
            assert closed == 6
        finally:
            for conn in idle:
                conn.close()
        # The idle clients gone, the pool serves again, with no more threads.
        wait_for(lambda: probe(port) == 200)
        assert small_pool.handler_threads() == 2

    def test_the_listen_backlog_is_larger_than_socketservers_five(self) -> None:
        assert observe._Server.request_queue_size >= 128


def probe(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2.0) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, TimeoutError):
        return 0
