"""Unauthenticated load on the ports costs bounded work and never costs a probe: bounded
TokenReviews for unknown tokens (issue 24, finding 10); connections read under a deadline,
the oldest unread one closed for a new one, the probes answered without waiting for a
thread while idle and slow connections are held open (issue 28, finding N2)."""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import selectors
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

import edges_fakes as fakes
import pytest

from metricsched.edges import endpoints, http_server, metrics_auth, observe, probes

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

FLOOD = 80  # more than the 72 idle connections that shed every probe before issue 28
PROBES = 25
SLOW_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: operator\r\nX-Slow: " + b"z" * 40 + b"\r\n\r\n"


def probe(port: int, path: str = "/healthz", *, timeout: float = 2.0) -> int:
    """The status of one request as the kubelet makes it (0: no answer in ``timeout``)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, TimeoutError):
        return 0


def wait_for(condition: collections.abc.Callable[[], bool], *, timeout: float = 60.0) -> None:
    """Poll until ``condition`` holds (a guard against hanging, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


class Flood:
    """``count`` connections to a port, each re-opened as soon as the server closes it.

    Idle ones send nothing; slow ones (``trickle``) send one byte of a request a second
    and never finish it (slow loris)."""

    def __init__(self, port: int, count: int, *, trickle: bool = False) -> None:
        self.port = port
        self.count = count
        self.trickle = trickle
        self.opened = 0
        self.closed_by_server = 0
        self.answered = 0  # connections that got bytes back: none should
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        held: dict[socket.socket, int] = {}  # connection -> bytes of SLOW_REQUEST sent
        next_byte = time.monotonic()
        try:
            while not self._stop.is_set():
                while len(held) < self.count and not self._stop.is_set():
                    try:
                        new = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
                    except OSError:
                        break  # the backlog is full: try again on the next turn
                    new.setblocking(False)
                    selector.register(new, selectors.EVENT_READ)
                    held[new] = 0
                    self.opened += 1
                for key, _ in selector.select(timeout=0.05):
                    conn = key.fileobj
                    assert isinstance(conn, socket.socket)
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        data = b""
                    if data:
                        self.answered += 1
                    selector.unregister(conn)
                    del held[conn]
                    conn.close()
                    self.closed_by_server += 1
                if self.trickle and time.monotonic() >= next_byte:
                    next_byte = time.monotonic() + 1.0
                    for conn, sent in held.items():
                        with contextlib.suppress(OSError):  # closed: seen on the next turn
                            conn.send(SLOW_REQUEST[sent : sent + 1])
                            held[conn] = min(sent + 1, len(SLOW_REQUEST) - 5)  # never ends
        finally:
            for conn in held:
                conn.close()
            selector.close()

    def __enter__(self) -> Flood:
        self._thread.start()
        wait_for(lambda: self.opened >= self.count)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10.0)


@pytest.fixture
def health(clock: fakes.FakeClock) -> probes.HealthState:
    return probes.HealthState(max_heartbeat_age_s=30.0, clock=clock)


@pytest.fixture
def shared_port(
    health: probes.HealthState, metrics: observe.Metrics
) -> collections.abc.Iterator[endpoints.Closer]:
    """Probes and /metrics on one port: the probes share it with the heavier path."""
    closer = endpoints.serve(
        host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
    )
    yield closer
    closer.close()


def probe_through(flood: Flood, port: int, path: str = "/healthz") -> list[int]:
    """Probe one after another until ``PROBES`` are made and the server has closed at least
    as many connections as the flood holds: re-opened connections are part of it too."""
    statuses: list[int] = []
    while len(statuses) < PROBES or flood.closed_by_server < flood.count:
        statuses.append(probe(port, path))
        time.sleep(0.2)
        assert len(statuses) < 2_000, "the flood's connections were never closed"
    return statuses


class TestProbesAreAnsweredDuringAFlood:
    def test_every_healthz_probe_succeeds_while_80_idle_connections_are_held_open(
        self, shared_port: endpoints.Closer
    ) -> None:
        with Flood(shared_port.health_port, FLOOD) as flood:
            statuses = probe_through(flood, shared_port.health_port)
            assert flood.opened >= 2 * FLOOD  # every idle connection was closed and re-opened
        assert statuses == [200] * len(statuses)
        assert flood.answered == 0

    def test_every_readyz_probe_succeeds_while_80_idle_connections_are_held_open(
        self, shared_port: endpoints.Closer, health: probes.HealthState
    ) -> None:
        health.set_ready(True, "caches synced; leading")
        with Flood(shared_port.health_port, FLOOD) as flood:
            statuses = probe_through(flood, shared_port.health_port, "/readyz")
        assert statuses == [200] * len(statuses)

    def test_every_probe_succeeds_while_80_slow_loris_connections_trickle_their_headers(
        self, shared_port: endpoints.Closer
    ) -> None:
        with Flood(shared_port.health_port, FLOOD, trickle=True) as flood:
            statuses = probe_through(flood, shared_port.health_port)
        assert statuses == [200] * len(statuses)
        assert flood.answered == 0

    def test_metrics_are_still_served_during_the_flood(self, shared_port: endpoints.Closer) -> None:
        with Flood(shared_port.metrics_port, FLOOD):
            assert probe(shared_port.metrics_port, "/metrics", timeout=30.0) == 200
            assert probe(shared_port.metrics_port, "/healthz") == 200


def held_open(conn: socket.socket) -> bool:
    """Whether the server still holds ``conn`` open without having answered."""
    conn.settimeout(0.05)
    try:
        return conn.recv(1) != b""
    except TimeoutError:
        return True
    except OSError:
        return False


class TestIdleAndSlowConnectionsAreClosed:
    def test_a_connection_that_sends_nothing_is_closed_unanswered_by_the_header_deadline(
        self, shared_port: endpoints.Closer, metrics: observe.Metrics
    ) -> None:
        with socket.create_connection(("127.0.0.1", shared_port.health_port)) as conn:
            conn.settimeout(60.0)  # a guard against hanging; the deadline is 2 s
            assert conn.recv(1) == b""
        wait_for(lambda: shared_port.dropped() == {"deadline": 1})
        labels = {"port": str(shared_port.health_port), "reason": "deadline"}
        assert metrics.registry.get_sample_value("metricsched_http_dropped_total", labels) == 1

    def test_a_slow_loris_sending_a_byte_a_second_is_closed_before_its_headers_end(
        self, shared_port: endpoints.Closer
    ) -> None:
        sent = 0
        with socket.create_connection(("127.0.0.1", shared_port.health_port)) as conn:
            while sent < len(SLOW_REQUEST):
                try:
                    conn.sendall(SLOW_REQUEST[sent : sent + 1])
                except OSError:
                    break
                sent += 1
                time.sleep(1.0)
                if not held_open(conn):
                    break
        # Sending every byte takes a minute; the header deadline (2 s) came long before.
        assert sent < len(SLOW_REQUEST)
        assert shared_port.dropped() == {"deadline": 1}

    def test_a_tls_connection_that_never_finishes_its_handshake_is_closed_by_the_deadline(
        self, health: probes.HealthState, metrics: observe.Metrics, guard: metrics_auth.ReviewGuard
    ) -> None:
        serving = metrics_auth.SecureServing(
            certificates=metrics_auth.Certificates(None), guard=guard
        )
        closer = endpoints.serve(
            host="127.0.0.1",
            metrics_port=0,
            health_port=0,
            health=health,
            metrics=metrics,
            secure=serving,
        )
        try:
            with socket.create_connection(("127.0.0.1", closer.metrics_port)) as conn:
                conn.settimeout(60.0)
                assert conn.recv(1) == b""  # no ClientHello ever sent
            wait_for(lambda: closer.dropped() == {"deadline": 1})
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            url = f"https://127.0.0.1:{closer.metrics_port}/metrics"
            with pytest.raises(urllib.error.HTTPError) as denied:
                urllib.request.urlopen(url, timeout=10, context=context)
            assert denied.value.code == 401  # the port still serves: no token, no metrics
        finally:
            closer.close()


class TestConnectionsCostBoundedResources:
    @pytest.fixture
    def capped(
        self, monkeypatch: pytest.MonkeyPatch, health: probes.HealthState, metrics: observe.Metrics
    ) -> collections.abc.Iterator[endpoints.Closer]:
        """Four connections read at once, and a deadline long enough that only the cap
        closes any."""
        monkeypatch.setattr(http_server, "MAX_READING", 4)
        monkeypatch.setattr(http_server, "HEADER_DEADLINE_S", 120.0)
        closer = endpoints.serve(
            host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
        )
        yield closer
        closer.close()

    def connect(self, port: int, count: int, *, send: bytes = b"") -> list[socket.socket]:
        conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
        for conn in conns:
            conn.sendall(send)
        return conns

    def test_past_the_cap_the_oldest_idle_connection_is_closed_and_the_new_one_served(
        self, capped: endpoints.Closer
    ) -> None:
        idle = self.connect(capped.health_port, 4)
        try:
            # Accepted after the four, the probe is the fifth connection being read.
            assert probe(capped.health_port) == 200
            assert [held_open(conn) for conn in idle] == [False, True, True, True]
            # Three are read now: the next probe fits without closing any.
            assert probe(capped.health_port) == 200
            assert [held_open(conn) for conn in idle] == [False, True, True, True]
            idle += self.connect(capped.health_port, 1)
            assert probe(capped.health_port) == 200
            assert [held_open(conn) for conn in idle] == [False, False, True, True, True]
            assert capped.dropped() == {"evicted": 2}
        finally:
            for conn in idle:
                conn.close()

    def test_a_connection_that_has_sent_part_of_its_request_is_closed_after_the_idle_ones(
        self, capped: endpoints.Closer
    ) -> None:
        port = capped.health_port
        conns = self.connect(port, 1, send=b"GET /hea")
        try:
            assert probe(port) == 200  # answered: the server has read what came before it
            conns += self.connect(port, 3)
            assert probe(port) == 200
            assert [held_open(conn) for conn in conns] == [True, False, True, True]
            conns += self.connect(port, 1)
            assert probe(port) == 200
            assert [held_open(conn) for conn in conns] == [True, False, False, True, True]
            conns[0].sendall(b"lthz HTTP/1.1\r\n\r\n")  # it was kept: it is answered
            conns[0].settimeout(10.0)
            assert conns[0].recv(64).startswith(b"HTTP/1.1 200 OK")
        finally:
            for conn in conns:
                conn.close()

    def test_a_flood_past_the_cap_costs_no_probe_and_no_thread(
        self, shared_port: endpoints.Closer
    ) -> None:
        port = shared_port.health_port
        with Flood(port, http_server.MAX_READING + 44) as flood:
            statuses = probe_through(flood, port)
            scrapes = [probe(port, "/metrics", timeout=30.0) for _ in range(8)]
            mine = [t for t in threading.enumerate() if t.name.startswith("metricsched-http-")]
        assert statuses == [200] * len(statuses)
        assert scrapes == [200] * 8
        assert shared_port.dropped()["evicted"] > 0
        # The server's loop and at most its pool: no thread per connection.
        assert 1 <= len(mine) <= 1 + http_server.MAX_HANDLER_THREADS

    def test_metrics_past_its_threads_and_waiting_places_is_answered_busy_and_probes_are_not(
        self, monkeypatch: pytest.MonkeyPatch, health: probes.HealthState, metrics: observe.Metrics
    ) -> None:
        monkeypatch.setattr(http_server, "MAX_HANDLER_THREADS", 1)
        monkeypatch.setattr(http_server, "MAX_WAITING", 1)
        release = threading.Event()

        def slow_ages() -> dict[tuple[str, str], float]:
            release.wait(timeout=60.0)  # a scrape stuck in the exposition
            return {}

        metrics.set_metric_age_source(slow_ages)
        closer = endpoints.serve(
            host="127.0.0.1", metrics_port=0, health_port=0, health=health, metrics=metrics
        )
        statuses: list[int] = []

        def scrape() -> None:
            statuses.append(probe(closer.metrics_port, "/metrics", timeout=60.0))

        scrapers = [threading.Thread(target=scrape, daemon=True) for _ in range(3)]
        try:
            for t in scrapers:
                t.start()
            wait_for(lambda: len(statuses) == 1)  # one thread, one waiting place, one refused
            assert statuses == [503]
            assert probe(closer.health_port) == 200
            assert probe(closer.health_port, "/readyz") == 503  # answered: not ready yet
            release.set()
            for t in scrapers:
                t.join(timeout=60.0)
            assert sorted(statuses) == [200, 200, 503]
            assert closer.dropped() == {"busy": 1}
        finally:
            release.set()
            closer.close()

    def test_the_listen_backlog_is_larger_than_socketservers_five(self) -> None:
        assert http_server.LISTEN_BACKLOG >= 128
