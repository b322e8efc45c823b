"""One refresh of the policies' metrics: queries grouped, answers stored, results.

Each distinct (query, nodeLabel) that the admin's rules allow is sent once per round for
every metric using it (``guarded_query_groups``); its answer is stored for each of them
(``apply_report``), giving one ``RefreshResult`` per metric for status and events. The
runtime's refresher (``runtime.refresher``) runs the rounds, for the operator and for
``metricsched explain`` alike. No I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from metricsched.core import model, promql_guard
from metricsched.edges import metric_store, observe
from metricsched.edges import prometheus as prom


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


Members = list[tuple[model.Policy, model.MetricSpec]]
QueryGroup = tuple[tuple[str, str], Members]


class QueryKey(NamedTuple):
    """One query to send for a group of metrics, and what the admin's rules say of it."""

    query: str
    node_label: str
    namespace: str  # of the group's first policy: the query is checked (and sent) for it
    refusal: str | None  # why the rules forbid it to every member; None = allowed to each


GuardedGroup = tuple[QueryKey, Members]
# The rules' verdict on each (query, namespace): why it is refused, None if it is allowed.
Verdicts = Mapping[tuple[str, str], str | None]


def verdicts(
    policies: Sequence[model.Policy], *, guard: promql_guard.Guard
) -> dict[tuple[str, str], str | None]:
    """The admin's rules' verdict on every Prometheus query of ``policies``, for
    ``guarded_query_groups``. Slow when the guard has not seen the queries: each check
    parses its query (up to ~10 ms for a large one), so the refresher calls this in a
    worker thread, never on the event loop (a new leader meets every query uncached)."""
    found: dict[tuple[str, str], str | None] = {}
    for policy in policies:
        for spec in policy.metrics:
            source = spec.source.prometheus
            if source is not None:
                key = (source.query, policy.namespace)
                if key not in found:
                    found[key] = guard.check(source.query, namespace=policy.namespace)
    return found


def guarded_query_groups(
    policies: Sequence[model.Policy],
    *,
    guard: promql_guard.Guard,
    known: Verdicts | None = None,
) -> list[GuardedGroup]:
    """The Prometheus metrics of ``policies`` grouped by distinct (query, nodeLabel) and
    by what the admin's rules (``guard``) say of the query for each policy's namespace:
    one query serves every metric of a group whose key is allowed; a refused group sends
    nothing. The guard remembers verdicts, so a round re-checks no unchanged query.

    The rules may depend on the namespace (``namespace={namespace}``): the same text is
    allowed in the namespace it names and refused in the others, so policies share an
    answer only when the rules allowed the query to each of them.

    ``known``: verdicts computed beforehand (``verdicts``, off the loop); only a query
    they lack (a policy that arrived meanwhile) is checked here.
    """
    known = known or {}
    groups: dict[tuple[str, str, str | None], Members] = {}
    for policy in policies:
        for spec in policy.metrics:
            source = spec.source.prometheus
            if source is not None:
                query = source.query
                if (query, policy.namespace) in known:
                    refusal = known[(query, policy.namespace)]
                else:
                    refusal = guard.check(query, namespace=policy.namespace)
                key = (query, source.node_label, refusal)
                groups.setdefault(key, []).append((policy, spec))
    return [
        (QueryKey(query, node_label, members[0][0].namespace, refusal), members)
        for (query, node_label, refusal), members in groups.items()
    ]


def query_groups(policies: Sequence[model.Policy]) -> list[QueryGroup]:
    """``guarded_query_groups`` without the admin's rules, keyed (query, nodeLabel).

    Only for callers that do not send queries for policies: a refresher must use
    ``guarded_query_groups`` and pass each key's namespace to ``query_nodes_report``
    (which refuses a query without one whenever rules are set).
    """
    return [
        ((key.query, key.node_label), members)
        for key, members in guarded_query_groups(
            policies, guard=promql_guard.Guard(promql_guard.Rules())
        )
    ]


def apply_report(
    *,
    store: metric_store.MetricStore,
    members: Sequence[tuple[model.Policy, model.MetricSpec]],
    report: prom.QueryReport,
    nodes: Sequence[model.NodeInfo],
    now: float,
    sent: bool,
    metrics: observe.Metrics | None = None,
) -> list[RefreshResult]:
    """Store one query's answer for every metric of its group; one result per metric.
    An answer the store refuses (it would pass ``--max-metric-values``) is reported as
    the store's ``ResultTooLarge``, like any failed query."""
    series = store.update_shared(
        [model.MetricKey(policy=policy.key, metric=spec.name) for policy, spec in members],
        report.series,
    )
    reporting = len(series.values)
    results: list[RefreshResult] = []
    for index, (policy, spec) in enumerate(members):
        if metrics is not None and sent:
            metrics.observe_refresh(policy=policy.key, metric=spec.name, seconds=report.duration_s)
        results.append(
            RefreshResult(
                policy=policy.key,
                metric=spec.name,
                nodes_reporting=reporting,
                nodes_missing=max(len(nodes) - reporting, 0),
                error=series.error,
                error_message=series.error_message,
                duration_s=report.duration_s,
                series_unknown_node=report.series_unknown_node,
                series_duplicate=report.series_duplicate,
                queried=sent and index == 0,
                finished_at=now + report.duration_s,
            )
        )
    return results


def not_attempted(down: prom.QueryReport) -> prom.QueryReport:
    """The report of a query skipped because Prometheus just proved unreachable."""
    return dataclasses.replace(
        down,
        series=dataclasses.replace(
            down.series, error_message=f"not attempted: {down.series.error_message}"
        ),
        duration_s=0.0,
    )
