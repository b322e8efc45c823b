"""The metric refresher's data access: Prometheus queries mapped to nodes, and the store.

One instant query per distinct (query, nodeLabel) per refresh, never per pod. Each
result series is matched to a Node by its ``nodeLabel`` value: the node's name, or one of
its addresses once a ``:port`` (``[ipv6]:port`` too) is stripped. Failures are classified
into ``model.QueryErrorKind`` and returned as data; nothing here raises on a bad answer,
and no message ever carries the bearer token.

Blocking (``requests`` underneath): call from a worker thread, never the event loop.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import json
import math
import pathlib
import re
import threading
import time
import types
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import prometheus_api_client.exceptions as prom_exceptions
import prometheus_api_client.prometheus_connect as prom_connect
import requests
import requests.auth
import requests.exceptions
import urllib3.exceptions
import urllib3.util.retry

from metricsched.core import model
from metricsched.edges import observe

_REDACTED = "[REDACTED]"
_DETAIL_LIMIT = 400  # characters of Prometheus's own error text kept in a message


@dataclasses.dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to reach Prometheus. The token is read from ``token_file`` on every request
    (projected service-account tokens rotate) and is never logged or reported."""

    url: str
    token_file: str | None = None
    ca_file: str | None = None
    verify_tls: bool = True
    timeout_s: float = 5.0  # per attempt, connect and read each
    retries: int = 1  # extra attempts on connection errors and 502/503/504


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
    def __init__(self, kind: model.QueryErrorKind, message: str, *, connect: bool = False):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.connect = connect


class _BearerTokenFile(requests.auth.AuthBase):
    """Sets ``Authorization: Bearer <token>`` from a file read fresh for every request."""

    def __init__(self, path: str) -> None:
        self.path = path
        # The last tokens sent, only to scrub them from messages (two: a rotation may
        # happen between a request and the message about its answer).
        self.recent: collections.deque[str] = collections.deque(maxlen=2)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        try:
            token = pathlib.Path(self.path).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"cannot read the bearer token file {self.path}: {e.strerror or e}",
            ) from None
        if not token:
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE, f"the bearer token file {self.path} is empty"
            )
        if token not in self.recent:
            self.recent.append(token)
        request.headers["Authorization"] = f"Bearer {token}"
        return request

    def __repr__(self) -> str:
        return f"<bearer token from {self.path}>"


class PrometheusSource:
    """One Prometheus server behind one ``PrometheusConnect`` (one HTTP connection pool).

    Thread-safe: the source keeps no per-call state and urllib3's pool is thread-safe.
    The worst-case duration of a call is ``(retries + 1) * timeout_s`` plus a short
    backoff; ``Retry-After`` headers are ignored so that a proxy cannot stall refreshes.
    """

    def __init__(self, config: PrometheusConfig, *, metrics: observe.Metrics | None = None):
        self._config = config
        self._metrics = metrics
        self._auth = _BearerTokenFile(config.token_file) if config.token_file else None
        session = requests.Session()
        session.verify = config.ca_file or config.verify_tls
        session.auth = self._auth  # requests applies it to every request of the session
        retry = urllib3.util.retry.Retry(
            total=config.retries,
            backoff_factor=0.2,
            status_forcelist=[502, 503, 504],
            respect_retry_after_header=False,
        )
        self._client = prom_connect.PrometheusConnect(
            url=config.url.rstrip("/"),
            retry=retry,
            session=session,
            # Annotated int upstream; requests takes any number of seconds.
            timeout=config.timeout_s,  # type: ignore[arg-type]
        )
        self._display_url = _redact_url(config.url)

    def close(self) -> None:
        self._client.close()

    def query_nodes(
        self,
        query: str,
        *,
        node_label: str,
        nodes: Sequence[model.NodeInfo],
        now: float,
    ) -> model.MetricSeries:
        """Run one instant query and return its values by node (errors classified)."""
        return self.query_nodes_report(query, node_label=node_label, nodes=nodes, now=now).series

    def query_nodes_report(
        self,
        query: str,
        *,
        node_label: str,
        nodes: Sequence[model.NodeInfo],
        now: float,
    ) -> QueryReport:
        """``query_nodes`` with the counts of series it ignored and the time it took."""
        started = time.perf_counter()
        if self._metrics is not None:
            self._metrics.prometheus_queries.inc()
        try:
            result = self._custom_query(query)
            mapped = _map_series(result, node_label=node_label, nodes=nodes)
        except _QueryError as failure:
            if self._metrics is not None:
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

    def ping(self) -> tuple[bool, str]:
        """Whether the query API answers (a trivial query), and a message saying why not."""
        if self._metrics is not None:
            self._metrics.prometheus_queries.inc()
        try:
            self._custom_query("vector(1)")
        except _QueryError as failure:
            return False, self._scrub(failure.message)
        return True, f"Prometheus at {self._display_url} answers queries"

    def _custom_query(self, query: str) -> Any:
        try:
            return self._client.custom_query(query=query)
        except _QueryError:
            raise
        except prom_exceptions.PrometheusApiClientException as e:
            raise self._http_failure(e) from None
        except requests.exceptions.JSONDecodeError:
            raise _QueryError(
                model.QueryErrorKind.BAD_RESULT,
                f"Prometheus at {self._display_url} answered with something that is not JSON"
                " (is the URL that of the Prometheus HTTP API?)",
            ) from None
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as e:
            message, connect = _describe_unreachable(e, timeout_s=self._config.timeout_s)
            raise _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} unreachable: {message}",
                connect=connect,
            ) from None
        except (KeyError, TypeError, ValueError):  # 200 without a data.result envelope
            raise _QueryError(
                model.QueryErrorKind.BAD_RESULT,
                f"Prometheus at {self._display_url} answered without a data.result field",
            ) from None

    def _http_failure(self, e: prom_exceptions.PrometheusApiClientException) -> _QueryError:
        status, detail = _parse_status_error(str(e))
        if status in (400, 422):
            return _QueryError(
                model.QueryErrorKind.BAD_QUERY, f"Prometheus rejected the query: {detail}"
            )
        if status in (401, 403):
            return _QueryError(
                model.QueryErrorKind.UNREACHABLE,
                f"Prometheus at {self._display_url} refused access (HTTP {status}):"
                f" check the bearer token and its permissions: {detail}",
            )
        shown = "an unexpected status" if status is None else f"HTTP {status}"
        if status == 404:
            detail = "is the URL that of the Prometheus server (its HTTP API under /api/v1)?"
        return _QueryError(
            model.QueryErrorKind.UNREACHABLE,
            f"Prometheus at {self._display_url} answered {shown}"
            + (f": {detail}" if detail else ""),
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


_STATUS_ERROR = re.compile(r"^HTTP Status Code (\d+) \((.*)\)$", re.DOTALL)
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")


def _parse_status_error(text: str) -> tuple[int | None, str]:
    """Status and Prometheus's ``error`` text from prometheus-api-client's exception.

    The library formats it as ``HTTP Status Code 400 (b'{"status":"error",...}')``.
    """
    match = _STATUS_ERROR.match(text)
    if match is None:
        return None, text[:_DETAIL_LIMIT]
    status = int(match.group(1))
    raw = match.group(2)
    try:
        content = ast.literal_eval(raw)
        body = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)
    except (ValueError, SyntaxError):
        body = raw
    try:
        envelope = json.loads(body)
    except ValueError:
        return status, body.strip()[:_DETAIL_LIMIT]
    if isinstance(envelope, dict) and envelope.get("error"):
        error_type = envelope.get("errorType")
        detail = str(envelope["error"])
        if error_type:
            detail = f"{error_type}: {detail}"
        return status, detail[:_DETAIL_LIMIT]
    return status, body.strip()[:_DETAIL_LIMIT]


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


# --- series to nodes -------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _MappedSeries:
    """The outcome of ``_map_series``: values by node and what did not make it."""

    values: dict[model.NodeName, float]
    series_total: int = 0
    unknown: int = 0
    duplicates: int = 0
    dropped: int = 0
    unknown_examples: list[str] = dataclasses.field(default_factory=list)
    labels_seen: set[str] = dataclasses.field(default_factory=set)
    node_label: str = ""

    def error(self) -> tuple[model.QueryErrorKind, str] | None:
        """EMPTY_RESULT / BAD_RESULT when no known node got a usable value."""
        if self.values:
            return None
        if self.dropped:
            return (
                model.QueryErrorKind.BAD_RESULT,
                f"all {self.dropped} series for known nodes had non-finite or unparsable"
                " values (NaN, ±Inf)",
            )
        if self.series_total == 0:
            return model.QueryErrorKind.EMPTY_RESULT, "the query returned no series"
        if self.unknown_examples:
            examples = ", ".join(repr(v) for v in self.unknown_examples)
            hint = f"label {self.node_label!r} values: {examples}"
        else:
            seen = ", ".join(sorted(self.labels_seen)) or "none"
            hint = f"no series has label {self.node_label!r} (labels seen: {seen})"
        return (
            model.QueryErrorKind.EMPTY_RESULT,
            f"none of the {self.series_total} series names a known node ({hint})",
        )


def _map_series(
    result: object,
    *,
    node_label: str,
    nodes: Sequence[model.NodeInfo],
) -> _MappedSeries:
    """Map an instant-vector result (``data.result``) to finite values by node.

    A series belongs to a node when its ``node_label`` value is the node's name or one of
    its addresses, either as is or with a ``:port`` / ``[ipv6]:port`` suffix removed.
    Several series for one node (an unaggregated query, or a target scraped by name and
    by address) are counted as duplicates and one is kept deterministically: a series
    naming the node exactly beats one matched through an address, then the smallest
    label set in sorted order. Not the max or min: the store does not know the metric's
    goal, and a value that does not depend on Prometheus's result order stays stable
    from one refresh to the next instead of flapping.

    Raises ``_QueryError(BAD_RESULT)`` for a result that is not an instant vector.
    """
    if not isinstance(result, list):
        raise _QueryError(
            model.QueryErrorKind.BAD_RESULT,
            f"unexpected result of type {type(result).__name__}, expected an instant vector",
        )
    if result and not all(isinstance(item, dict) for item in result):
        raise _QueryError(
            model.QueryErrorKind.BAD_RESULT,
            "the query returned a scalar or a string, not an instant vector:"
            " return one series per node, e.g. avg by (node) (...)",
        )
    if any("values" in item and "value" not in item for item in result):
        raise _QueryError(
            model.QueryErrorKind.BAD_RESULT,
            "the query returned a range vector (matrix), not an instant vector:"
            " wrap the range selector in a function such as avg_over_time() or rate()",
        )

    by_name: dict[str, model.NodeName] = {n.name: n.name for n in nodes}
    by_address: dict[str, model.NodeName] = {}
    for info in sorted(nodes, key=lambda n: n.name):
        for address in info.addresses:
            by_address.setdefault(address, info.name)

    mapped = _MappedSeries(values={}, series_total=len(result), node_label=node_label)
    chosen: dict[model.NodeName, tuple[int, tuple[tuple[str, str], ...]]] = {}
    for item in result:
        labels = item.get("metric")
        if not isinstance(labels, dict):
            raise _QueryError(
                model.QueryErrorKind.BAD_RESULT, "a result series has no label set ('metric')"
            )
        mapped.labels_seen.update(str(k) for k in labels)
        label_value = labels.get(node_label)
        match = _match_node(label_value, by_name, by_address) if label_value else None
        if match is None:
            mapped.unknown += 1
            if label_value and len(mapped.unknown_examples) < 3:
                mapped.unknown_examples.append(str(label_value))
            continue
        node, exact = match
        value = _sample_value(item.get("value"))
        if value is None:
            mapped.dropped += 1
            continue
        rank = (0 if exact else 1, tuple(sorted((str(k), str(v)) for k, v in labels.items())))
        if node in chosen:
            mapped.duplicates += 1
            if rank >= chosen[node]:
                continue
        chosen[node] = rank
        mapped.values[node] = value
    return mapped


def _match_node(
    value: object,
    by_name: Mapping[str, model.NodeName],
    by_address: Mapping[str, model.NodeName],
) -> tuple[model.NodeName, bool] | None:
    """The node a label value names, and whether it names it exactly (not via an address)."""
    if not isinstance(value, str):
        return None
    if value in by_name:
        return by_name[value], True
    if value in by_address:
        return by_address[value], False
    host = _strip_port(value)
    if host in by_name:
        return by_name[host], False
    if host in by_address:
        return by_address[host], False
    return None


def _strip_port(value: str) -> str:
    """``host:port`` → ``host``; ``[v6]:port`` and ``[v6]`` → ``v6``; bare IPv6 unchanged."""
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    host, sep, port = value.rpartition(":")
    if sep and host and ":" not in host and port.isdigit():
        return host
    return value


def _sample_value(raw: object) -> float | None:
    """A finite float from ``[timestamp, "value"]``; None for NaN, ±Inf or garbage."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    text = raw[1]
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# --- the store -------------------------------------------------------------------------


class MetricStore:
    """The latest ``MetricSeries`` of every policy metric, shared between threads.

    Copy-on-write: every change builds a new dict and publishes it behind a read-only
    proxy, so ``view()`` is a reference read and a cycle sees one consistent snapshot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: Mapping[model.MetricKey, model.MetricSeries] = types.MappingProxyType({})
        self._version = 0

    @property
    def version(self) -> int:
        """Increments whenever values or error states change (not on mere re-confirmation)."""
        return self._version

    def view(self) -> model.MetricView:
        return self._data

    def update(self, key: model.MetricKey, series: model.MetricSeries) -> bool:
        """Store the outcome of a refresh; return whether the version changed.

        A failed refresh keeps the previous samples with their old ``refreshed_at``, so
        they age out by ``maxMetricAge`` instead of looking fresh; it only records the
        attempt time and the error. A successful refresh replaces the values.
        """
        with self._lock:
            previous = self._data.get(key)
            if series.error is not None and previous is not None:
                series = model.MetricSeries(
                    values=previous.values,
                    last_refresh=series.last_refresh,
                    error=series.error,
                    error_message=series.error_message,
                )
            changed = previous is None or _signature(previous) != _signature(series)
            data = dict(self._data)
            data[key] = series
            self._data = types.MappingProxyType(data)
            if changed:
                self._version += 1
            return changed

    def retain(self, keys: Iterable[model.MetricKey]) -> int:
        """Drop every metric not in ``keys`` (deleted policies or metrics); return how many."""
        keep = set(keys)
        with self._lock:
            data = {k: v for k, v in self._data.items() if k in keep}
            removed = len(self._data) - len(data)
            if removed:
                self._data = types.MappingProxyType(data)
                self._version += 1
            return removed

    def ages(self, now: float) -> dict[tuple[str, str], float]:
        """Age of each metric's freshest value, keyed (policy, metric), for observe.Metrics."""
        return {
            (key.policy, key.metric): now - max(s.refreshed_at for s in series.values.values())
            for key, series in self._data.items()
            if series.values
        }


def _signature(series: model.MetricSeries) -> tuple[object, ...]:
    # Values and error kind, not timestamps: a refresh that confirms the same numbers does
    # not wake every pending pod, but a recovery (error -> None) does.
    return ({node: s.value for node, s in series.values.items()}, series.error)


# --- one refresh of all policies -------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class RefreshResult:
    """What one refresh found for one metric of one policy (for status and events)."""

    policy: model.PolicyKey
    metric: str
    nodes_reporting: int
    nodes_missing: int
    error: model.QueryErrorKind | None
    error_message: str
    duration_s: float
    series_unknown_node: int
    series_duplicate: int
    queried: bool  # this result sent the query; False when it shared or skipped one
    finished_at: float  # unix time the refresh of this metric ended (``now`` + duration)


QueryGroup = tuple[tuple[str, str], list[tuple[model.Policy, model.MetricSpec]]]


def query_groups(policies: Sequence[model.Policy]) -> list[QueryGroup]:
    """The Prometheus metrics of ``policies`` grouped by distinct (query, nodeLabel): one
    query serves every metric of the group."""
    groups: dict[tuple[str, str], list[tuple[model.Policy, model.MetricSpec]]] = {}
    for policy in policies:
        for spec in policy.metrics:
            if isinstance(spec.source, model.PrometheusSource):
                key = (spec.source.query, spec.source.node_label)
                groups.setdefault(key, []).append((policy, spec))
    return list(groups.items())


def apply_report(
    *,
    store: MetricStore,
    members: Sequence[tuple[model.Policy, model.MetricSpec]],
    report: QueryReport,
    nodes: Sequence[model.NodeInfo],
    now: float,
    sent: bool,
    metrics: observe.Metrics | None = None,
) -> list[RefreshResult]:
    """Store one query's answer for every metric of its group; one result per metric."""
    reporting = len(report.series.values)
    results: list[RefreshResult] = []
    for index, (policy, spec) in enumerate(members):
        store.update(model.MetricKey(policy=policy.key, metric=spec.name), report.series)
        if metrics is not None and sent:
            metrics.metric_refresh_duration.labels(policy=policy.key, metric=spec.name).observe(
                report.duration_s
            )
        results.append(
            RefreshResult(
                policy=policy.key,
                metric=spec.name,
                nodes_reporting=reporting,
                nodes_missing=max(len(nodes) - reporting, 0),
                error=report.series.error,
                error_message=report.series.error_message,
                duration_s=report.duration_s,
                series_unknown_node=report.series_unknown_node,
                series_duplicate=report.series_duplicate,
                queried=sent and index == 0,
                finished_at=now + report.duration_s,
            )
        )
    return results


def refresh_policy_metrics(
    *,
    source: PrometheusSource,
    store: MetricStore,
    policies: Sequence[model.Policy],
    nodes: Sequence[model.NodeInfo],
    now: float,
    metrics: observe.Metrics | None = None,
) -> list[RefreshResult]:
    """Refresh every Prometheus metric of ``policies`` into ``store``, one query at a time.

    Exactly one query per distinct (query, nodeLabel), shared by all metrics using it.
    Once Prometheus proves unreachable (connection refused, connect timeout), the
    remaining queries are not attempted in this round: they would each wait out the
    timeout for the same answer. Their metrics get the same UNREACHABLE error.
    """
    results: list[RefreshResult] = []
    down: QueryReport | None = None
    for (query, node_label), members in query_groups(policies):
        if down is None:
            report = source.query_nodes_report(query, node_label=node_label, nodes=nodes, now=now)
            sent = True
            if report.connect_failed:
                down = report
        else:
            report = not_attempted(down)
            sent = False
        results.extend(
            apply_report(
                store=store,
                members=members,
                report=report,
                nodes=nodes,
                now=now,
                sent=sent,
                metrics=metrics,
            )
        )
    return results


def not_attempted(down: QueryReport) -> QueryReport:
    """The report of a query skipped because Prometheus just proved unreachable."""
    return dataclasses.replace(
        down,
        series=dataclasses.replace(
            down.series, error_message=f"not attempted: {down.series.error_message}"
        ),
        duration_s=0.0,
    )
