"""Secure /metrics: who may scrape, how long answers are trusted, and the HTTPS server.

The reviews here are a recording stand-in for the two API calls (TokenReview and
SubjectAccessReview); tests/e2e/chart/test_metrics_auth.py makes them against the real
API server. The TLS server is real: a self-signed certificate made by openssl.
"""

from __future__ import annotations

import collections.abc
import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import edges_fakes as fakes
import pytest

from metricsched.edges import endpoints, metrics_auth, observe, probes

READER = metrics_auth.User(name="system:serviceaccount:monitoring:prometheus", groups=("a",))
STRANGER = metrics_auth.User(name="system:serviceaccount:shop:web")


class RecordingReviews:
    """Tokens "reader" and "stranger" are known; only the reader may get /metrics."""

    def __init__(self) -> None:
        self.token_reviews: list[str] = []
        self.access_reviews: list[tuple[str, str, str]] = []
        self.fail = False
        self.allowed = {READER.name}

    def token_review(self, token: str) -> metrics_auth.User | None:
        self.token_reviews.append(token)
        if self.fail:
            raise ConnectionError("API server unreachable")
        return {"reader": READER, "stranger": STRANGER}.get(token)

    def access_review(self, user: metrics_auth.User, path: str, verb: str) -> tuple[bool, str]:
        self.access_reviews.append((user.name, path, verb))
        return user.name in self.allowed, ""


@pytest.fixture
def reviews() -> RecordingReviews:
    return RecordingReviews()


@pytest.fixture
def guard(reviews: RecordingReviews, clock: fakes.FakeClock) -> metrics_auth.ReviewGuard:
    return metrics_auth.ReviewGuard(reviews, clock=clock)


# --- who may scrape --------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer  ", "Basic dXNlcjpwdw=="])
def test_a_request_without_a_bearer_token_is_unauthorized(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews, header: str | None
) -> None:
    denial = guard(header, "/metrics")
    assert denial is not None and denial.status == 401
    assert reviews.token_reviews == []


def test_an_unknown_token_is_unauthorized(guard: metrics_auth.ReviewGuard) -> None:
    denial = guard("Bearer nobody", "/metrics")
    assert denial is not None and denial.status == 401


def test_a_known_user_without_access_is_forbidden_by_name(
    guard: metrics_auth.ReviewGuard,
) -> None:
    denial = guard("Bearer stranger", "/metrics")
    assert denial is not None and denial.status == 403
    assert STRANGER.name in denial.reason


def test_a_user_who_may_get_the_path_is_let_through(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews
) -> None:
    assert guard("bearer reader", "/metrics") is None
    assert reviews.access_reviews == [(READER.name, "/metrics", "get")]


def test_a_failing_review_is_an_internal_error_and_is_not_cached(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews
) -> None:
    reviews.fail = True
    denial = guard("Bearer reader", "/metrics")
    assert denial is not None and denial.status == 500
    reviews.fail = False
    assert guard("Bearer reader", "/metrics") is None


# --- how long answers are trusted ------------------------------------------------------


def test_answers_are_reused_within_their_time_to_live(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews
) -> None:
    for _ in range(5):
        assert guard("Bearer reader", "/metrics") is None
    assert len(reviews.token_reviews) == 1
    assert len(reviews.access_reviews) == 1


def test_tokens_are_reviewed_again_after_a_minute(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews, clock: fakes.FakeClock
) -> None:
    guard("Bearer reader", "/metrics")
    clock.advance(metrics_auth.AUTHN_TTL_S + 1)
    guard("Bearer reader", "/metrics")
    assert len(reviews.token_reviews) == 2
    assert len(reviews.access_reviews) == 1  # "allowed" holds for five minutes


def test_a_denial_is_trusted_for_less_time_than_an_allowance(
    guard: metrics_auth.ReviewGuard, reviews: RecordingReviews, clock: fakes.FakeClock
) -> None:
    assert guard("Bearer stranger", "/metrics") is not None
    reviews.allowed.add(STRANGER.name)  # someone binds the reader role
    clock.advance(metrics_auth.DENY_TTL_S + 1)
    assert guard("Bearer stranger", "/metrics") is None
    assert metrics_auth.DENY_TTL_S < metrics_auth.ALLOW_TTL_S


def test_the_cache_keeps_no_token(
    guard: metrics_auth.ReviewGuard,
) -> None:
    guard("Bearer reader", "/metrics")
    assert [key for key in guard._users._items if "reader" in str(key)] == []


# --- the HTTPS server ------------------------------------------------------------------

Server = collections.abc.Iterator[endpoints.Closer]


@pytest.fixture
def secure(
    guard: metrics_auth.ReviewGuard, metrics: observe.Metrics, clock: fakes.FakeClock
) -> Server:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed: run `make deps`")
    serving = metrics_auth.SecureServing(certificates=metrics_auth.Certificates(None), guard=guard)
    closer = endpoints.serve(
        host="127.0.0.1",
        metrics_port=0,
        health_port=0,
        health=probes.HealthState(clock=clock),
        metrics=metrics,
        secure=serving,
    )
    yield closer
    closer.close()


def get(url: str, token: str | None = None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_metrics_are_https_behind_the_guard_and_the_probes_plain_http(
    secure: endpoints.Closer,
) -> None:
    assert secure.metrics_port != secure.health_port
    metrics_url = f"https://127.0.0.1:{secure.metrics_port}/metrics"
    assert get(metrics_url) == 401
    assert get(metrics_url, "stranger") == 403
    assert get(metrics_url, "reader") == 200
    assert get(f"http://127.0.0.1:{secure.health_port}/healthz") == 200
    assert get(f"http://127.0.0.1:{secure.health_port}/metrics") == 404


def test_the_self_signed_certificate_names_localhost(secure: endpoints.Closer) -> None:
    pem = ssl.get_server_certificate(("127.0.0.1", secure.metrics_port))
    assert "BEGIN CERTIFICATE" in pem


def test_a_missing_certificate_directory_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(metrics_auth.AuthError, match=r"tls\.crt"):
        metrics_auth.Certificates(str(tmp_path))


def test_secure_metrics_refuse_to_share_the_probes_port(
    guard: metrics_auth.ReviewGuard, metrics: observe.Metrics, clock: fakes.FakeClock
) -> None:
    serving = metrics_auth.SecureServing(certificates=metrics_auth.Certificates(None), guard=guard)
    with pytest.raises(ValueError, match="health port of its own"):
        endpoints.serve(
            host="127.0.0.1",
            metrics_port=18443,
            health_port=18443,
            health=probes.HealthState(clock=clock),
            metrics=metrics,
            secure=serving,
        )
