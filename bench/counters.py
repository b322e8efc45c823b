"""Counters read from /metrics endpoints: the operator's, Prometheus's and the API server's.

Each reader returns a flat ``{name: value}`` dict so a trial can subtract a "before"
reading from an "after" one. The API server's counters count every client, so only the
request kinds a scheduler alone makes are kept: pod Bindings and Events (core/v1 and
events.k8s.io/v1), and SchedulingPolicy status writes.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from bench.kube import Kube

Labels = Mapping[str, str]


def sum_samples(text: str, name: str, keep: Callable[[Labels], bool] = lambda _: True) -> float:
    """The sum of the samples of metric ``name`` whose labels pass ``keep``."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and keep(sample.labels):
                total += sample.value
    return total


def by_label(text: str, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "")
                out[key] = out.get(key, 0.0) + sample.value
    return out


def operator_counters(text: str) -> dict[str, float | None]:
    """What metricsched says it did: writes by kind, queries, fallbacks, dropped events."""
    writes = by_label(text, "metricsched_api_writes_total", "kind")
    attempts = by_label(text, "metricsched_schedule_attempts_total", "result")
    cycle = "metricsched_scheduling_attempt_duration_seconds"
    cycles = sum_samples(text, f"{cycle}_count")
    return {
        # wall time of one cycle (schedule_one) inside the operator, as it measures it
        "cycle_ms_mean": round(1000 * sum_samples(text, f"{cycle}_sum") / cycles, 3)
        if cycles
        else None,
        "prometheus_queries": sum_samples(text, "metricsched_prometheus_queries_total"),
        "api_writes": sum(writes.values()),
        **{f"api_writes_{k}": v for k, v in writes.items()},
        **{f"attempts_{k}": v for k, v in attempts.items()},
        "fallback_decisions": sum_samples(text, "metricsched_fallback_decisions_total"),
        "events_dropped": sum_samples(text, "metricsched_events_dropped_total"),
        "binding_errors": sum_samples(text, "metricsched_binding_errors_total"),
    }


def prometheus_queries(prometheus_url: str) -> float:
    """Queries Prometheus has answered (instant and range), from its own /metrics."""
    with urllib.request.urlopen(prometheus_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum_samples(
        text,
        "prometheus_http_requests_total",
        lambda labels: labels.get("handler") in ("/api/v1/query", "/api/v1/query_range"),
    )


def _is_scheduler_write(labels: Labels) -> str | None:
    verb, resource, sub = labels.get("verb"), labels.get("resource"), labels.get("subresource")
    if resource == "pods" and sub == "binding" and verb == "POST":
        return "binding"
    if resource == "events" and verb in ("POST", "PATCH", "PUT"):
        return "event"
    if resource == "schedulingpolicies" and sub == "status" and verb in ("PATCH", "PUT"):
        return "policy_status"
    return None


async def apiserver_writes(kube: Kube) -> dict[str, float]:
    """Bindings, Event writes and policy status writes the API server has served (code 2xx)."""
    text = await kube.text("/metrics")
    out = {"binding": 0.0, "event": 0.0, "policy_status": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            kind = _is_scheduler_write(sample.labels)
            if kind is not None and sample.labels.get("code", "").startswith("2"):
                out[kind] += sample.value
    return out


def delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 3) for k, v in after.items()}
