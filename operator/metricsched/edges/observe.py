"""The scheduler's own observability: Prometheus metrics, /healthz, /readyz and /metrics.

Metrics live on a dedicated ``prometheus_client.CollectorRegistry`` held by a ``Metrics``
object (one per operator; tests make their own), so nothing leaks into the client
library's global registry. ``serve`` runs a stdlib ``HTTPServer`` on a daemon thread (two
when the metrics and health ports differ), each handing connections to a bounded pool of
``MAX_HANDLER_THREADS`` threads with at most ``MAX_WAITING`` connections waiting for one;
past that a connection is closed at once (counted), so a flood of connections costs a
bounded number of threads. The listen backlog is ``LISTEN_BACKLOG``; a connection that
sends nothing is let go after ``IDLE_TIMEOUT_S``. With ``secure`` (see
``metrics_auth``), /metrics is served over HTTPS to authenticated, authorised callers only,
and the probes stay plain HTTP on the health port.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import prometheus_client
import prometheus_client.core
import prometheus_client.registry

from metricsched.edges import metrics_auth

logger = logging.getLogger(__name__)

ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error", "wait")
API_WRITE_KINDS = ("binding", "event", "status", "eviction")
# Rebalancing: what became of each pod a policy moved (or, in DryRun, would have moved).
REBALANCE_RESULTS = ("Evicted", "WouldEvict", "Blocked", "Gone", "Fenced", "Forbidden", "Failed")
SHADOW_RESULTS = ("agree", "disagree", "unplaceable")

# From 1 ms: a cycle over a warm cache takes milliseconds; seconds mean trouble.
ATTEMPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Creation to bind: from 10 ms (idle scheduler) to ~10 min (waiting for metrics or room).
POD_SCHEDULING_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
REFRESH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# (policy, metric) -> age in seconds of the freshest value; read at scrape time.
AgeSource = Callable[[], Mapping[tuple[str, str], float]]
# policy -> its maxMetricAge in seconds; read at scrape time.
MaxAgeSource = Callable[[], Mapping[str, float]]
_K = TypeVar("_K")


class Metrics:
    """Every metric the operator exports, registered on one private registry."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.attempts = prometheus_client.Counter(
            "metricsched_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error, wait).",
            ["result"],
            registry=r,
        )
        self.attempt_duration = prometheus_client.Histogram(
            "metricsched_scheduling_attempt_duration_seconds",
            "Duration of one scheduling attempt: policy, filters, scores, decision.",
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_duration = prometheus_client.Histogram(
            "metricsched_pod_scheduling_duration_seconds",
            "Time from pod creation to its successful binding.",
            buckets=POD_SCHEDULING_BUCKETS,
            registry=r,
        )
        self.pending_pods = prometheus_client.Gauge(
            "metricsched_pending_pods",
            "Pods waiting in the scheduling queue.",
            registry=r,
        )
        self.oldest_pending_age = prometheus_client.Gauge(
            "metricsched_oldest_pending_pod_age_seconds",
            "Age (since its creation) of the oldest pod waiting in the scheduling queue; "
            "0 when none waits.",
            registry=r,
        )
        self.metric_refresh_duration = prometheus_client.Histogram(
            "metricsched_metric_refresh_duration_seconds",
            "Duration of the Prometheus query that refreshed a policy's metric.",
            ["policy", "metric"],
            buckets=REFRESH_BUCKETS,
            registry=r,
        )
        self.prometheus_errors = prometheus_client.Counter(
            "metricsched_prometheus_errors_total",
            "Failed Prometheus queries by kind (Unreachable, BadQuery, EmptyResult, BadResult).",
            ["kind"],
            registry=r,
        )
        self.prometheus_queries = prometheus_client.Counter(
            "metricsched_prometheus_queries_total",
            "Queries sent to Prometheus.",
            registry=r,
        )
        self.fallback_decisions = prometheus_client.Counter(
            "metricsched_fallback_decisions_total",
            "Decisions taken by a policy's fallback strategy, by strategy and reason kind.",
            ["strategy", "reason_kind"],
            registry=r,
        )
        self.policy_fallback = prometheus_client.Gauge(
            "metricsched_policy_fallback_active",
            "1 while a policy's latest decision was taken by its fallback strategy (metrics "
            "unavailable, stale or too few nodes reporting), 0 once its metrics decide again.",
            ["policy"],
            registry=r,
        )
        self.binding_errors = prometheus_client.Counter(
            "metricsched_binding_errors_total",
            "Bindings that did not bind, by result (AlreadyBound, Gone, Conflict, ...).",
            ["result"],
            registry=r,
        )
        self.events_dropped = prometheus_client.Counter(
            "metricsched_events_dropped_total",
            "Kubernetes Events not posted because the event rate limit was exhausted.",
            registry=r,
        )
        self.api_writes = prometheus_client.Counter(
            "metricsched_api_writes_total",
            "Writes sent to the Kubernetes API by kind (binding, event, status, eviction).",
            ["kind"],
            registry=r,
        )
        self.watch_restarts = prometheus_client.Counter(
            "metricsched_watch_restarts_total",
            "Times the watches (kopf) failed and were restarted.",
            registry=r,
        )
        self.task_restarts = prometheus_client.Counter(
            "metricsched_task_restarts_total",
            "Times a long-lived task of the operator ended unexpectedly and was restarted.",
            ["task"],
            registry=r,
        )
        self.informer_lists = prometheus_client.Counter(
            "metricsched_informer_lists_total",
            "Complete LISTs of the cluster-state informer by kind (1 at start; more are re-lists).",
            ["kind"],
            registry=r,
        )
        self.pod_usage_errors = prometheus_client.Counter(
            "metricsched_pod_usage_errors_total",
            "Failed answers of the per-pod usage queries (the Measured estimate keeps the last).",
            registry=r,
        )
        self.pod_usage_pods = prometheus_client.Gauge(
            "metricsched_pod_usage_pods",
            "Pods in the last answer of the per-pod usage queries.",
            registry=r,
        )
        self.pod_usage_workloads = prometheus_client.Gauge(
            "metricsched_pod_usage_workloads",
            "Workloads with settled pods measured in the last answer (the Measured estimate).",
            registry=r,
        )
        self.objects_skipped = prometheus_client.Counter(
            "metricsched_objects_skipped_total",
            "Objects from the API the operator could not read and left out, by kind "
            "(logged with the reason; the watch goes on).",
            ["kind"],
            registry=r,
        )
        self.relists = prometheus_client.Counter(
            "metricsched_reconcile_removed_total",
            "Objects removed by the re-list reconciliation (deleted while nobody watched).",
            ["kind"],
            registry=r,
        )
        self.leader = prometheus_client.Gauge(
            "metricsched_leader",
            "1 while this replica holds the scheduling lease (or runs without election).",
            registry=r,
        )
        self.shadow_evaluations = prometheus_client.Counter(
            "metricsched_shadow_evaluations_total",
            "Shadow mode: pods placed by another scheduler and evaluated, by policy and "
            "result (agree, disagree, unplaceable).",
            ["policy", "result"],
            registry=r,
        )
        self.shadow_agreement = prometheus_client.Gauge(
            "metricsched_shadow_agreement_ratio",
            "Shadow mode: share of the latest evaluated pods placed where the policy would have.",
            ["policy"],
            registry=r,
        )
        self.shadow_advantage = prometheus_client.Gauge(
            "metricsched_shadow_metric_advantage_ratio",
            "Shadow mode: how much better the policy's nodes are by a metric than where the "
            "latest pods went, as a fraction of the latter (0.23 = 23 % better by its goal).",
            ["policy", "metric"],
            registry=r,
        )
        self._shadow_metrics: dict[str, set[str]] = {}  # policy -> metrics with a series
        self.shadow_dropped = prometheus_client.Counter(
            "metricsched_shadow_dropped_total",
            "Shadow mode: bound pods not evaluated because the evaluation queue was full.",
            registry=r,
        )
        self.webhook_admissions = prometheus_client.Counter(
            "metricsched_webhook_admissions_total",
            "Pods the namespace opt-in webhook was asked about, by result (Assigned: given "
            "this install's schedulerName; the others say why a pod was left as it came; "
            "Error: the webhook failed and let the pod through unchanged).",
            ["result"],
            registry=r,
        )
        self.rebalance_evictions = prometheus_client.Counter(
            "metricsched_rebalance_evictions_total",
            "Rebalancing: pods a policy moved off nodes past its trigger, by policy and result "
            "(Evicted, WouldEvict in DryRun, Blocked by a PodDisruptionBudget, Gone, Fenced, "
            "Forbidden, Failed).",
            ["policy", "result"],
            registry=r,
        )
        self.rebalance_nodes_outside = prometheus_client.Gauge(
            "metricsched_rebalance_nodes_outside",
            "Rebalancing: nodes past a policy's trigger at its latest pass.",
            ["policy"],
            registry=r,
        )
        self.rebalance_nodes_due = prometheus_client.Gauge(
            "metricsched_rebalance_nodes_due",
            "Rebalancing: nodes past a policy's trigger for a whole window at its latest pass.",
            ["policy"],
            registry=r,
        )
        self.rebalance_skipped = prometheus_client.Counter(
            "metricsched_rebalance_skipped_total",
            "Rebalancing: pods on nodes due that stayed, by policy and reason "
            "(TOO_YOUNG, NODE_LIMIT, TOTAL_LIMIT, NO_BETTER_NODE, ...).",
            ["policy", "reason"],
            registry=r,
        )
        self._rebalance_policies: set[str] = set()
        self._rebalance_skips: dict[str, set[str]] = {}
        # Known label values start at 0 so rate() and absent() behave from the first scrape.
        for result in ATTEMPT_RESULTS:
            self.attempts.labels(result=result)
        for kind in API_WRITE_KINDS:
            self.api_writes.labels(kind=kind)
        self._ages = _AgeCollector()
        r.register(self._ages)
        # (policy, metric) pairs with labelled series, so a deleted policy's can be removed.
        self._policy_lock = threading.Lock()
        self._policy_metrics: set[tuple[str, str]] = set()
        self._fallback_policies: set[str] = set()

    def set_shadow_summary(
        self, *, policy: str, agreement: float, advantages: Mapping[str, float]
    ) -> None:
        """Export a shadow policy's agreement ratio and per-metric advantage ratios."""
        self.shadow_agreement.labels(policy=policy).set(agreement)
        for metric, ratio in advantages.items():
            self.shadow_advantage.labels(policy=policy, metric=metric).set(ratio)
        self._shadow_metrics.setdefault(policy, set()).update(advantages)

    def forget_shadow(self, *, policy: str) -> None:
        """Drop a deleted (or no longer shadow) policy's shadow series."""
        with contextlib.suppress(KeyError):
            self.shadow_agreement.remove(policy)
        for metric in self._shadow_metrics.pop(policy, set()):
            with contextlib.suppress(KeyError):
                self.shadow_advantage.remove(policy, metric)
        for result in SHADOW_RESULTS:
            with contextlib.suppress(KeyError):
                self.shadow_evaluations.remove(policy, result)

    def rebalance_policy(self, policy: str) -> None:
        """Start a rebalancing policy's result series at 0 (remembered for forgetting)."""
        if policy in self._rebalance_policies:
            return
        self._rebalance_policies.add(policy)
        for result in REBALANCE_RESULTS:
            self.rebalance_evictions.labels(policy=policy, result=result)

    def forget_rebalance(self, policy: str) -> None:
        """Drop the rebalancing series of a deleted policy, or one whose rebalance is off."""
        self._rebalance_policies.discard(policy)
        for result in REBALANCE_RESULTS:
            with contextlib.suppress(KeyError):
                self.rebalance_evictions.remove(policy, result)
        for gauge in (self.rebalance_nodes_outside, self.rebalance_nodes_due):
            with contextlib.suppress(KeyError):
                gauge.remove(policy)
        for reason in self._rebalance_skips.pop(policy, set()):
            with contextlib.suppress(KeyError):
                self.rebalance_skipped.remove(policy, reason)

    def count_rebalance_skip(self, *, policy: str, reason: str) -> None:
        """One pod on a node due that stayed, and why."""
        self._rebalance_skips.setdefault(policy, set()).add(reason)
        self.rebalance_skipped.labels(policy=policy, reason=reason).inc()

    def set_metric_age_source(
        self, source: AgeSource | None, max_ages: MaxAgeSource | None = None
    ) -> None:
        """Export ``metricsched_metric_age_seconds`` from ``source``, read at scrape time,
        and beside each age its policy's maxMetricAge from ``max_ages``
        (``metricsched_metric_max_age_seconds``, same labels: an alert compares the two).

        The age is computed when scraped (e.g. from ``MetricStore.ages``), so it keeps
        growing while refreshes fail instead of freezing at the last value set.
        """
        self._ages.source = source
        self._ages.max_ages = max_ages

    def set_policy_fallback(self, *, policy: str, active: bool) -> None:
        """Whether ``policy``'s latest decision was taken by its fallback strategy."""
        with self._policy_lock:
            self._fallback_policies.add(policy)
        self.policy_fallback.labels(policy=policy).set(1 if active else 0)

    def observe_refresh(self, *, policy: str, metric: str, seconds: float) -> None:
        """Record one refresh of a policy's metric (its per-policy series is remembered
        so that ``forget_policy`` can remove it)."""
        with self._policy_lock:
            self._policy_metrics.add((policy, metric))
        self.metric_refresh_duration.labels(policy=policy, metric=metric).observe(seconds)

    def forget_policy_metric(self, *, policy: str, metric: str) -> None:
        """Drop the labelled series of a metric whose policy (or metric entry) is gone."""
        with self._policy_lock:
            self._policy_metrics.discard((policy, metric))
        with contextlib.suppress(KeyError):
            self.metric_refresh_duration.remove(policy, metric)

    def forget_policy(self, policy: str) -> int:
        """Drop every per-policy series of a deleted policy (``"namespace/name"``); return
        how many metrics of it had series."""
        with self._policy_lock:
            gone = [pm for pm in self._policy_metrics if pm[0] == policy]
            had_fallback = policy in self._fallback_policies
            self._fallback_policies.discard(policy)
        if had_fallback:
            with contextlib.suppress(KeyError):
                self.policy_fallback.remove(policy)
        for _, metric in gone:
            self.forget_policy_metric(policy=policy, metric=metric)
        return len(gone)

    def retain_policy_metrics(self, keep: Iterable[tuple[str, str]]) -> int:
        """Drop the per-policy series of every (policy, metric) not in ``keep`` (deleted
        policies, metric entries removed from a spec); return how many."""
        wanted = set(keep)
        with self._policy_lock:
            gone = [pm for pm in self._policy_metrics if pm not in wanted]
        for policy, metric in gone:
            self.forget_policy_metric(policy=policy, metric=metric)
        return len(gone)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return prometheus_client.generate_latest(self.registry)


class _AgeCollector(prometheus_client.registry.Collector):
    def __init__(self) -> None:
        self.source: AgeSource | None = None
        self.max_ages: MaxAgeSource | None = None

    def collect(self) -> Iterable[prometheus_client.core.Metric]:
        family = prometheus_client.core.GaugeMetricFamily(
            "metricsched_metric_age_seconds",
            "Age of the freshest value of a policy's metric (time since the last refresh"
            " that returned it).",
            labels=["policy", "metric"],
        )
        limits = prometheus_client.core.GaugeMetricFamily(
            "metricsched_metric_max_age_seconds",
            "The policy's maxMetricAge, beside each metric's age: a metric older than this"
            " is stale and its policy places pods by its fallback.",
            labels=["policy", "metric"],
        )
        ages = _call(self.source, "metric age source") if self.source is not None else {}
        max_ages = _call(self.max_ages, "max age source") if self.max_ages is not None else {}
        for (policy, metric), age in sorted(ages.items()):
            family.add_metric([policy, metric], age)
            if policy in max_ages:
                limits.add_metric([policy, metric], max_ages[policy])
        yield family
        yield limits


def _call(source: Callable[[], Mapping[_K, float]], what: str) -> Mapping[_K, float]:
    try:
        return source()
    except Exception:  # a scrape must never fail because of a callback
        logger.warning("%s failed", what, exc_info=True)
        return {}


# --- health ----------------------------------------------------------------------------


class HealthState:
    """What /healthz and /readyz report; updated by the operator, read by the server.

    Liveness: the operator loop calls ``beat()`` regularly; a heartbeat older than
    ``max_heartbeat_age_s`` means the loop is stuck and the pod should be restarted.
    Readiness is per subsystem (the operator's start-up, kopf's watches, each informer
    kind, the cluster state's sync): ``set_ready(False, reason, subsystem=...)`` blocks it
    until the same subsystem calls ``set_ready(True)``, so one subsystem recovering never
    hides another that still fails (no last writer wins). /readyz answers 503 with every
    blocking reason while any is set.
    """

    def __init__(
        self,
        *,
        max_heartbeat_age_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._max_age = max_heartbeat_age_s
        self._last_beat = clock()  # start-up counts as a beat: a grace period
        self._blocked: dict[str, str] = {"operator": "starting: caches not synced yet"}
        self._ready_reason = "ready"

    def beat(self) -> None:
        with self._lock:
            self._last_beat = self._clock()

    def set_ready(self, ready: bool, reason: str = "", *, subsystem: str = "operator") -> None:
        with self._lock:
            if ready:
                self._blocked.pop(subsystem, None)
                self._ready_reason = reason or "ready"
            else:
                self._blocked[subsystem] = reason or "not ready"

    def liveness(self) -> tuple[bool, str]:
        with self._lock:
            age = self._clock() - self._last_beat
        if age <= self._max_age:
            return True, f"ok: last heartbeat {age:.1f}s ago"
        return False, f"operator loop stalled: last heartbeat {age:.1f}s ago (> {self._max_age:g}s)"

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            if not self._blocked:
                return True, self._ready_reason
            return False, "; ".join(self._blocked[k] for k in sorted(self._blocked))


# --- HTTP server -----------------------------------------------------------------------

MAX_HANDLER_THREADS = 8  # per server (port)
MAX_WAITING = 64  # accepted connections waiting for a handler thread, per server
LISTEN_BACKLOG = 128
IDLE_TIMEOUT_S = 10.0  # per read or write: a probe answers in milliseconds

_Response = tuple[int, str, bytes]  # status, content type, body
_Route = Callable[[], _Response]

_TEXT = "text/plain; charset=utf-8"


def _probe(check: Callable[[], tuple[bool, str]]) -> _Route:
    def route() -> _Response:
        ok, reason = check()
        return (200 if ok else 503), _TEXT, (reason + "\n").encode()

    return route


def _handler_class(
    routes: Mapping[str, _Route], guard: metrics_auth.Guard | None = None
) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "metricsched"
        timeout = IDLE_TIMEOUT_S  # a client that stalls (or never finishes a TLS handshake)

        def setup(self) -> None:
            super().setup()
            if isinstance(self.request, ssl.SSLSocket):
                self.request.do_handshake()

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            route = routes.get(path)
            denial = guard(self.headers.get("Authorization"), path) if guard and route else None
            if denial is not None:
                status, ctype, body = denial.status, _TEXT, (denial.reason + "\n").encode()
            elif route is None:
                status, ctype, body = 404, _TEXT, b"not found\n"
            else:
                try:
                    status, ctype, body = route()
                except Exception:
                    logger.exception("HTTP handler for %s failed", self.path)
                    status, ctype, body = 500, _TEXT, b"internal error\n"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("http: " + format, *args)

    return Handler


class _Server(http.server.HTTPServer):
    """Connections are handled by at most ``max_threads`` threads (started as needed);
    at most ``max_waiting`` wait for one, and any more are closed at once."""

    request_queue_size = LISTEN_BACKLOG
    max_threads = MAX_HANDLER_THREADS
    max_waiting = MAX_WAITING

    def __init__(self, *args: object, **kwargs: object) -> None:
        # Bounded by admission (``_admitted``), not by the queue: a connection counts from
        # its acceptance until its handler is done, whether a thread has taken it yet.
        # Set before binding: a port in use closes the server inside ``__init__``.
        self._waiting: queue.SimpleQueue[tuple[socket.socket, object] | None] = queue.SimpleQueue()
        self._pool_lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        self._admitted = 0  # connections being handled or waiting
        self.shed = 0  # connections closed unserved because the pool was full
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self._pool_lock:
            admit = self._admitted < self.max_threads + self.max_waiting
            if admit:
                self._admitted += 1
                if len(self._workers) < min(self.max_threads, self._admitted):
                    worker = threading.Thread(
                        target=self._work,
                        name=f"metricsched-http-{self.server_address[1]}-{len(self._workers)}",
                        daemon=True,
                    )
                    self._workers.append(worker)
                    worker.start()
            else:
                self.shed += 1
        if not admit:
            logger.debug("http: %s dropped: every handler thread is busy", client_address)
            self.shutdown_request(request)
            return
        self._waiting.put((request, client_address))

    def _work(self) -> None:
        while True:
            item = self._waiting.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                with self._pool_lock:
                    self._admitted -= 1

    @property
    def handler_threads(self) -> int:
        with self._pool_lock:
            return len(self._workers)

    def server_close(self) -> None:
        super().server_close()
        with self._pool_lock:
            workers = list(self._workers)
        for _ in workers:
            self._waiting.put(None)

    def handle_error(self, request: object, client_address: object) -> None:
        logger.debug("http: request from %s failed", client_address, exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


def _tls(server_class: type[_Server], certificates: metrics_auth.Certificates) -> type[_Server]:
    """The server class wrapping accepted connections in TLS; handshakes on request threads."""

    class TlsServer(server_class):  # type: ignore[valid-type,misc]
        def get_request(self) -> tuple[socket.socket, object]:
            conn, addr = self.socket.accept()
            tls = certificates.context.wrap_socket(
                conn, server_side=True, do_handshake_on_connect=False
            )
            return tls, addr

    return TlsServer


class Closer:
    """The running endpoint servers: their bound ports (useful with port 0) and a stop."""

    def __init__(
        self,
        *,
        metrics_port: int,
        health_port: int,
        servers: list[http.server.HTTPServer],
        threads: list[threading.Thread],
    ) -> None:
        self.metrics_port = metrics_port
        self.health_port = health_port
        self._servers = servers
        self._threads = threads

    def handler_threads(self) -> int:
        """Handler threads started, all servers together (bounded by the pool size)."""
        return sum(s.handler_threads for s in self._servers if isinstance(s, _Server))

    def shed(self) -> int:
        """Connections closed unserved because every handler thread was busy."""
        return sum(s.shed for s in self._servers if isinstance(s, _Server))

    def close(self) -> None:
        """Stop serving and release the ports; idempotent."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._servers.clear()
        self._threads.clear()


def serve(
    *,
    host: str,
    metrics_port: int,
    health_port: int,
    health: HealthState,
    metrics: Metrics,
    secure: metrics_auth.SecureServing | None = None,
) -> Closer:
    """Serve /metrics on ``metrics_port`` and /healthz, /readyz on ``health_port``.

    Equal ports (0 included) share one server answering all three paths, unless ``secure``:
    then /metrics is HTTPS behind its guard and the probes need a port of their own. Port 0
    binds an ephemeral port; the ``Closer`` reports the ports actually bound.
    """

    def metrics_route() -> _Response:
        return 200, prometheus_client.CONTENT_TYPE_LATEST, metrics.exposition()

    metrics_routes: dict[str, _Route] = {"/metrics": metrics_route}
    health_routes: dict[str, _Route] = {
        "/healthz": _probe(health.liveness),
        "/readyz": _probe(health.readiness),
    }
    server_class: type[_Server] = _Server6 if ":" in host else _Server
    plan: list[tuple[int, dict[str, _Route], type[_Server], metrics_auth.Guard | None]]
    if secure is not None:
        if metrics_port == health_port and metrics_port != 0:
            raise ValueError("secure /metrics needs a health port of its own for the probes")
        plan = [
            (metrics_port, metrics_routes, _tls(server_class, secure.certificates), secure.guard),
            (health_port, health_routes, server_class, None),
        ]
    elif metrics_port == health_port:
        plan = [(metrics_port, {**metrics_routes, **health_routes}, server_class, None)]
    else:
        plan = [
            (metrics_port, metrics_routes, server_class, None),
            (health_port, health_routes, server_class, None),
        ]

    servers: list[http.server.HTTPServer] = []
    threads: list[threading.Thread] = []
    try:
        for port, routes, cls, guard in plan:
            servers.append(cls((host, port), _handler_class(routes, guard)))
    except OSError:
        for server in servers:
            server.server_close()
        raise
    for server in servers:
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},  # how fast close() returns
            name=f"metricsched-http-{server.server_address[1]}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    bound = [int(server.server_address[1]) for server in servers]
    return Closer(
        metrics_port=bound[0],
        health_port=bound[-1],
        servers=servers,
        threads=threads,
    )
