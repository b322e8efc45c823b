"""Prometheus's instant-query API over HTTP, read incrementally under a size cap.

The answer is streamed: its bytes are counted as they arrive and the read stops (the
connection is closed, never reused) as soon as the cap is passed, so an answer larger
than ``max_bytes`` is never held in memory; the JSON decoder counts series as it builds
them and stops past ``max_series``. The whole call has a deadline, so a server that drips
its answer byte by byte cannot hold a refresh longer than the caller allowed.

Must not: hold more than ``max_bytes`` of one answer, log or return the body of an
answer (error bodies are reduced to Prometheus's ``errorType`` and ``error`` fields for
the caller to classify and scrub), or raise anything but the exceptions declared here and
``requests``'/``urllib3``'s transport errors. Blocking: call from a worker thread.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import requests

CHUNK_BYTES = 64 * 1024
ERROR_BODY_BYTES = 16 * 1024  # enough for Prometheus's error envelope; the rest is dropped


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Caps on one answer. One series per node is what a policy's query should return."""

    max_bytes: int = 8 * 1024 * 1024
    max_series: int = 10_000


class AnswerTooLargeError(Exception):
    """The answer passed a cap; ``what`` is ``"bytes"`` or ``"series"``."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"answer over {limit} {what}")
        self.what = what
        self.limit = limit


class HttpStatusError(Exception):
    """A status other than 200, with Prometheus's error fields when the body had them."""

    def __init__(self, status: int, *, error_type: str, error: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.error_type = error_type
        self.error = error


class NotJsonError(Exception):
    """A 200 answer that is not JSON (a login page, the wrong URL)."""


class NoResultError(Exception):
    """A 200 JSON answer without ``status: success`` and a ``data.result`` field."""


class DeadlineExceededError(Exception):
    """The answer did not arrive completely within the call's deadline."""


def instant_query(
    session: requests.Session,
    *,
    url: str,
    query: str,
    timeout_s: float,
    deadline_s: float,
    limits: Limits,
) -> Any:
    """``GET {url}/api/v1/query``: the ``data.result`` of the answer, decoded JSON.

    ``timeout_s`` bounds connecting and each read; ``deadline_s`` the whole call,
    retries (the session's adapter) and the body included.
    """
    deadline = time.monotonic() + deadline_s
    response = session.get(
        f"{url}/api/v1/query",
        params={"query": query},
        timeout=(timeout_s, timeout_s),
        stream=True,
        allow_redirects=False,
        # Given per request: otherwise requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE in
        # the environment override the session's CA file (psf/requests#3829).
        verify=session.verify,
        cert=session.cert,
    )
    try:
        if response.status_code != 200:
            raise _status_error(response, deadline=deadline)
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limits.max_bytes:
            raise AnswerTooLargeError("bytes", limits.max_bytes)
        body = _read_capped(response, limit=limits.max_bytes, deadline=deadline, truncate=False)
        try:
            envelope = json.loads(body, object_pairs_hook=_SeriesCounter(limits.max_series))
        except ValueError:
            raise NotJsonError() from None
        del body
    finally:
        # After a complete read this returns the connection to the pool; after an
        # early stop it closes it, so a half-read answer is never reused.
        response.close()
    if not isinstance(envelope, dict) or envelope.get("status") != "success":
        raise NoResultError()
    data = envelope.get("data")
    if not isinstance(data, dict) or "result" not in data:
        raise NoResultError()
    return data["result"]


class _SeriesCounter:
    """``object_pairs_hook`` that stops decoding past ``limit`` series.

    A series is an object whose ``metric`` is an object (label sets hold only strings,
    so a label named ``metric`` is not counted).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if isinstance(obj.get("metric"), dict):
            self.count += 1
            if self.count > self.limit:
                raise AnswerTooLargeError("series", self.limit)
        return obj


def _read_capped(
    response: requests.Response, *, limit: int, deadline: float, truncate: bool
) -> bytearray:
    """The decoded body, at most ``limit`` bytes (``AnswerTooLargeError`` past it unless
    ``truncate``), read chunk by chunk."""
    body = bytearray()
    for chunk in response.iter_content(chunk_size=CHUNK_BYTES):
        if time.monotonic() > deadline:
            raise DeadlineExceededError()
        room = limit - len(body)
        if len(chunk) > room:
            if truncate:
                body += chunk[:room]
                return body
            raise AnswerTooLargeError("bytes", limit)
        body += chunk
    return body


def _status_error(response: requests.Response, *, deadline: float) -> HttpStatusError:
    try:
        body = _read_capped(response, limit=ERROR_BODY_BYTES, deadline=deadline, truncate=True)
        envelope = json.loads(body)
    except (ValueError, DeadlineExceededError, requests.exceptions.RequestException):
        envelope = None
    error_type = error = ""
    if isinstance(envelope, dict):
        error_type = str(envelope.get("errorType") or "")
        error = str(envelope.get("error") or "")
    return HttpStatusError(response.status_code, error_type=error_type, error=error)
