"""One error vocabulary (``edges.errors``): one reading of an API error's message, the same
for an answer of the event-loop client, an answer read with its HTTP reason phrase (the
policy status, the auth reviews, the command line: what the kubernetes client said) and a
writer's failure; and the text each reader shows, unchanged."""

from __future__ import annotations

import orjson
import pytest

from metricsched import cli
from metricsched.edges import errors, kube_http, metrics_auth, wire

STATUS = orjson.dumps({"kind": "Status", "message": 'pods "p" not found', "code": 404})


@pytest.mark.parametrize("body", [STATUS, STATUS.decode()])
def test_a_status_body_gives_its_message(body: bytes | str) -> None:
    assert errors.message(body, "Not Found") == 'pods "p" not found'


def test_a_body_that_is_not_a_status_is_kept_cut_to_the_limit() -> None:
    page = b"  <html>" + b"x" * 5000 + b"</html>\n"
    message = errors.message(page, "Bad Gateway")
    assert message.startswith("<html>xxx")
    assert len(message) == errors.TEXT_LIMIT


def test_a_status_without_a_message_is_kept_as_text() -> None:
    assert errors.message(b'{"kind": "Status"}', "x") == '{"kind": "Status"}'


@pytest.mark.parametrize("body", [b"", b"  \n", None, ""])
def test_an_empty_body_gives_the_fallback(body: object) -> None:
    assert errors.message(body, "HTTP 502") == "HTTP 502"
    assert errors.message(body) == ""


def test_bytes_that_are_not_utf8_are_read_with_replacements() -> None:
    assert errors.message(b"bad \xff gateway") == "bad \ufffd gateway"


def _phrased(status: int, body: bytes) -> errors.ApiError:
    """An error answer read as the policy status, the reviews and the command line read it."""
    return kube_http.Answer(status, body).phrased_error()


@pytest.mark.parametrize(
    ("body", "message"),
    [(STATUS, 'pods "p" not found'), (b"upstream connect error", "upstream connect error")],
)
def test_every_reader_gives_the_same_message(body: bytes, message: str) -> None:
    error = kube_http.Answer(404, body).error()
    assert (error.status, error.message) == (404, message)
    written = wire.answer_error(kube_http.Answer(404, body))
    assert (written.status, written.message) == (404, message)
    phrased = _phrased(404, body)
    assert (phrased.status, phrased.message) == (404, message)
    assert errors.describe(phrased) == f"HTTP 404: {message}"
    assert errors.describe(error) == errors.describe(written) == f"HTTP 404: {message}"


def test_an_answer_without_a_body_read_with_its_phrase_gives_the_phrase() -> None:
    e = _phrased(503, b"")
    assert errors.describe(e) == "HTTP 503: Service Unavailable"
    assert str(e) == "503: Service Unavailable"
    assert str(_phrased(599, b"")) == "599: "  # a code without a phrase


# --- the messages people read, pinned: each reader's text for the same failures -----------


def test_explain_says_an_api_error_of_either_reading_as_http_status_and_message() -> None:
    loop_error = kube_http.Answer(403, orjson.dumps({"message": "no"})).error()
    phrased = _phrased(403, orjson.dumps({"message": "no"}))
    for error in (loop_error, phrased):
        assert cli.explain_failure(error).startswith("not allowed: HTTP 403: no. explain reads")
    server_error = kube_http.Answer(500, b"etcd unavailable").error()
    assert cli.explain_failure(server_error) == (
        "the API server could not be read: HTTP 500: etcd unavailable"
    )


def test_an_error_answer_without_a_body_keeps_each_readers_text() -> None:
    empty = kube_http.Answer(502, b"")
    assert str(empty.error()) == "502: "
    assert cli.explain_failure(empty.error()) == "the API server could not be read: HTTP 502: "
    assert wire.answer_error(empty).message == "HTTP 502"
    assert wire.answer_error(empty).detail == "HTTP 502: HTTP 502"


def test_a_transport_error_is_its_type_and_text() -> None:
    e = ConnectionRefusedError("connection refused")
    assert errors.describe(e) == "ConnectionRefusedError: connection refused"
    assert wire.transport_message(e) == "ConnectionRefusedError: connection refused"
    assert cli.explain_failure(e) == (
        "the API server could not be read: ConnectionRefusedError: connection refused"
    )


def test_the_lease_says_an_api_error_as_http_status_and_message() -> None:
    error = kube_http.Answer(409, STATUS).error()
    assert errors.describe(error) == 'HTTP 409: pods "p" not found'
    assert errors.describe(TimeoutError("late")) == "TimeoutError: late"


def test_a_long_message_is_cut_to_one_line_of_1024_characters() -> None:
    e = _phrased(500, b"y" * 5000)
    assert errors.describe(e) == ("HTTP 500: " + "y" * 2000)[:1024]


def test_an_error_carries_the_status_reason_of_its_body() -> None:
    body = orjson.dumps({"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
    error = kube_http.Answer(409, body).error()
    assert (error.status, error.reason, error.message) == (409, "AlreadyExists", "exists")
    unavailable = _phrased(503, b"")
    assert unavailable.reason == "Service Unavailable"


def test_a_failed_review_is_logged_as_status_and_reason_phrase() -> None:
    forbidden = _phrased(403, orjson.dumps({"reason": "x"}))
    assert metrics_auth._short(forbidden) == "403 Forbidden"
