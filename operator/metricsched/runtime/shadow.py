"""Shadow evaluation: off the scheduling path, bounded, one task of its own.

The pod watch calls ``ShadowEvaluator.on_pod`` for every pod of another scheduler it
parses (a few dict lookups). A bound pod whose ``PodScheduled`` condition turned true
within ``RECENT_BIND_S`` (kube-apiserver sets it when it accepts the Binding; kopf may
merge a pod's creation and bind into one event, so "seen unbound, then bound" is not
reliable) and that a shadow policy selects joins a bounded queue, once. The
evaluator's task takes the pods one at a time, evaluates each with the pure cycle on the
cache's snapshot and the metric store as they are then (no Prometheus query: the
refresher keeps the shadow policies' metrics like any other's), keeps the latest
``window`` evaluations per policy, and marks the policy's status for the writer. After
each pod it pauses four times as long as the evaluation took, so shadow work takes at most
a fifth of the event loop whatever the other scheduler's pace; a full queue drops the pod
and counts it.

A pod bound longer ago (before the operator started) is not evaluated: the cluster as
its scheduler saw it is gone. Evaluations live in memory; a new leader starts
a new window. Nothing here writes to the API.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from metricsched.config import Config
from metricsched.core import model, policy_selection, shadow
from metricsched.edges import metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import cycle_inputs

logger = logging.getLogger("metricsched.shadow")

QUEUE_CAPACITY = 1000
WINDOW = 100
RECENT = 20  # shown per policy in status.shadow.recent
CPU_SHARE = 0.2  # of the event loop's time, at most, for shadow evaluations
RECENT_BIND_S = 30.0  # a bound pod is evaluated only if it was bound this recently
_MAX_REMEMBERED = 100_000  # evaluated pods remembered (not evaluated twice)


@dataclasses.dataclass(slots=True)
class _PolicyShadow:
    evaluations: collections.deque[shadow.Evaluation]
    dropped: int = 0


class ShadowEvaluator:
    def __init__(
        self,
        *,
        cache: cache_mod.ClusterCache,
        store: metric_store.MetricStore,
        metrics: observe.Metrics,
        config: Config,
        mark: Callable[[model.PolicyKey], None],
        capacity: int = QUEUE_CAPACITY,
        window: int = WINDOW,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._cache = cache
        self._store = store
        self._metrics = metrics
        self._config = config
        self._ours = config.scheduler_names
        self._mark = mark
        self._clock = clock
        self._timer = timer
        self._sleep = sleep
        self.window = window
        self._queue: asyncio.Queue[tuple[model.PodInfo, model.PolicyKey, float]] = asyncio.Queue(
            maxsize=capacity
        )
        self._done: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.policies: dict[model.PolicyKey, _PolicyShadow] = {}

    # --- the watch hook (cheap: runs on every pod event) --------------------------------

    def on_pod(self, pod: model.PodInfo, body: Mapping[str, Any]) -> None:
        """The watch's hook: never raises (the watch's own work comes after it)."""
        try:
            self._on_pod(pod, body)
        except Exception:
            logger.exception("shadow hook failed", extra={"pod": pod.key})

    def _on_pod(self, pod: model.PodInfo, body: Mapping[str, Any]) -> None:
        if pod.scheduler_name in self._ours or not pod.node_name or pod.uid in self._done:
            return
        now = self._clock()
        bound_at = scheduled_at(body)
        if bound_at is None or now - bound_at > RECENT_BIND_S:
            return
        chosen = policy_selection.shadow_policy_for(pod, list(self._cache.policies.values()))
        if chosen is None:
            return
        self._done[pod.uid] = None
        while len(self._done) > _MAX_REMEMBERED:
            self._done.popitem(last=False)
        try:
            self._queue.put_nowait((pod, chosen.key, now))
        except asyncio.QueueFull:
            self._record(chosen.key).dropped += 1
            self._metrics.shadow_dropped.inc()
            self._mark(chosen.key)

    # --- the task ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Evaluate queued pods until ``stop``; supervised: an error is logged, never raised."""
        while not stop.is_set():
            try:
                pod, key, seen_at = await asyncio.wait_for(self._queue.get(), timeout=1.0)
            except TimeoutError:
                self._prune()
                continue
            started = self._timer()
            try:
                self.evaluate(pod, key, now=seen_at)
            except Exception:
                logger.exception("shadow evaluation failed", extra={"pod": pod.key})
            # One pod per turn, then a pause: at most CPU_SHARE of the event loop's time,
            # however fast the other scheduler binds (the queue drops the rest).
            elapsed = max(0.0, self._timer() - started)
            await self._sleep(elapsed * (1.0 - CPU_SHARE) / CPU_SHARE)

    def evaluate(
        self, pod: model.PodInfo, key: model.PolicyKey, *, now: float
    ) -> shadow.Evaluation | None:
        chosen = self._cache.policies.get(key)
        if chosen is None or chosen.mode is not model.PolicyMode.SHADOW:
            return None
        inputs = cycle_inputs.build(
            cache=self._cache,
            store=self._store,
            config=self._config,
            now=self._clock(),
            namespace=pod.namespace,
        )
        # the cluster as it is now, the metrics' freshness as when the pod was bound
        evaluation = shadow.evaluate(
            pod=pod, policy=chosen, inputs=dataclasses.replace(inputs, now=now)
        )
        record = self._record(key)
        record.evaluations.append(evaluation)
        result = (
            "agree"
            if evaluation.agree
            else ("disagree" if evaluation.policy_node is not None else "unplaceable")
        )
        self._metrics.shadow_evaluations.labels(policy=key, result=result).inc()
        summary = shadow.summarize(record.evaluations, policy=chosen)
        self._metrics.set_shadow_summary(
            policy=key,
            agreement=summary.agreeing / summary.evaluated if summary.evaluated else 0.0,
            advantages={
                m.name: m.advantage_percent / 100.0
                for m in summary.metrics
                if m.advantage_percent is not None
            },
        )
        logger.info(
            "shadow %s: %s on %s, policy %s would choose %s",
            key,
            pod.key,
            evaluation.node,
            "agrees" if evaluation.agree else "disagrees",
            evaluation.policy_node or "no node",
        )
        self._mark(key)
        return evaluation

    def _record(self, key: model.PolicyKey) -> _PolicyShadow:
        record = self.policies.get(key)
        if record is None:
            record = self.policies[key] = _PolicyShadow(
                evaluations=collections.deque(maxlen=self.window)
            )
        return record

    def forget_policy(self, key: model.PolicyKey) -> None:
        """A policy is gone (``runtime.policies``): its evaluations and series go now;
        ``_prune`` forgets a policy no longer in shadow mode."""
        self.policies.pop(key, None)
        self._metrics.forget_shadow(policy=key)

    def _prune(self) -> None:
        """Forget policies deleted or no longer in shadow mode."""
        for key in list(self.policies):
            p = self._cache.policies.get(key)
            if p is None or p.mode is not model.PolicyMode.SHADOW:
                del self.policies[key]
                self._metrics.forget_shadow(policy=key)

    # --- status ------------------------------------------------------------------------

    def status_block(self, key: model.PolicyKey) -> dict[str, object] | None:
        """``status.shadow`` of a shadow policy; None for an active one."""
        chosen = self._cache.policies.get(key)
        if chosen is None or chosen.mode is not model.PolicyMode.SHADOW:
            return None
        record = self.policies.get(key) or _PolicyShadow(evaluations=collections.deque())
        return shadow.status_block(
            summary=shadow.summarize(record.evaluations, policy=chosen),
            recent=list(reversed(record.evaluations))[:RECENT],
            window=self.window,
            dropped=record.dropped,
        )


def scheduled_at(body: Mapping[str, Any]) -> float | None:
    """When the pod's ``PodScheduled`` condition turned true (unix seconds), if it did."""
    for cond in (body.get("status") or {}).get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "True"
        ):
            try:
                moment = datetime.datetime.fromisoformat(str(cond.get("lastTransitionTime")))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
    return None
