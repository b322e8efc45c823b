"""The kubernetes client at the edge: credentials, and the few calls still made in threads.

Every raw answer (``_preload_content=False``) is read to its end before its connection
goes back to urllib3's pool: a connection returned with an unread body makes the *next*
request on it fail with ``ResponseNotReady('Request-sent')``, and if that next request
was a Binding the server accepted, its success would be lost. ``read_json`` and
``read_and_release`` are the only ways this package consumes a raw answer.

``request`` goes through the client's ``ApiClient`` (host, TLS, credentials and their
refresh, connection pool) with bodies already in wire form: the generated per-verb methods
validate every argument with pydantic, build models and serialise them back to dicts,
which cost as much CPU as the request itself. ``Api`` offers the few calls the operator
makes this way (the policy status, the auth reviews, the shadow report's read of a
policy) under the generated methods' names: importing the generated ``CoreV1Api`` and its
siblings alone costs ≈ 26 MiB of RSS and ≈ 1 s of CPU at start-up, for methods the
operator never calls.

Blocking: call from worker threads only. Everything else (the LISTs and watches of the
informers, the Lease, Bindings, Events, pod status, Evictions) is on the event loop
instead (``kube_http``).
"""

from __future__ import annotations

import json
import math
import re
import time
import typing
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kopf
import kubernetes
import kubernetes.client.exceptions
import urllib3
import urllib3.exceptions

from metricsched.edges import errors


class KubeconfigError(RuntimeError):
    """No usable cluster credentials: said in one line, not a traceback."""


# Errors that mean "the API call did not go through (or its answer was lost)": an error
# answer (``errors.ApiError``; the generated client's ``ApiException`` in
# ``metricsched explain``), or none.
API_ERRORS = (
    errors.ApiError,
    kubernetes.client.exceptions.ApiException,
    urllib3.exceptions.HTTPError,
    OSError,
    ValueError,  # pydantic's ValidationError before sending, unparsable answers
)


# What ``quote(s, safe="")`` leaves as is: a segment of only these (every valid object
# name) is used without quoting, a tenth of the cost on the write path.
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~-]*")


def path(prefix: str, *segments: str) -> str:
    """An API path: ``prefix`` as is, then each segment quoted (a name, or a word such as
    ``pods``): ``path("api/v1/namespaces", namespace, "pods", name, "binding")``."""
    return "/".join(
        (
            "",
            prefix,
            *(s if _UNQUOTED.fullmatch(s) else urllib.parse.quote(s, safe="") for s in segments),
        )
    )


Timeout = float | tuple[float, float] | None  # urllib3's: total, or (connect, read)


def request(
    client: Any,
    method: typing.Literal["GET", "POST", "PUT", "PATCH"],
    resource_path: str,
    body: Mapping[str, Any] | None = None,
    *,
    query: Sequence[tuple[str, str | int]] = (),
    timeout_s: Timeout = None,
    content_type: str = "application/json",
) -> urllib3.BaseHTTPResponse:
    """One request through the kubernetes ``ApiClient`` ``client``; the raw answer, to be
    read with ``read_and_release``. A non-2xx answer raises ``errors.ApiError`` (after
    reading it)."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, _, _ = client.param_serialize(
        method=method,
        resource_path=resource_path,
        query_params=list(query),
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    response = client.call_api(method, url, headers, body, _request_timeout=timeout_s)
    if not 200 <= response.status <= 299:
        response.read()
        raise api_error(kubernetes.client.exceptions.ApiException(http_resp=response))
    return typing.cast(urllib3.BaseHTTPResponse, response.response)


# A call to ``Api`` that names no ``_request_timeout`` still ends (the generated client's
# default is none at all).
DEFAULT_TIMEOUT_S = 60.0


class Api:
    """The kubernetes API calls the operator still makes in threads, by the generated
    client's method names and arguments (``_request_timeout``, by default
    ``DEFAULT_TIMEOUT_S``), always with raw answers (the generated methods'
    ``_preload_content=False``; the argument is accepted and must not be True)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def _get(self, resource_path: str, kw: Mapping[str, Any]) -> urllib3.BaseHTTPResponse:
        return self._send("GET", resource_path, None, kw)

    def _send(
        self,
        method: typing.Literal["GET", "POST", "PUT", "PATCH"],
        resource_path: str,
        body: Mapping[str, Any] | None,
        kw: Mapping[str, Any],
        *,
        content_type: str = "application/json",
    ) -> urllib3.BaseHTTPResponse:
        if kw.get("_preload_content", False):
            raise ValueError("kube.Api answers raw (_preload_content=False) only")
        return request(
            self.api_client,
            method,
            resource_path,
            body,
            timeout_s=kw.get("_request_timeout", DEFAULT_TIMEOUT_S),
            content_type=content_type,
        )

    # --- custom resources ------------------------------------------------------------------

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **kw: Any
    ) -> urllib3.BaseHTTPResponse:
        return self._get(path(f"apis/{group}/{version}/namespaces", namespace, plural, name), kw)

    def patch_namespaced_custom_object_status(  # noqa: PLR0917 (the generated signature)
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        name: str,
        body: Mapping[str, Any],
        *,
        _content_type: str = "application/merge-patch+json",
        **kw: Any,
    ) -> urllib3.BaseHTTPResponse:
        resource = path(f"apis/{group}/{version}/namespaces", namespace, plural, name, "status")
        return self._send("PATCH", resource, body, kw, content_type=_content_type)

    # --- authentication and authorization reviews ------------------------------------------

    def create_token_review(self, body: Mapping[str, Any], **kw: Any) -> urllib3.BaseHTTPResponse:
        return self._send("POST", path("apis/authentication.k8s.io/v1", "tokenreviews"), body, kw)

    def create_subject_access_review(
        self, body: Mapping[str, Any], **kw: Any
    ) -> urllib3.BaseHTTPResponse:
        resource = path("apis/authorization.k8s.io/v1", "subjectaccessreviews")
        return self._send("POST", resource, body, kw)


def api_error(e: BaseException) -> BaseException:
    """An ``ApiException`` of the kubernetes client as ``errors.ApiError`` (its reason
    phrase the message of an empty body); anything else as it is."""
    if not isinstance(e, kubernetes.client.exceptions.ApiException):
        return e
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


def connection_info(api_client: Any) -> kopf.ConnectionInfo:
    """kopf's credentials, taken from the kubernetes client's (one source of truth)."""
    cfg = api_client.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
        "authorization"
    )
    scheme, token = None, None
    if header:
        parts = header.split(" ", 1)
        scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        username=cfg.username or None,
        password=cfg.password or None,
    )


def load_api_client(
    kubeconfig: str | None, *, pool_size: int = 32, context: str | None = None
) -> Any:
    """The kubernetes ApiClient: in-cluster, else the kubeconfig (explicit or default).

    ``context`` picks a kubeconfig context (kubectl's ``--context``); with it, or with
    ``kubeconfig``, the in-cluster config is not tried.
    """
    try:
        return _load_api_client(kubeconfig, pool_size=pool_size, context=context)
    except (kubernetes.config.ConfigException, OSError, ValueError, TypeError) as e:
        where = kubeconfig or "in-cluster config or ~/.kube/config"
        raise KubeconfigError(f"cannot load cluster credentials from {where}: {e}") from e


def _load_api_client(kubeconfig: str | None, *, pool_size: int, context: str | None) -> Any:
    cfg = kubernetes.client.Configuration()
    if kubeconfig or context:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig or None, context=context, client_configuration=cfg
        )
    else:
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
    # urllib3 keeps this many connections per host: one per Binding in flight, plus the
    # event and status writers (the client's default, 10, would queue the binds).
    cfg.connection_pool_maxsize = pool_size
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook = RefreshAtMost(cfg.refresh_api_key_hook, REFRESH_EVERY_S)
    return kubernetes.client.ApiClient(cfg)


# How often the credentials' refresh hook runs at most (see ``RefreshAtMost``).
REFRESH_EVERY_S = 1.0


class RefreshAtMost:
    """The kubernetes client's credential refresh hook, run at most once per ``every_s``.

    The kubeconfig and in-cluster loaders install a hook that the client calls before
    every request; besides re-reading an expired token it sets the host, TLS files and
    proxy on the configuration again (each ``Configuration.host`` set reads the proxy
    environment): ≈ 50 µs per request, two requests per pod. Tokens still refresh on the
    loaders' own schedule (an expiry a minute ahead for projected service-account tokens),
    at most ``every_s`` later."""

    def __init__(
        self,
        hook: Callable[[Any], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hook = hook
        self._every = every_s
        self._clock = clock
        self._last = -math.inf

    def __call__(self, configuration: Any) -> None:
        now = self._clock()
        if now - self._last >= self._every:
            self.refresh_now(configuration)

    def refresh_now(self, configuration: Any) -> None:
        """Run the hook now, whenever it last ran (the API answered 401)."""
        self._hook(configuration)
        self._last = self._clock()
