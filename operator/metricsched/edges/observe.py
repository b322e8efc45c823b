"""The scheduler's own Prometheus metrics: every series the operator exports about itself.

Metrics live on a dedicated ``prometheus_client.CollectorRegistry`` held by a ``Metrics``
object (one per operator; tests make their own), so nothing leaks into the client
library's global registry. The series made per policy are remembered, so that a deleted
policy's are removed; the metric ages are computed when scraped. ``endpoints`` serves the
registry on /metrics; ``probes`` holds what /healthz and /readyz report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import prometheus_client
import prometheus_client.core
import prometheus_client.registry

from metricsched.edges import http_server

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


@dataclasses.dataclass(slots=True)
class _Labelled:
    """The labelled series ``Metrics`` made for each policy, remembered so that forgetting
    a policy (or one of its metrics) removes exactly those; ``lock`` guards
    ``policy_metrics`` and ``fallback_policies``."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    # (policy, metric) pairs with labelled series, so a deleted policy's can be removed.
    policy_metrics: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    # policies with a policy_fallback series
    fallback_policies: set[str] = dataclasses.field(default_factory=set)
    # policy -> metrics with a shadow advantage series
    shadow_metrics: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # policies whose rebalance result series were started at 0
    rebalance_policies: set[str] = dataclasses.field(default_factory=set)
    # policy -> the reasons of its rebalance_skipped series
    rebalance_skips: dict[str, set[str]] = dataclasses.field(default_factory=dict)


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
        self.estimate_fail_open = prometheus_client.Counter(
            "metricsched_estimate_fail_open_total",
            "Decisions that left a metric's learned estimate out because with it no node "
            "passed the thresholds the samples allow (the policy's EstimateRulesOutEveryNode "
            "warning), by policy and metric.",
            ["policy", "metric"],
            registry=r,
        )
        self.soft_lifted = prometheus_client.Counter(
            "metricsched_soft_threshold_lifted_total",
            "Decisions that lifted a metric's Soft threshold (every node that passed the other "
            "filters was outside it, so they were scored rather than the pod refused), by "
            "policy and metric.",
            ["policy", "metric"],
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
        self.shadow_dropped = prometheus_client.Counter(
            "metricsched_shadow_dropped_total",
            "Shadow mode: bound pods not evaluated because the evaluation queue was full.",
            registry=r,
        )
        self.kubelet_rejections = prometheus_client.Counter(
            "metricsched_kubelet_rejections_total",
            "Pods this scheduler bound that the kubelet then rejected at admission (the pod "
            "went Failed), by node and status.reason (OutOfcpu, OutOfmemory, OutOfpods, "
            "UnexpectedAdmissionError, NodeAffinity, ...); counted by the leader.",
            ["node", "reason"],
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
        self.webhook_admission_duration = prometheus_client.Histogram(
            "metricsched_webhook_admission_duration_seconds",
            "Time from an AdmissionReview reaching the opt-in webhook's handlers to its answer "
            "(kopf's dispatch and the decision; a busy event loop shows here). The API server "
            "gives up at the webhook's timeoutSeconds (2 s by default) and creates the pod "
            "unchanged; its own view is apiserver_admission_webhook_admission_duration_seconds.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
            registry=r,
        )
        self.webhook_serving = prometheus_client.Gauge(
            "metricsched_webhook_serving",
            "1 while this replica's admission webhook server listens; 0 while it does not (not "
            "started yet, kopf restarting it, a certificate change): the API server then "
            "creates pods unchanged (failurePolicy Ignore). 0 with the webhook off.",
            registry=r,
        )
        self.metric_values = prometheus_client.Gauge(
            "metricsched_metric_values",
            "Metric values (one per metric per node) the operator stores across every policy "
            "(an answer shared by several metrics counted once).",
            registry=r,
        )
        self.metric_values_limit = prometheus_client.Gauge(
            "metricsched_metric_values_limit",
            "--max-metric-values: past it, an answer is its metrics' ResultTooLarge.",
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
        self.rebalance_reservations = prometheus_client.Gauge(
            "metricsched_rebalance_reservations",
            "Rebalancing: target nodes' room held for the replacement of an evicted pod.",
            registry=r,
        )
        self.rebalance_skipped = prometheus_client.Counter(
            "metricsched_rebalance_skipped_total",
            "Rebalancing: pods on nodes due that stayed, by policy and reason "
            "(TOO_YOUNG, NODE_LIMIT, TOTAL_LIMIT, NO_BETTER_NODE, ...).",
            ["policy", "reason"],
            registry=r,
        )
        self.http_dropped = prometheus_client.Counter(
            "metricsched_http_dropped_total",
            "Connections to the operator's own ports (health, metrics) not served, by port "
            "and reason: deadline (no complete request within 2 s of connecting), evicted "
            "(the oldest connection still being read, closed for a new one past 256), busy "
            "(/metrics answered 503: its threads and waiting places all taken). The probes "
            "are never answered busy.",
            ["port", "reason"],
            registry=r,
        )
        # Known label values start at 0 so rate() and absent() behave from the first scrape.
        for result in ATTEMPT_RESULTS:
            self.attempts.labels(result=result)
        # Each kind's counter, looked up once (``labels`` takes a lock and builds a key:
        # a few µs on every Binding and Event).
        self.api_write_counters = {
            kind: self.api_writes.labels(kind=kind) for kind in API_WRITE_KINDS
        }
        self._ages = _AgeCollector()
        r.register(self._ages)
        self._labelled = _Labelled()

    def start_http_drops(self, port: int) -> None:
        """Start a served port's drop series at 0, so that rate() sees the first drop."""
        for reason in http_server.DROP_REASONS:
            self.http_dropped.labels(port=str(port), reason=reason)

    def count_http_drop(self, port: int, reason: http_server.DropReason) -> None:
        """One connection or request of a port not served (``http_server.DROP_REASONS``)."""
        self.http_dropped.labels(port=str(port), reason=reason).inc()

    def set_shadow_summary(
        self, *, policy: str, agreement: float, advantages: Mapping[str, float]
    ) -> None:
        """Export a shadow policy's agreement ratio and per-metric advantage ratios."""
        self.shadow_agreement.labels(policy=policy).set(agreement)
        for metric, ratio in advantages.items():
            self.shadow_advantage.labels(policy=policy, metric=metric).set(ratio)
        self._labelled.shadow_metrics.setdefault(policy, set()).update(advantages)

    def forget_shadow(self, *, policy: str) -> None:
        """Drop a deleted (or no longer shadow) policy's shadow series."""
        with contextlib.suppress(KeyError):
            self.shadow_agreement.remove(policy)
        for metric in self._labelled.shadow_metrics.pop(policy, set()):
            with contextlib.suppress(KeyError):
                self.shadow_advantage.remove(policy, metric)
        for result in SHADOW_RESULTS:
            with contextlib.suppress(KeyError):
                self.shadow_evaluations.remove(policy, result)

    def rebalance_policy(self, policy: str) -> None:
        """Start a rebalancing policy's result series at 0 (remembered for forgetting)."""
        if policy in self._labelled.rebalance_policies:
            return
        self._labelled.rebalance_policies.add(policy)
        for result in REBALANCE_RESULTS:
            self.rebalance_evictions.labels(policy=policy, result=result)

    def forget_rebalance(self, policy: str) -> None:
        """Drop the rebalancing series of a deleted policy, or one whose rebalance is off."""
        self._labelled.rebalance_policies.discard(policy)
        for result in REBALANCE_RESULTS:
            with contextlib.suppress(KeyError):
                self.rebalance_evictions.remove(policy, result)
        for gauge in (self.rebalance_nodes_outside, self.rebalance_nodes_due):
            with contextlib.suppress(KeyError):
                gauge.remove(policy)
        for reason in self._labelled.rebalance_skips.pop(policy, set()):
            with contextlib.suppress(KeyError):
                self.rebalance_skipped.remove(policy, reason)

    def count_rebalance_skip(self, *, policy: str, reason: str) -> None:
        """One pod on a node due that stayed, and why."""
        self._labelled.rebalance_skips.setdefault(policy, set()).add(reason)
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
        with self._labelled.lock:
            self._labelled.fallback_policies.add(policy)
        self.policy_fallback.labels(policy=policy).set(1 if active else 0)

    def count_estimate_fail_open(self, *, policy: str, metric: str) -> None:
        """One decision of ``policy`` left ``metric``'s learned estimate out (its series is
        remembered so that ``forget_policy`` can remove it)."""
        with self._labelled.lock:
            self._labelled.policy_metrics.add((policy, metric))
        self.estimate_fail_open.labels(policy=policy, metric=metric).inc()

    def count_soft_lifted(self, *, policy: str, metric: str) -> None:
        """One decision of ``policy`` lifted ``metric``'s Soft threshold (its series is
        remembered so that ``forget_policy`` can remove it)."""
        with self._labelled.lock:
            self._labelled.policy_metrics.add((policy, metric))
        self.soft_lifted.labels(policy=policy, metric=metric).inc()

    def observe_refresh(self, *, policy: str, metric: str, seconds: float) -> None:
        """Record one refresh of a policy's metric (its per-policy series is remembered
        so that ``forget_policy`` can remove it)."""
        with self._labelled.lock:
            self._labelled.policy_metrics.add((policy, metric))
        self.metric_refresh_duration.labels(policy=policy, metric=metric).observe(seconds)

    def forget_policy_metric(self, *, policy: str, metric: str) -> None:
        """Drop the labelled series of a metric whose policy (or metric entry) is gone."""
        with self._labelled.lock:
            self._labelled.policy_metrics.discard((policy, metric))
        with contextlib.suppress(KeyError):
            self.metric_refresh_duration.remove(policy, metric)
        with contextlib.suppress(KeyError):
            self.estimate_fail_open.remove(policy, metric)
        with contextlib.suppress(KeyError):
            self.soft_lifted.remove(policy, metric)

    def forget_policy(self, policy: str) -> int:
        """Drop every per-policy series of a deleted policy (``"namespace/name"``); return
        how many metrics of it had series."""
        with self._labelled.lock:
            gone = [pm for pm in self._labelled.policy_metrics if pm[0] == policy]
            had_fallback = policy in self._labelled.fallback_policies
            self._labelled.fallback_policies.discard(policy)
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
        with self._labelled.lock:
            gone = [pm for pm in self._labelled.policy_metrics if pm not in wanted]
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
