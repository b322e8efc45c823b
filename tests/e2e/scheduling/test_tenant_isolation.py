"""A namespaced policy cannot read, through metricsched, the labels of series it did not
match: not in its status, not in its events, not in its pods' events; with the admin's
query rules off (the default) and on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    condition,
    get_policy,
    set_and_wait,
    wait_bound,
)

# A series whose node label names no node: another tenant's database, say.
SECRET = "tenant-bank-db7"
VALUES = {"node-1": 0.4, "node-2": 0.1, "node-3": 0.3, "node-4": 0.2, SECRET: 0.05}
JOB = 'job="node-exporter-sim"'


def metric_spec(query: str) -> dict[str, Any]:
    return {
        "name": "m",
        "prometheus": {"query": query, "nodeLabel": "node"},
        "weight": 1,
        "goal": "Minimize",
    }


def namespace_events(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items = cluster.core.list_namespaced_event(namespace).items
    return [dict(cluster.api_client.sanitize_for_serialization(e)) for e in items]


def last_error(cluster: Cluster, namespace: str, name: str) -> str:
    status = get_policy(cluster, namespace, name).get("status") or {}
    return str(((status.get("metrics") or [{}])[0]).get("lastError") or "")


def wait_failed(cluster: Cluster, namespace: str, name: str) -> str:
    """Wait for the policy's MetricQueryFailed event and status error; return the error."""
    wait_for(
        f"MetricQueryFailed on {name}",
        lambda: [
            e for e in cluster.events_for(namespace, name) if e["reason"] == "MetricQueryFailed"
        ],
        timeout=60,
    )
    return str(wait_for(f"lastError of {name}", lambda: last_error(cluster, namespace, name)))


def assert_nothing_leaked(cluster: Cluster, namespace: str, policies: list[str]) -> None:
    texts = [json.dumps(get_policy(cluster, namespace, p).get("status")) for p in policies]
    texts += [f"{e['reason']}: {e['message']}" for e in namespace_events(cluster, namespace)]
    assert texts
    leaks = [t for t in texts if SECRET in t or "bank" in t]
    assert leaks == []


@pytest.fixture
def secret_metric(cluster: Cluster) -> Iterator[str]:
    """The test's metric: four nodes, and one series whose node label names no node."""
    name = f"e2e_{uuid.uuid4().hex[:8]}"
    set_and_wait(cluster, name, VALUES)
    yield name
    cluster.delete_metric(name)


def run_tenant_policies(cluster: Cluster, namespace: str, metric: str) -> dict[str, str]:
    """Three policies reading series beside their own; return their metric errors."""
    # Reads every series of the metric; the one naming no node is dropped, not echoed.
    apply_policy(
        cluster,
        namespace,
        "mixed",
        {
            "metrics": [metric_spec(f"max by (node) ({metric}{{{JOB}}})")],
            "burstPenalty": 0,
            "priority": 10,  # the policy of the pod below
        },
    )
    # Selects only the series naming no node: an empty result, described by counts.
    apply_policy(
        cluster,
        namespace,
        "foreign",
        {"metrics": [metric_spec(f'{metric}{{{JOB}, node="{SECRET}"}}')]},
    )
    # Prometheus's own error lists every series involved, labels included.
    apply_policy(
        cluster,
        namespace,
        "dupes",
        {"metrics": [metric_spec(f"{metric}{{{JOB}}} + on () {metric}{{{JOB}}}")]},
    )
    wait_for(
        "policy mixed Ready",
        lambda: condition(get_policy(cluster, namespace, "mixed"), "Ready").get("status") == "True",
        timeout=60,
    )
    cluster.create_pod(namespace, "web")
    assert wait_bound(cluster, namespace, "web") == "node-2"
    return {name: wait_failed(cluster, namespace, name) for name in ("foreign", "dupes")}


def test_without_query_rules_no_label_of_an_unmatched_series_reaches_the_namespace(
    cluster: Cluster, operator: OperatorProcess, namespace: str, secret_metric: str
) -> None:
    errors = run_tenant_policies(cluster, namespace, secret_metric)
    assert errors["foreign"].startswith("EmptyResult: none of the 1 series names a known node")
    assert errors["dupes"].startswith("BadQuery: Prometheus rejected the query: many-to-many")
    assert_nothing_leaked(cluster, namespace, ["mixed", "foreign", "dupes"])


@pytest.fixture
def restricted_operator(
    cluster: Cluster, operator: OperatorProcess, secret_metric: str
) -> Iterator[OperatorProcess]:
    """The operator with an allow-list of the test's metric and a required job matcher,
    in place of the session's operator (two would both write the policies' status)."""
    operator.stop()
    restricted = OperatorProcess(
        cluster,
        extra_args=[
            f"--query-allowed-metric={secret_metric}",
            f"--query-required-matcher={JOB}",
        ],
    )
    try:
        restricted.start()
        yield restricted
    finally:
        restricted.stop()
        operator.start()


def test_with_query_rules_a_refused_query_is_a_bad_query_and_nothing_leaks(
    cluster: Cluster, restricted_operator: OperatorProcess, namespace: str, secret_metric: str
) -> None:
    errors = run_tenant_policies(cluster, namespace, secret_metric)
    assert errors["foreign"].startswith("EmptyResult: none of the 1 series names a known node")
    assert errors["dupes"].startswith("BadQuery: Prometheus rejected the query: many-to-many")
    # Outside the allow-list (the exporter's latency metric exists for every node).
    apply_policy(
        cluster,
        namespace,
        "other",
        {"metrics": [metric_spec(f"max by (node) (node_latency_seconds{{{JOB}}})")]},
    )
    # Without the required matcher.
    apply_policy(
        cluster,
        namespace,
        "unmatched",
        {"metrics": [metric_spec(f"max by (node) ({secret_metric})")]},
    )
    assert wait_failed(cluster, namespace, "other") == (
        "BadQuery: refused by the cluster's query rules, not sent: metric node_latency_seconds"
        f" is not in the cluster's allow-list ({secret_metric})"
    )
    assert wait_failed(cluster, namespace, "unmatched") == (
        "BadQuery: refused by the cluster's query rules, not sent:"
        f' {secret_metric}: every selector must carry job="node-exporter-sim"'
    )
    assert_nothing_leaked(cluster, namespace, ["mixed", "foreign", "dupes", "other", "unmatched"])
