"""/metrics' reviews on the wire: sent on the operator's loop for the HTTP server's request
threads, answered or refused within bounds, errors as the guard reads them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import edges_fakes as fakes
import pytest

from metricsched.edges import errors, kube_http, metrics_auth

READER = metrics_auth.User(
    name="system:serviceaccount:monitoring:prometheus",
    uid="u-1",
    groups=("system:serviceaccounts",),
    extra=(("scopes", ("a", "b")),),
)


def _reviewer(request: fakes.Request) -> tuple[int, Any]:
    body = request.json()
    if request.path.endswith("/tokenreviews"):
        if body["spec"]["token"] == "broken":
            return 503, b""
        if body["spec"]["token"] == "forbidden":
            return 403, fakes.status_body(403, "Forbidden", "cannot create tokenreviews")
        user = {
            "username": READER.name,
            "uid": READER.uid,
            "groups": list(READER.groups),
            "extra": {"scopes": ["a", "b"]},
        }
        authenticated = body["spec"]["token"] == "reader"
        return 201, {"status": {"authenticated": authenticated, "user": user}}
    allowed = body["spec"]["user"] == READER.name
    return 201, {"status": {"allowed": allowed, "reason": "RBAC" if allowed else ""}}


class OperatorLoop:
    """An event loop running on a thread of its own, as the operator's does beside the
    HTTP server's request threads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def close(self, api: kube_http.AsyncApi) -> None:
        asyncio.run_coroutine_threadsafe(api.close(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[fakes.FakeServer]:
    s = fakes.FakeServer(_reviewer)
    yield s
    s.close()


@pytest.fixture
def reviews(server: fakes.FakeServer) -> Iterator[metrics_auth.ApiReviews]:
    operator = OperatorLoop()
    api = fakes.async_api(server.url)
    yield metrics_auth.ApiReviews(api, loop=operator.loop)
    operator.close(api)


def test_a_token_review_names_the_user_of_the_token(
    reviews: metrics_auth.ApiReviews, server: fakes.FakeServer
) -> None:
    assert reviews.token_review("reader") == READER
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/apis/authentication.k8s.io/v1/tokenreviews")
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "reader"},
    }


def test_a_token_not_authenticated_is_no_user(reviews: metrics_auth.ApiReviews) -> None:
    assert reviews.token_review("junk") is None


def test_an_access_review_asks_for_the_path_as_the_user_with_all_they_carry(
    reviews: metrics_auth.ApiReviews, server: fakes.FakeServer
) -> None:
    assert reviews.access_review(READER, "/metrics", "get") == (True, "RBAC")
    [request] = server.requests
    assert request.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    assert request.json() == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": READER.name,
            "uid": "u-1",
            "groups": ["system:serviceaccounts"],
            "extra": {"scopes": ["a", "b"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    stranger = metrics_auth.User(name="system:serviceaccount:shop:web")
    assert reviews.access_review(stranger, "/metrics", "get") == (False, "")


def test_an_error_answer_raises_the_api_error_with_its_status(
    reviews: metrics_auth.ApiReviews,
) -> None:
    with pytest.raises(errors.ApiError) as forbidden:
        reviews.token_review("forbidden")
    assert (forbidden.value.status, forbidden.value.message) == (403, "cannot create tokenreviews")
    with pytest.raises(errors.ApiError) as unavailable:
        reviews.token_review("broken")
    assert errors.describe(unavailable.value) == "HTTP 503: Service Unavailable"


def test_a_failing_review_is_a_500_of_the_guard(reviews: metrics_auth.ApiReviews) -> None:
    guard = metrics_auth.ReviewGuard(reviews)
    denial = guard("Bearer broken", "/metrics")
    assert denial is not None
    assert denial.status == 500
    assert guard("Bearer reader", "/metrics") is None


def test_a_loop_that_never_runs_the_review_costs_a_timeout_not_a_thread_forever(
    server: fakes.FakeServer,
) -> None:
    stuck = asyncio.new_event_loop()  # never run: as a loop blocked by something else
    try:
        api = fakes.async_api(server.url)
        reviews = metrics_auth.ApiReviews(api, loop=stuck, timeout_s=0.0)
        with pytest.raises(TimeoutError):
            reviews.token_review("reader")
        # The loop, free again, finds the review cancelled and sends nothing.
        stuck.run_until_complete(asyncio.sleep(0.01))
        stuck.run_until_complete(api.close())
        assert server.requests == []
    finally:
        stuck.close()


def test_a_review_is_never_waited_for_on_its_own_loop(server: fakes.FakeServer) -> None:
    async def on_the_loop() -> None:
        api = fakes.async_api(server.url)
        reviews = metrics_auth.ApiReviews(api, loop=asyncio.get_running_loop())
        with pytest.raises(RuntimeError, match="block"):
            reviews.token_review("reader")
        await api.close()

    asyncio.run(on_the_loop())
    assert server.requests == []
