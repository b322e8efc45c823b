"""The per-pod usage reader: running pods' measured usage, for the Measured estimate.

While some policy metric's estimate is Measured (the default of a cpu or memory
threshold), each refresh round sends the operator's two per-pod queries (``--pod-usage-*``:
cAdvisor's series by default; operator configuration, never tenant PromQL, so the query
rules do not apply) in one worker thread, outside the tenants' query slots, and turns the
answer into a ``model.PodUsage`` (``core.usage``: each pod's usage, each workload's high
quantile). It rides on the series of every Measured metric (``MetricStore.set_usage``) to
the cycle, and the policies' pending pods are hinted (what was measured may let them in).

One answer is at most ``max_pods`` series per resource (the bound on memory: a few
hundred bytes per pod); more is an error. An error keeps the last answer (a pod measured
then is subtracted only up to what it used then: never more than the node shows of it),
is logged when it starts and when it ends, and counted in
``metricsched_pod_usage_errors_total``; without any answer the estimate falls back to
requests and limits (``core.usage.pod_amount``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Collection

from metricsched.core import model, usage
from metricsched.edges import metric_store, observe
from metricsched.edges import prometheus as prom
from metricsched.edges import prometheus_http as prom_http
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import queue as queue_mod

logger = logging.getLogger("metricsched.pod_usage")

BYTES_PER_POD = 256  # of the answer: a series of two short labels and a value


@dataclasses.dataclass(frozen=True, slots=True)
class Queries:
    """The operator's per-pod queries ("" = not read) and the cap on one answer."""

    cpu: str
    memory: str
    max_pods: int
    settled_s: float = usage.SETTLED_S  # see core.usage.pod_usage


class PodUsageReader:
    def __init__(
        self,
        *,
        source: prom.PrometheusClient,
        queries: Queries,
        cache: cache_mod.ClusterCache,
        store: metric_store.MetricStore,
        queue: queue_mod.SchedulingQueue,
        metrics: observe.Metrics,
    ) -> None:
        self._source = source
        self._queries = queries
        self._cache = cache
        self._store = store
        self._queue = queue
        self._metrics = metrics
        self._limits = prom_http.Limits(
            max_bytes=max(8 * 2**20, queries.max_pods * BYTES_PER_POD),
            max_series=queries.max_pods,
        )
        self.latest: model.PodUsage | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def start(
        self, keys: Collection[model.MetricKey], policies: Collection[model.PolicyKey]
    ) -> asyncio.Task[None] | None:
        """Send the queries for this round unless an answer is still awaited; the answer
        goes to ``keys``' series and hints ``policies``' pods. Returns the task, if one."""
        if self._task is not None or not (self._queries.cpu or self._queries.memory):
            return None
        task = asyncio.get_running_loop().create_task(
            self._read(frozenset(keys), frozenset(policies)), name="pod usage"
        )
        self._task = task
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is not None:
            logger.error("per-pod usage task failed", exc_info=task.exception())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _read(
        self, keys: frozenset[model.MetricKey], policies: frozenset[model.PolicyKey]
    ) -> None:
        now = time.time()
        try:
            cpu, memory = await asyncio.to_thread(self._query)
        except prom.PodQueryError as e:
            self._metrics.pod_usage_errors.inc()
            if not self._failing:
                logger.warning("per-pod usage query failed (estimates keep the last answer): %s", e)
            self._failing = True
            if self.latest is not None:
                self._store.set_usage(keys, self.latest)
            return
        if self._failing:
            logger.info("per-pod usage query answers again")
        self._failing = False
        pods = [pod for state in self._cache.snapshot().nodes.values() for pod in state.pods]
        measured = usage.pod_usage(
            at=now,
            cpu=cpu,
            memory=memory,
            pods=pods,
            settled_s=self._queries.settled_s,
            previous=self.latest,
        )
        self.latest = measured
        self._metrics.pod_usage_pods.set(max(len(cpu), len(memory)))
        self._metrics.pod_usage_workloads.set(len(measured.workload_pods))
        self._store.set_usage(keys, measured)
        self._queue.on_metrics_change(set(policies), now=time.monotonic())

    def _query(self) -> tuple[dict[str, float], dict[str, float]]:
        """Both answers (in a worker thread): millicores and bytes by "namespace/pod"."""
        query = functools.partial(self._source.query_by_pod, limits=self._limits)
        cpu = (
            {k: v * 1000.0 for k, v in query(self._queries.cpu).items()}
            if self._queries.cpu
            else {}
        )
        memory = query(self._queries.memory) if self._queries.memory else {}
        return cpu, memory
