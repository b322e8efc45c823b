"""The Prometheus client: instant queries mapped to nodes (the store is ``metric_store``).

One instant query per distinct (query, nodeLabel) per refresh, never per pod. Each
result series is matched to a Node by its ``nodeLabel`` value (``prometheus_series``).
Failures are classified into ``model.QueryErrorKind`` and returned as data; nothing here
raises on a bad answer.

A policy's messages go to its namespace (status, events), so they carry only what its
decisions used: never the bearer token, never label names or values of series that named
no node, never Prometheus's raw error text (a classified, scrubbed summary instead). A
query the admin's rules (``core.promql_guard``) refuse is never sent. An answer is read
under a byte and series cap (``edges.prometheus_http``).

Blocking (``requests`` underneath): call from a worker thread, never the event loop.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import logging
import math
import pathlib
import re
import time
import types
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import prometheus_api_client.prometheus_connect as prom_connect
import requests
import requests.auth
import requests.exceptions
import urllib3.exceptions
import urllib3.util.retry

from metricsched import config as config_mod
from metricsched.core import model, promql_guard
from metricsched.edges import observe
from metricsched.edges import prometheus_http as prom_http
from metricsched.edges import prometheus_series as prom_series

logger = logging.getLogger(__name__)

_REDACTED = "[REDACTED]"
_DETAIL_LIMIT = 160  # characters of a scrubbed Prometheus error kept in a message


@dataclasses.dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to reach Prometheus. The token (``token_file``) or the basic-auth password
    (``password_file``) is read on every request (projected service-account tokens and
    mounted Secrets rotate) and is never logged or reported; so is the client key."""

    url: str
    token_file: str | None = None
    ca_file: str | None = None
    verify_tls: bool = True
    # Sent with every request, e.g. (("X-Scope-OrgID", "team-a"),) for a Mimir tenant.
    headers: tuple[tuple[str, str], ...] = ()
    # (name, path): headers whose values are secrets, read from their files per request.
    header_files: tuple[tuple[str, str], ...] = ()
    username: str | None = None  # basic auth, with password_file
    password_file: str | None = None
    cert_file: str | None = None  # client certificate, with key_file (PEM)
    key_file: str | None = None
    timeout_s: float = 5.0  # per attempt, connect and read each
    retries: int = 1  # extra attempts on connection errors and 502/503/504
    # Caps on one answer (bytes, series).
    limits: prom_http.Limits = dataclasses.field(default_factory=prom_http.Limits)
    # What namespaced policies may query (default: anything).
    rules: promql_guard.Rules = dataclasses.field(default_factory=promql_guard.Rules)

    @classmethod
    def from_config(cls, config: config_mod.Config) -> PrometheusConfig:
        """The operator's flags (``metricsched run``) for its Prometheus source."""
        return cls(
            url=config.prometheus_url,
            token_file=config.prometheus_token_file,
            ca_file=config.prometheus_ca_file,
            verify_tls=config.prometheus_verify_tls,
            headers=config.prometheus_headers,
            header_files=config.prometheus_header_files,
            username=config.prometheus_username,
            password_file=config.prometheus_password_file,
            cert_file=config.prometheus_cert_file,
            key_file=config.prometheus_key_file,
            timeout_s=config.query_timeout_s,
            limits=prom_http.Limits(
                max_bytes=config.max_result_bytes, max_series=config.max_result_series
            ),
            rules=config.query_rules,
        )


class PodQueryError(Exception):
    """A per-pod usage query failed; the message names why (secrets removed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueryReport:
    """A query's per-node series plus what was left out of it, for status and events."""

    series: model.MetricSeries
    series_total: int  # series in Prometheus's answer
    series_unknown_node: int  # without the node label, or naming no known node
    series_duplicate: int  # further series for a node that already had one
    values_dropped: int  # series of known nodes with NaN, ±Inf or unparsable values
    duration_s: float
    connect_failed: bool  # Prometheus itself unreachable (not just this query failing)


class _QueryError(Exception):
    def __init__(
        self,
        kind: model.QueryErrorKind,
        message: str,
        *,
        connect: bool = False,
        sent: bool = True,  # False: refused by the admin's rules, Prometheus never asked
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.connect = connect
        self.sent = sent


def _secret_from_file(path: str, what: str, *, trim: Callable[[str], str]) -> str:
    """A mounted Secret's file, read fresh for every request (it may be rotated) and
    trimmed; a file that cannot be read or is empty fails the query as Prometheus
    unreachable would."""
    try:
        secret = trim(pathlib.Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise _QueryError(
            model.QueryErrorKind.UNREACHABLE,
            f"cannot read the {what} file {path}: {e.strerror or e}",
        ) from None
    if not secret:
        raise _QueryError(model.QueryErrorKind.UNREACHABLE, f"the {what} file {path} is empty")
    return secret


def _remember(recent: collections.deque[str], *secrets: str) -> None:
    """Keep what a request sends, only to scrub it from messages about the answer."""
    for secret in secrets:
        if secret not in recent:
            recent.append(secret)


class _BearerTokenFile(requests.auth.AuthBase):
    """Sets ``Authorization: Bearer <token>`` from a file read fresh for every request."""

    def __init__(self, path: str) -> None:
        self.path = path
        # The last tokens sent, only to scrub them from messages (two: a rotation may
        # happen between a request and the message about its answer).
        self.recent: collections.deque[str] = collections.deque(maxlen=2)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        token = _secret_from_file(self.path, "bearer token", trim=str.strip)
        _remember(self.recent, token)
        request.headers["Authorization"] = f"Bearer {token}"
        return request

    def __repr__(self) -> str:
        return f"<bearer token from {self.path}>"


class _BasicAuthFile(requests.auth.AuthBase):
    """Sets ``Authorization: Basic ...`` from a username and a password file read fresh
    for every request (a mounted Secret may be rotated)."""

    def __init__(self, username: str, path: str) -> None:
        self.username = username
        self.path = path
        # The last passwords and encoded credentials sent, only to scrub them from messages.
        self.recent: collections.deque[str] = collections.deque(maxlen=4)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        password = _secret_from_file(
            self.path, "basic-auth password", trim=lambda text: text.rstrip("\r\n")
        )
        credentials = base64.b64encode(f"{self.username}:{password}".encode()).decode("ascii")
        _remember(self.recent, password, credentials)
        request.headers["Authorization"] = f"Basic {credentials}"
        return request

    def __repr__(self) -> str:
        return f"<basic auth for {self.username} with the password from {self.path}>"


class _HeaderFiles(requests.auth.AuthBase):
    """Sets each header of ``files`` (name, path) from its file, read fresh for every
    request (a mounted Secret may be rotated), after ``inner``'s Authorization if any."""

    def __init__(
        self, files: tuple[tuple[str, str], ...], inner: _BearerTokenFile | _BasicAuthFile | None
    ) -> None:
        self.files = files
        self.inner = inner
        self._values: collections.deque[str] = collections.deque(maxlen=2 * len(files))

    @property
    def recent(self) -> list[str]:
        """The secrets sent lately (the inner auth's and the headers'), only to scrub them
        from messages."""
        return [*(self.inner.recent if self.inner is not None else ()), *self._values]

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if self.inner is not None:
            request = self.inner(request)
        for name, path in self.files:
            value = _secret_from_file(path, f"header {name}", trim=str.strip)
            if any(c in value for c in "\r\n\0"):
                raise _QueryError(
                    model.QueryErrorKind.UNREACHABLE,
                    f"the header {name} file {path} holds more than one line",
                )
            _remember(self._values, value)
            request.headers[name] = value
        return request

    def __repr__(self) -> str:
        return f"<headers {', '.join(n for n, _ in self.files)} from files>"


class PrometheusClient:
    """One Prometheus server behind one ``PrometheusConnect`` (one HTTP connection pool).

    prometheus-api-client owns the connection: its ``PrometheusConnect`` holds the
    session, mounts the retry policy and checks that the server answers. Queries are
    streamed through that same session by ``prometheus_http`` instead of the client's
    ``custom_query``, which reads the whole answer into memory before one byte can be
    checked: the result caps must hold while the body is read.

    Thread-safe: the source keeps no per-call state and urllib3's pool is thread-safe.
    The worst-case duration of a call is ``(retries + 1) * timeout_s`` plus a short
    backoff, body included; ``Retry-After`` headers are ignored so that a proxy cannot
    stall refreshes.
    """

    def __init__(self, config: PrometheusConfig, *, metrics: observe.Metrics | None = None):
        self._config = config
        self._metrics = metrics
        self._auth: _BearerTokenFile | _BasicAuthFile | _HeaderFiles | None = None
        if config.token_file:
            self._auth = _BearerTokenFile(config.token_file)
        elif config.username is not None and config.password_file:
            self._auth = _BasicAuthFile(config.username, config.password_file)
        if config.header_files:
            self._auth = _HeaderFiles(config.header_files, self._auth)
        self._url = config.url.rstrip("/")
        session = requests.Session()
        session.verify = config.ca_file or config.verify_tls
        session.auth = self._auth  # requests applies it to every request of the session
        session.headers.update(dict(config.headers))
        if config.cert_file and config.key_file:
            # Loaded by each new connection's TLS context: a renewed certificate is used
            # from the next connection on.
            session.cert = (config.cert_file, config.key_file)
        retry = urllib3.util.retry.Retry(
            total=config.retries,
            backoff_factor=0.2,
            status_forcelist=[502, 503, 504],
            respect_retry_after_header=False,
        )
        # The client mounts ``retry`` on the session for its URL.
        self._client = prom_connect.PrometheusConnect(
            url=self._url,
            retry=retry,
            session=session,
            # Annotated int upstream; requests takes any number of seconds.
            timeout=config.timeout_s,  # type: ignore[arg-type]
        )
        self._session = session
        self._deadline_s = (config.retries + 1) * config.timeout_s + 0.2 * config.retries
        self._display_url = _redact_url(config.url)
        self._guard = promql_guard.Guard(config.rules)

    @property
    def rules(self) -> promql_guard.Rules:
        return self._config.rules

    @property
    def guard(self) -> promql_guard.Guard:
        """The admin's rules with their verdicts remembered (one check per query)."""
        return self._guard

    def close(self) -> None:
        self._client.close()

    def refusal(self, query: str, *, namespace: str | None) -> str | None:
        """Why the admin's rules forbid a policy in ``namespace`` to send ``query``.

        Without a namespace the rules cannot be checked: refused whenever rules are set.
        """
        rules = self._config.rules
        if namespace is None:
            return "the policy's namespace was not given for the check" if rules.enabled else None
        return self._guard.check(query, namespace=namespace)

    def query_nodes(
        self,
        query: str,
        *,
        node_label: str,
        nodes: Sequence[model.NodeInfo],
        now: float,
        namespace: str | None = None,
    ) -> model.MetricSeries:
        """Run one instant query and return its values by node (errors classified)."""
        return self.query_nodes_report(
            query, node_label=node_label, nodes=nodes, now=now, namespace=namespace
        ).series

    def query_nodes_report(
        self,
        query: str,
        *,
        node_label: str,
        nodes: Sequence[model.NodeInfo],
        now: float,
        namespace: str | None = None,
    ) -> QueryReport:
        """``query_nodes`` with the counts of series it ignored and the time it took.

        ``namespace`` is the namespace of the policy the query is for: the admin's rules
        are checked for it first, and a refused query is not sent (a BadQuery error).
        Without it, any query is refused while rules are set (fail closed).
        """
        started = time.perf_counter()
        try:
            refused = self.refusal(query, namespace=namespace)
            if refused is not None:
                raise _QueryError(
                    model.QueryErrorKind.BAD_QUERY,
                    f"refused by the cluster's query rules, not sent: {refused}",
                    sent=False,
                )
            if self._metrics is not None:
                self._metrics.prometheus_queries.inc()
            result = self._instant_query(query)
            try:
                mapped = prom_series.map_series(result, node_label=node_label, nodes=nodes)
            except prom_series.BadResultError as e:
                raise _QueryError(model.QueryErrorKind.BAD_RESULT, str(e)) from None
        except _QueryError as failure:
            if self._metrics is not None and failure.sent:  # a refusal is not Prometheus's
                self._metrics.prometheus_errors.labels(kind=failure.kind.value).inc()
            return QueryReport(
                series=model.MetricSeries(
                    values=types.MappingProxyType({}),
                    last_refresh=now,
                    error=failure.kind,
                    error_message=self._scrub(failure.message),
                ),
                series_total=0,
                series_unknown_node=0,
                series_duplicate=0,
                values_dropped=0,
                duration_s=time.perf_counter() - started,
                connect_failed=failure.connect,
            )
        error = mapped.error()
        if error is not None and self._metrics is not None:
            self._metrics.prometheus_errors.labels(kind=error[0].value).inc()
        if mapped.unknown_examples:
            # For the admin's log only: the policy's namespace never sees these labels.
            logger.debug(
                "%d series of query %r name no node by label %r, e.g. %s",
                mapped.unknown,
                query,
                node_label,
                ", ".join(repr(v) for v in mapped.unknown_examples),
            )
        return QueryReport(
            series=model.MetricSeries(
                values=types.MappingProxyType(
                    {
                        node: model.MetricSample(value=v, refreshed_at=now)
                        for node, v in mapped.values.items()
                    }
                ),
                last_refresh=now,
                error=None if error is None else error[0],
                error_message="" if error is None else self._scrub(error[1]),
            ),
            series_total=mapped.series_total,
            series_unknown_node=mapped.unknown,
            series_duplicate=mapped.duplicates,
            values_dropped=mapped.dropped,
            duration_s=time.perf_counter() - started,
            connect_failed=False,
        )

    def query_by_pod(self, query: str, *, limits: prom_http.Limits) -> dict[str, float]:
        """One instant query of the operator's own configuration (never a tenant's: the
        query rules do not apply) whose series carry ``namespace`` and ``pod`` labels:
        each pod's value by "namespace/pod" (several series of one pod are summed; values
        that are not finite and non-negative are left out). Raises ``PodQueryError``
        with a message safe to log."""
        if self._metrics is not None:
            self._metrics.prometheus_queries.inc()
        try:
            result = self._instant_query_with(query, limits)
        except _QueryError as failure:
            if self._metrics is not None:
                self._metrics.prometheus_errors.labels(kind=failure.kind.value).inc()
            raise PodQueryError(f"{failure.kind.value}: {self._scrub(failure.message)}") from None
        found: dict[str, float] = {}
        for series in result if isinstance(result, list) else ():
            labels = series.get("metric") if isinstance(series, dict) else None
            value = series.get("value") if isinstance(series, dict) else None
            if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
                continue
            namespace, pod = labels.get("namespace"), labels.get("pod")
            if not isinstance(namespace, str) or not isinstance(pod, str):
                continue
            try:
                number = float(value[1])
            except (TypeError, ValueError):
                continue
            if math.isfinite(number) and number >= 0:
                key = f"{namespace}/{pod}"
                found[key] = found.get(key, 0.0) + number
        return found

    def ping(self) -> tuple[bool, str]:
        """Whether the query API answers (a trivial query), and a message saying why not."""
        if self._metrics is not None:
            self._metrics.prometheus_queries.inc()
        try:
            self._instant_query("vector(1)")
        except _QueryError as failure:
            return False, self._scrub(failure.message)
        return True, f"Prometheus at {self._display_url} answers queries"

    def _instant_query(self, query: str) -> Any:
        return self._instant_query_with(query, self._config.limits)

    def _instant_query_with(self, query: str, limits: prom_http.Limits) -> Any:
        try:
            return prom_http.instant_query(
                self._session,
                url=self._url,
                query=query,
                timeout_s=self._config.timeout_s,
                deadline_s=self._deadline_s,
                limits=limits,
            )
        except _QueryError:
            raise
        except prom_http.HttpStatusError as e:
            raise self._http_failure(e) from None
        except prom_http.AnswerTooLargeError as e:
            cap = f"{e.limit} series" if e.what == "series" else f"{e.limit // 1024} KiB"
            raise _QueryError(
                model.QueryErrorKind.RESULT_TOO_LARGE,
                f"the answer is larger than the operator's cap ({cap}); return one series"
                " per node, e.g. avg by (node) (...)",
            ) from None
        except prom_http.NotJsonError:
            raise _QueryError(
                model.QueryErrorKind.BAD_RESULT,
                f"Prometheus at {self._display_url} answered with something that is not JSON"
                " (is the URL that of the Prometheus HTTP API?)",
            ) from None
        except prom_http.NoResultError:
            raise _QueryError(
                model.QueryErrorKind.BAD_RESULT,
                f"Prometheus at {self._display_url} answered without a data.result field",
            ) from None
        except prom_http.DeadlineExceededError:
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} unreachable: no complete answer within"
                f" {self._deadline_s:g}s",
            ) from None
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as e:
            message, connect = _describe_unreachable(e, timeout_s=self._config.timeout_s)
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} unreachable: {message}",
                connect=connect,
            ) from None
        except OSError as e:
            # requests raises a bare OSError for a client certificate or key file it cannot
            # find; the message names the path, never the key.
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} unreachable: {e.strerror or e}",
                connect=True,
            ) from None

    def _http_failure(self, e: prom_http.HttpStatusError) -> _QueryError:
        status = e.status
        # Prometheus's own words for the admin's log; the policy gets a scrubbed summary.
        logger.debug(
            "Prometheus answered HTTP %d (%s): %s", status, e.error_type, self._scrub(e.error)
        )
        if status in (400, 422):
            return _QueryError(
                model.QueryErrorKind.BAD_QUERY,
                "Prometheus rejected the query: "
                + scrub_prometheus_error(error_type=e.error_type, error=e.error),
            )
        kind = f" ({e.error_type})" if e.error_type in _ERROR_TYPES else ""
        if status in (401, 403):
            return _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} refused access (HTTP {status}):"
                " check the credentials (bearer token, basic auth, client certificate)"
                " and their permissions",
            )
        hint = ""
        if status == 404:
            hint = ": is the URL that of the Prometheus server (its HTTP API under /api/v1)?"
        elif 300 <= status < 400:
            # Not followed: a redirect could carry the bearer token's queries elsewhere.
            hint = ": a redirect, not followed; set the URL to where it points"
        return _QueryError(
            model.QueryErrorKind.UNREACHABLE,
            f"Prometheus at {self._display_url} answered HTTP {status}{kind}{hint}",
        )

    def _scrub(self, message: str) -> str:
        for token in list(self._auth.recent) if self._auth is not None else []:
            message = message.replace(token, _REDACTED)
        return message


def _redact_url(url: str) -> str:
    """The URL without user info, query or fragment: fit for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
    except ValueError:
        return "<invalid URL>"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")

# Prometheus's errorType vocabulary (web/api/v1): anything else is not repeated.
_ERROR_TYPES = frozenset(
    {"timeout", "canceled", "execution", "bad_data", "internal", "unavailable", "not_found"}
)
# Execution errors whose text is known to carry label sets of the series involved,
# replaced by what they mean (the error names no series, so the author learns no labels).
_EXECUTION_ERRORS = (
    ("many-to-many matching not allowed", "many-to-many matching not allowed: the series"
     " on one side of an operation are not unique for its matching labels"),
    ("multiple matches for labels", "many-to-one matching must be explicit"
     " (group_left/group_right)"),
    ("vector cannot contain metrics with the same labelset", "vector cannot contain metrics"
     " with the same labelset (an aggregation or label_replace made two series equal)"),
    ("too many samples", "the query would load too many samples (Prometheus's limit)"),
    ("query timed out", "the query timed out in Prometheus"),
)  # fmt: skip
_LABEL_SET = re.compile(r"\{[^{}]*\}")
_BRACKETED_LIST = re.compile(r"\[[^\[\]]*\{[^\[\]]*\]")


def scrub_prometheus_error(*, error_type: str, error: str) -> str:
    """A short summary of Prometheus's error for a policy's namespace: label sets removed.

    Known execution errors (which list the label sets of the series involved) become a
    fixed sentence; a ``bad_data`` error (a parse error, a bad parameter: about the
    author's own query, never about series) keeps its text, with any ``{...}`` label set
    replaced by ``{…}``; anything else is reduced to its error type.
    """
    for marker, summary in _EXECUTION_ERRORS:
        if marker in error:
            return summary
    kind = error_type if error_type in _ERROR_TYPES else "error"
    if error_type == "bad_data":
        text = _BRACKETED_LIST.sub("[…]", error)
        text = _LABEL_SET.sub("{…}", text)
        text = " ".join(text.split())
        if len(text) > _DETAIL_LIMIT:
            text = text[: _DETAIL_LIMIT - 3] + "..."
        return f"{kind}: {text}"
    return f"{kind}: Prometheus gave no detail it is safe to repeat here"


def _describe_unreachable(e: Exception, *, timeout_s: float) -> tuple[str, bool]:
    """A short reason for a transport failure, and whether connecting failed at all."""
    reason: BaseException = e
    if e.args and isinstance(e.args[0], urllib3.exceptions.MaxRetryError):
        reason = e.args[0].reason or e
    if isinstance(e, requests.exceptions.RetryError) or isinstance(
        reason, urllib3.exceptions.ResponseError
    ):
        return f"{reason} (after retries)", False
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "cannot resolve the host name", True
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        errno = _ERRNO.search(str(reason))
        return f"connection failed: {errno.group(0) if errno else reason}", True
    if isinstance(e, requests.exceptions.ConnectTimeout) or isinstance(
        reason, urllib3.exceptions.ConnectTimeoutError
    ):
        return f"connect timed out after {timeout_s:g}s", True
    if isinstance(e, requests.exceptions.ReadTimeout) or isinstance(
        reason, urllib3.exceptions.ReadTimeoutError
    ):
        return f"no answer within {timeout_s:g}s", False
    if isinstance(e, requests.exceptions.SSLError):
        return f"TLS error: {reason}", True
    if isinstance(e, requests.exceptions.ConnectionError):
        return f"connection error: {reason}", True
    return f"{type(e).__name__}: {e}", True
