"""The metric refresher: one PromQL query per distinct metric per interval, never per pod.

- Only the leader refreshes (``leading`` is awaited before each round); standbys send no
  query and write no status.
- Queries run in worker threads, at most ``concurrency`` at once, the slots shared
  round-robin across namespaces (``runtime.fair_slots``): a namespace with many slow
  queries cannot make another's wait behind all of them. A round never waits
  for a slow query: each query's answer is stored when it arrives, and a query still in
  flight at the next tick is not sent again. A slow query therefore delays only its own
  metrics, whose values age out by the policy's ``maxMetricAge`` (the cycle then uses
  the policy's fallback); every other policy keeps fresh values.
- Each query has a deadline (``deadline_s``): past it, its metrics are recorded as
  ``Unreachable`` ("no answer within ...") for status and events, while the thread's
  late answer, if any, is still stored when it comes.
- Once a query proves Prometheus unreachable, the queries of the rest of the round are
  not sent (each would wait out the timeout for the same answer).
- It never dies: every round is wrapped, a failure is logged and the next tick comes.
- After each answer: the queue is hinted (``on_metrics_change``) for the policies whose
  values changed, each result goes to the policy's status record (through its owner,
  ``runtime.policies``: ``keep_result``), and each metric reports
  ``MetricQueryFailed`` while it fails / ``MetricsRecovered`` when it works (the policy
  events edge posts a warning when it starts, re-sends it while it holds, and posts the
  recovery once).
- Metrics whose estimate learns (``core.estimate.learns``) show the learner
  (``runtime.learner``) how they moved after binds; what it learns rides on the
  metric's series to the cycle.
- While some metric's estimate is Measured, each round also reads running pods'
  measured usage (``runtime.pod_usage``: the operator's per-pod queries), which rides
  on those metrics' series to the cycle.
- Metrics whose source is ``metricsServer`` are read with one LIST of NodeMetrics per
  round (``edges.metrics_api``, on the async client), whatever the number of policies
  and resources that read them; an API that is absent (404) or unavailable (503) is
  ``MetricsAPIUnavailable`` for their status and events, and the policies fall back.
- A query the admin's rules refuse for a policy's namespace is never sent (the edge
  groups queries by the rules' verdict and checks each again before sending). The
  verdicts of a round are computed in a worker thread before it starts: a check parses
  its query (up to ~10 ms), and a new leader meets every query uncached (2,000 of them
  on the loop would stall it for 10-20 s, past the Lease's fence).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Collection, Sequence

from metricsched.core import estimate, model
from metricsched.edges import kube_http, metric_store, metrics_api, observe, query_rounds
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import fair_slots
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import learner as learner_mod
from metricsched.runtime import pod_usage as pod_usage_mod
from metricsched.runtime import policies as policies_mod
from metricsched.runtime import queue as queue_mod

logger = logging.getLogger("metricsched.refresher")

_POD_USAGE = query_rounds.QueryKey("", "", "", None)  # the per-pod usage queries' slot
_NODE_METRICS = query_rounds.QueryKey("", "metrics.k8s.io", "", None)  # the NodeMetrics LIST
PolicyEvent = Callable[..., None]  # (policy key, *, topic, event_type, reason, action, message)


class Refresher:
    def __init__(
        self,
        *,
        source: prom.PrometheusClient,
        store: metric_store.MetricStore,
        cache: cache_mod.ClusterCache,
        queue: queue_mod.SchedulingQueue,
        keep_result: Callable[[query_rounds.RefreshResult], policies_mod.Refreshed | None],
        metrics: observe.Metrics,
        gates: gates_mod.Gates,
        post_event: PolicyEvent,
        interval_s: float,
        deadline_s: float,
        concurrency: int = 4,
        pod_usage: pod_usage_mod.PodUsageReader | None = None,
        kube: kube_http.AsyncApi | None = None,
    ) -> None:
        self._source = source
        self._kube = kube  # the metrics API's transport (None: metricsServer never read)
        self._pod_usage = pod_usage
        self._store = store
        self._cache = cache
        self._queue = queue
        # The policy status record keeps each result (runtime.policies' ``refreshed``).
        self._keep_result = keep_result
        self._metrics = metrics
        self._post_event = post_event
        self._interval = interval_s
        self._deadline = deadline_s
        self._slots = fair_slots.FairSlots(concurrency)
        self._in_flight: dict[query_rounds.QueryKey, asyncio.Task[None]] = {}
        self._down: prom.QueryReport | None = None
        self.now = asyncio.Event()  # set to refresh at once (a policy's metrics changed)
        # Rounds run while ``gates.leading`` is set; ``gates.metrics_ready`` is set once the
        # first round since this replica began leading has answered (or run out of time):
        # the scheduler waits for it, so that the first pods are not placed by a fallback
        # only because the operator started faster than its first query.
        self.gates = gates
        self._first: asyncio.Task[None] | None = None
        self._learner = learner_mod.Learner()  # how binds moved the metrics that learn

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.gates.leading.wait()
            self.now.clear()
            try:
                self.round(known=await self.verdicts())
            except Exception:
                logger.exception("metric refresh round failed; retrying at the next tick")
            if self._first is None:
                self._first = asyncio.get_running_loop().create_task(
                    self._first_round_done(list(self._in_flight.values())), name="first round"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.now.wait(), timeout=self._interval)
        for task in self._in_flight.values():
            task.cancel()
        if self._pod_usage is not None:
            self._pod_usage.cancel()
        if self._first is not None:
            self._first.cancel()

    async def _first_round_done(self, tasks: list[asyncio.Task[None]]) -> None:
        """``gates.metrics_ready`` once ``tasks`` (the first round's queries) have answered, or
        after the deadline (a query that hangs delays the first decisions no longer)."""
        if tasks:
            await asyncio.wait(tasks, timeout=self._deadline)
        self.gates.metrics_ready.set()

    async def refresh_once(self, *, only: Collection[model.PolicyKey] | None = None) -> None:
        """One round, and wait for all its answers (``metricsched explain``, which decides
        with values as fresh as the operator's, and queries only the policies ``only``
        names: the one that decides the pod, not every namespace's)."""
        self.round(only=only, known=await self.verdicts(only=only))
        while self._in_flight:
            await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def verdicts(
        self, *, only: Collection[model.PolicyKey] | None = None
    ) -> query_rounds.Verdicts | None:
        """The admin's rules' verdict on every query of the next round, computed in a
        worker thread (the guard remembers them: later rounds find them at once, and
        the thread sees only the queries that changed). None when no rules are set
        (nothing to check)."""
        guard = self._source.guard
        if not guard.rules.enabled:
            return None
        policies = [p for p in self._cache.policies.values() if only is None or p.key in only]
        return await asyncio.to_thread(query_rounds.verdicts, policies, guard=guard)

    def forget_policy(self, key: model.PolicyKey) -> None:
        """A policy is gone (``runtime.policies``): the store keeps only the samples of
        the metrics of the policies left (the cache has forgotten it first)."""
        del key  # the cache says what is left
        self._store.retain(_metric_keys(self._cache.policies.values()))

    def round(
        self,
        *,
        only: Collection[model.PolicyKey] | None = None,
        known: query_rounds.Verdicts | None = None,
    ) -> int:
        """Start the queries of one round (those not still in flight); returns how many.
        ``only``: query the metrics of these policies only (None: every policy).
        ``known``: the rules' verdicts from ``verdicts`` (off the loop); a query they
        lack is checked here, on the loop."""
        policies = list(self._cache.policies.values())
        self._store.retain(_metric_keys(policies))
        self._learner.retain(_metric_keys(policies))
        self._metrics.retain_policy_metrics((p.key, m.name) for p in policies for m in p.metrics)
        self._down = None
        started = 0
        nodes = self._cache.nodes()
        queried = policies if only is None else [p for p in policies if p.key in only]
        measured = _measured(queried)
        if measured and self._pod_usage is not None:
            usage_task = self._pod_usage.start(measured, {key.policy for key in measured})
            if usage_task is not None:
                # In flight beside the queries: the first round (and explain's) waits for
                # it too, as the first pods are estimated by it.
                self._in_flight[_POD_USAGE] = usage_task
                usage_task.add_done_callback(functools.partial(self._done, _POD_USAGE))
        served = _metrics_server_members(queried)
        if served and _NODE_METRICS not in self._in_flight:
            task = asyncio.get_running_loop().create_task(
                self._refresh_node_metrics(served, nodes), name="metrics.k8s.io nodes"
            )
            self._in_flight[_NODE_METRICS] = task
            task.add_done_callback(functools.partial(self._done, _NODE_METRICS))
            started += 1
        for key, members in query_rounds.guarded_query_groups(
            queried, guard=self._source.guard, known=known
        ):
            if key in self._in_flight:
                continue
            task = asyncio.get_running_loop().create_task(
                self._refresh(key, members, nodes), name=f"query {key[0][:40]}"
            )
            self._in_flight[key] = task
            task.add_done_callback(functools.partial(self._done, key))
            started += 1
        return started

    def _done(self, key: query_rounds.QueryKey, task: asyncio.Task[None]) -> None:
        self._in_flight.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            logger.error("metric query task failed", exc_info=task.exception())

    async def _refresh(
        self,
        key: query_rounds.QueryKey,
        members: Sequence[tuple[model.Policy, model.MetricSpec]],
        nodes: list[model.NodeInfo],
    ) -> None:
        query, node_label = key.query, key.node_label
        late: asyncio.Future[prom.QueryReport] | None = None
        async with self._slots.slot(key.namespace):
            now = time.time()
            down = self._down
            if down is not None and key.refusal is None:
                report, sent = query_rounds.not_attempted(down), False
            else:
                answer = asyncio.ensure_future(
                    asyncio.to_thread(
                        functools.partial(
                            self._source.query_nodes_report,
                            query,
                            node_label=node_label,
                            nodes=nodes,
                            now=now,
                            namespace=key.namespace,
                        )
                    )
                )
                sent = key.refusal is None
                try:
                    report = await asyncio.wait_for(asyncio.shield(answer), self._deadline)
                except TimeoutError:
                    # Overdue: say so now, free the slot for other queries, and keep
                    # the query in flight (not re-sent) until its late answer comes.
                    report, late = _overdue(self._deadline, now), answer
                if report.connect_failed:
                    self._down = report
        self._apply(members, report, nodes, now, sent=sent and late is None)
        if late is not None:
            self._apply(members, await late, nodes, now, sent=True)

    async def _refresh_node_metrics(
        self,
        members: Sequence[tuple[model.Policy, model.MetricSpec]],
        nodes: list[model.NodeInfo],
    ) -> None:
        """One LIST of NodeMetrics stored for every metricsServer metric of ``members``."""
        now = time.time()
        if self._kube is None:
            usage = metrics_api.failed(
                model.QueryErrorKind.METRICS_API_UNAVAILABLE,
                "this operator has no client for the metrics API",
                now=now,
                duration_s=0.0,
            )
        else:
            usage = await metrics_api.read_nodes(
                self._kube, nodes=nodes, now=now, timeout_s=self._deadline
            )
        for resource, series in usage.series.items():
            group = [(p, m) for p, m in members if m.source.node_metrics is resource]
            if not group:
                continue
            report = prom.QueryReport(
                series=series,
                series_total=usage.items,
                series_unknown_node=usage.unknown_node,
                series_duplicate=0,
                values_dropped=usage.dropped,
                duration_s=usage.duration_s,
                connect_failed=False,
            )
            self._apply(group, report, nodes, now, sent=True)

    def _apply(
        self,
        members: Sequence[tuple[model.Policy, model.MetricSpec]],
        report: prom.QueryReport,
        nodes: list[model.NodeInfo],
        now: float,
        *,
        sent: bool,
    ) -> None:
        version = self._store.version
        before = self._store.view()
        results = query_rounds.apply_report(
            store=self._store,
            members=members,
            report=report,
            nodes=nodes,
            now=now,
            sent=sent,
            metrics=self._metrics,
        )
        if self._store.version != version or any(r.error is not None for r in results):
            # New values or a new error state; or a failing query, whose old values age
            # towards maxMetricAge (a node may become feasible as its value goes missing).
            self._queue.on_metrics_change({p.key for p, _ in members}, now=time.monotonic())
        self._learn(members, before)
        if self._pod_usage is not None and self._pod_usage.latest is not None:
            self._store.set_usage(
                [
                    model.MetricKey(p.key, m.name)
                    for p, m in members
                    if m.estimate.source is model.EstimateFrom.MEASURED
                ],
                self._pod_usage.latest,
            )
        self.record(results)

    def _learn(
        self, members: Sequence[tuple[model.Policy, model.MetricSpec]], before: model.MetricView
    ) -> None:
        """Let the learner see how the metrics that learn moved since their last refresh."""
        learning = [(p, m) for p, m in members if estimate.learns(m)]
        if not learning:
            return
        snapshot = self._cache.snapshot()
        table = self._cache.table(snapshot)
        after = self._store.view()
        for policy, metric in learning:
            key = model.MetricKey(policy.key, metric.name)
            series = after.get(key)
            if series is None:
                continue
            learned = self._learner.observe(
                key=key, metric=metric, before=before.get(key), after=series, table=table
            )
            self._store.set_learned(key, learned)

    def record(self, results: Sequence[query_rounds.RefreshResult]) -> None:
        """Keep results for status; post an event when a metric starts or stops failing."""
        for r in results:
            kept = self._keep_result(r)
            if kept is None:
                continue
            ok = r.error is None
            if not ok and kept.was_ok is not False:
                logger.warning(
                    "metric %s of policy %s failed: %s: %s",
                    r.metric,
                    r.policy,
                    r.error,
                    r.error_message,
                )
            elif ok and kept.was_ok is False:
                logger.info("metric %s of policy %s recovered", r.metric, r.policy)
            # Every result, not only changes: the events edge dedupes, re-sends a lasting
            # warning, and resolves one whose health record was reset by a spec change.
            if not ok:
                self._post_event(
                    r.policy,
                    topic=f"metric/{r.metric}",
                    event_type="Warning",
                    reason="MetricQueryFailed",
                    action="QueryMetrics",
                    message=f"metric {r.metric}: {r.error}: {r.error_message}",
                )
            else:
                self._post_event(
                    r.policy,
                    topic=f"metric/{r.metric}",
                    event_type="Normal",
                    reason="MetricsRecovered",
                    action="QueryMetrics",
                    message=f"metric {r.metric}: {r.nodes_reporting} node(s) reporting again",
                )


def _metric_keys(policies: Collection[model.Policy]) -> set[model.MetricKey]:
    """The metrics of these policies: what the store and the learner keep."""
    return {model.MetricKey(p.key, m.name) for p in policies for m in p.metrics}


def _metrics_server_members(
    policies: Collection[model.Policy],
) -> list[tuple[model.Policy, model.MetricSpec]]:
    """The metrics of ``policies`` read from the resource metrics API."""
    return [(p, m) for p in policies for m in p.metrics if m.source.node_metrics is not None]


def _measured(policies: Collection[model.Policy]) -> list[model.MetricKey]:
    """The metrics of ``policies`` whose estimate counts measured per-pod usage."""
    return [
        model.MetricKey(p.key, m.name)
        for p in policies
        for m in p.metrics
        if m.estimate.source is model.EstimateFrom.MEASURED
    ]


def _overdue(deadline_s: float, now: float) -> prom.QueryReport:
    """What a query that has not answered within its deadline counts as, meanwhile."""
    return prom.QueryReport(
        series=model.MetricSeries(
            values={},
            last_refresh=now,
            error=model.QueryErrorKind.UNREACHABLE,
            error_message=f"no answer within {deadline_s:g}s",
        ),
        series_total=0,
        series_unknown_node=0,
        series_duplicate=0,
        values_dropped=0,
        duration_s=deadline_s,
        connect_failed=False,
    )
