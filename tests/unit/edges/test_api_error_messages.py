"""One reading of an API error's message (``kube_http.status_message``), the same for an
answer of the event-loop client, an ApiException of the kubernetes client and a writer's
failure."""

from __future__ import annotations

import kubernetes.client.exceptions
import orjson
import pytest

from metricsched import cli
from metricsched.edges import kube, kube_http, wire
from metricsched.runtime import leader

STATUS = orjson.dumps({"kind": "Status", "message": 'pods "p" not found', "code": 404})


@pytest.mark.parametrize("body", [STATUS, STATUS.decode()])
def test_a_status_body_gives_its_message(body: bytes | str) -> None:
    assert kube_http.status_message(body, "Not Found") == 'pods "p" not found'


def test_a_body_that_is_not_a_status_is_kept_cut_to_the_limit() -> None:
    page = b"  <html>" + b"x" * 5000 + b"</html>\n"
    message = kube_http.status_message(page, "Bad Gateway")
    assert message.startswith("<html>xxx")
    assert len(message) == kube_http.ERROR_TEXT_LIMIT


def test_a_status_without_a_message_is_kept_as_text() -> None:
    assert kube_http.status_message(b'{"kind": "Status"}', "x") == '{"kind": "Status"}'


@pytest.mark.parametrize("body", [b"", b"  \n", None, ""])
def test_an_empty_body_gives_the_fallback(body: object) -> None:
    assert kube_http.status_message(body, "HTTP 502") == "HTTP 502"
    assert kube_http.status_message(body) == ""


def test_bytes_that_are_not_utf8_are_read_with_replacements() -> None:
    assert kube_http.status_message(b"bad \xff gateway") == "bad \ufffd gateway"


def _api_exception(status: int, reason: str, body: bytes | str) -> Exception:
    e = kubernetes.client.exceptions.ApiException(status=status, reason=reason)
    e.body = body
    return e


@pytest.mark.parametrize(
    ("body", "message"),
    [(STATUS, 'pods "p" not found'), (b"upstream connect error", "upstream connect error")],
)
def test_every_reader_gives_the_same_message(body: bytes, message: str) -> None:
    error = kube_http.status_error(kube_http.Answer(404, body))
    assert (error.status, error.message) == (404, message)
    assert wire.answer_failure(kube_http.Answer(404, body)) == wire.Failure(404, message)
    e = _api_exception(404, "Not Found", body)
    assert wire.failure(e) == wire.Failure(404, message)
    assert kube.describe_error(e) == f"HTTP 404: {message}"


def test_an_api_exception_without_a_body_gives_its_reason() -> None:
    e = _api_exception(503, "Service Unavailable", "")
    assert kube.describe_error(e) == "HTTP 503: Service Unavailable"
    assert wire.failure(e) == wire.Failure(503, "Service Unavailable")


# --- the messages people read, pinned: each reader's text for the same failures -----------


def test_explain_says_an_api_error_of_either_client_as_http_status_and_message() -> None:
    loop_error = kube_http.status_error(kube_http.Answer(403, orjson.dumps({"message": "no"})))
    thread_error = _api_exception(403, "Forbidden", orjson.dumps({"message": "no"}))
    for error in (loop_error, thread_error):
        assert cli.explain_failure(error).startswith("not allowed: HTTP 403: no. explain reads")
    server_error = kube_http.status_error(kube_http.Answer(500, b"etcd unavailable"))
    assert cli.explain_failure(server_error) == (
        "the API server could not be read: HTTP 500: etcd unavailable"
    )


def test_an_error_answer_without_a_body_keeps_each_readers_text() -> None:
    empty = kube_http.Answer(502, b"")
    assert str(kube_http.status_error(empty)) == "502: "
    assert cli.explain_failure(kube_http.status_error(empty)) == (
        "the API server could not be read: HTTP 502: "
    )
    assert wire.answer_failure(empty).message == "HTTP 502"
    assert wire.answer_failure(empty).detail == "HTTP 502: HTTP 502"


def test_a_transport_error_is_its_type_and_text() -> None:
    e = ConnectionRefusedError("connection refused")
    assert kube.describe_error(e) == "ConnectionRefusedError: connection refused"
    assert wire.failure(e).detail == "ConnectionRefusedError: connection refused"
    assert cli.explain_failure(e) == (
        "the API server could not be read: ConnectionRefusedError: connection refused"
    )


def test_the_lease_says_an_api_error_as_http_status_and_message() -> None:
    error = kube_http.status_error(kube_http.Answer(409, STATUS))
    assert leader._describe(error) == 'HTTP 409: pods "p" not found'
    assert leader._describe(TimeoutError("late")) == "TimeoutError: late"


def test_a_long_message_is_cut_to_one_line_of_1024_characters() -> None:
    e = _api_exception(500, "Internal Server Error", b"y" * 5000)
    assert kube.describe_error(e) == ("HTTP 500: " + "y" * 2000)[:1024]
