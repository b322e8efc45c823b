"""Blocking requests through the kubernetes client's ``ApiClient`` (urllib3), for the tools
that run in threads of their own: the load model's informers (hack/loadmodel.py) and the
write-cost bench's "before" path (bench/write_cost.py). The operator sends none of these:
its API calls are all on the event loop (``metricsched.edges.kube_http``).

Every raw answer (``_preload_content=False``) is read to its end before its connection
goes back to urllib3's pool: a connection returned with an unread body makes the *next*
request on it fail with ``ResponseNotReady('Request-sent')``. ``read_json`` and
``read_and_release`` are the ways to consume a raw answer. ``request`` sends bodies
already in wire form, without the generated per-verb methods (their pydantic validation
costs as much CPU as the request itself, and importing them ≈ 26 MiB).
"""

from __future__ import annotations

import json
import typing
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes.client.exceptions
import urllib3

from metricsched.edges import errors

Timeout = float | tuple[float, float] | None  # urllib3's: total, or (connect, read)


def request(
    client: Any,
    method: typing.Literal["GET", "POST", "PUT", "PATCH"],
    resource_path: str,
    body: Mapping[str, Any] | None = None,
    *,
    timeout_s: Timeout = None,
) -> urllib3.BaseHTTPResponse:
    """One request through the kubernetes ``ApiClient`` ``client`` (a query in
    ``resource_path``: ``with_query``), JSON in and out; the raw answer, to be read with
    ``read_and_release``. A non-2xx answer raises ``errors.ApiError`` (after reading it)."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    method, url, headers, _, _ = client.param_serialize(
        method=method,
        resource_path=resource_path,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    response = client.call_api(method, url, headers, body, _request_timeout=timeout_s)
    if not 200 <= response.status <= 299:
        response.read()
        raise _api_error(kubernetes.client.exceptions.ApiException(http_resp=response))
    return typing.cast(urllib3.BaseHTTPResponse, response.response)


def with_query(resource_path: str, query: Sequence[tuple[str, str | int]]) -> str:
    """``resource_path`` with ``query`` as its query string (none if empty)."""
    return f"{resource_path}?{urllib.parse.urlencode(query)}" if query else resource_path


def _api_error(e: kubernetes.client.exceptions.ApiException) -> errors.ApiError:
    """An ``ApiException`` of the kubernetes client as ``errors.ApiError`` (its reason
    phrase the message of an empty body)."""
    phrase = "" if e.reason is None else str(e.reason)
    return errors.from_answer(int(e.status or 0), e.body, fallback=phrase, phrase=phrase)


def read_and_release(response: object) -> bytes:
    """Read the whole body of a raw answer, then return its connection to the pool."""
    raw = typing.cast(urllib3.BaseHTTPResponse, response)
    try:
        data = raw.data
    finally:
        raw.release_conn()
    return bytes(data or b"")


def read_json(response: object) -> dict[str, Any]:
    data = read_and_release(response)
    body = json.loads(data) if data else {}
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    return body
