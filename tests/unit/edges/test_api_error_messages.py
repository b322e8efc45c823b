"""One reading of an API error's message (``kube_http.status_message``), the same for an
answer of the event-loop client, an ApiException of the kubernetes client and a writer's
failure."""

from __future__ import annotations

import kubernetes.client.exceptions
import orjson
import pytest

from metricsched.edges import kube, kube_http, wire

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
