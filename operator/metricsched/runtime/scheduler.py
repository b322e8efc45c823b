"""The scheduling loop: pops pending pods, runs the pure cycle, hands decisions to the binder.

The cycle runs on the event loop (it is pure and fast), and so do its API calls (Binding,
Events, pod status: ``edges.kube_http``, no thread hop), with at most ``bind_concurrency``
Bindings in flight. The bind path does no Prometheus query and exactly one API write per
pod, plus its Event; the event budget is checked before the Event is built (a dropped
Event costs no task). A pod placed by the cycle is assumed on its node at once, so the
next pod's cycle already sees the capacity it takes.

Bind outcomes never free capacity a Binding may hold: an answer lost in transit (reset,
timeout, 5xx) is resolved by reading the pod back (bound: done, and the cache counts it
where it is; unbound: retried, with the first node held until the Binding cannot land
any more). With leader election, each Binding is fenced by the lease (see leader.py),
and losing the lease cancels the binds in flight.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from metricsched.config import Config
from metricsched.core import class_run, cycle, decision_record, framework, model
from metricsched.edges import binder, events, kube_http, logs, metric_store, observe, pod_status
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import cycle_inputs
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import reservations as reservations_mod

logger = logging.getLogger("metricsched.scheduler")

# How many pods one pass of the loop decides before yielding to the watches.
_BATCH = 64
# The oldest pending pod's age is exported at most this often (it walks every pending pod).
_BACKLOG_EXPORT_S = 1.0
# Every pending pod the cache knows is re-checked against the queue this often.
_RESYNC_S = 30.0
# How long a node keeps the resources of a pod whose Binding answer was lost and which
# read back unbound: longer than the API server's request timeout (60 s by default).
HOLD_S = 90.0
_YIELD_AFTER_S = 0.02  # of attempts in a batch before the loop is let to others
# Read-back of a lost Binding answer: first wait, doubling up to the max.
_READ_BACK_S = (0.5, 5.0)


@dataclasses.dataclass(slots=True)
class PolicyCounters:
    scheduled: int = 0
    fallback: int = 0
    fallback_active: bool = False
    fallback_reason: str = ""
    # metrics whose learned estimate the policy's latest scored decision left out
    fail_open: frozenset[str] = frozenset()


class Scheduler:
    def __init__(
        self,
        *,
        config: Config,
        cache: cache_mod.ClusterCache,
        queue: queue_mod.SchedulingQueue,
        store: metric_store.MetricStore,
        http: kube_http.AsyncApi,
        recorder: events.EventRecorder,
        metrics: observe.Metrics,
        gates: gates_mod.Gates,
        on_fallback_change: Callable[[model.PolicyKey, bool, str], None] | None = None,
        on_fail_open_change: Callable[[model.PolicyKey, str, bool], None] | None = None,
        reservations: reservations_mod.Reservations | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # Rebalancing's target reservations (shared with the rebalancer): the cycle sees
        # them on the snapshot; a bind consumes one of its workload's, the loop ends old ones.
        self.reservations = reservations
        # Two clocks. Wall time where a value meets the API server's or Prometheus's (the
        # cycle's ``now``: burst windows against bind times, metric ages against refresh
        # times; ``bound_at``; creation-to-bind). The monotonic clock for every internal
        # duration (backoff, holds, resync), so a step of the wall clock neither stalls a
        # backoff for the size of the step nor releases a hold early.
        self._wall = wall
        self._monotonic = monotonic
        self.config = config
        self.cache = cache
        self.queue = queue
        self.store = store
        # Work derived from unchanged pods and nodes (parsed terms, a pod class's node
        # affinity, metric values laid out by node), kept from one cycle to the next.
        self.memo = framework.Memo()
        # The run of the pod class decided last (core.class_run): the next pod of that class,
        # at the same cache generation, reuses its setup and its filters' answers.
        self._run: class_run.Run | None = None
        self.http = http
        self.recorder = recorder
        self.metrics = metrics
        self.counters: dict[model.PolicyKey, PolicyCounters] = collections.defaultdict(
            PolicyCounters
        )
        self._on_fallback_change = on_fallback_change
        self._on_fail_open_change = on_fail_open_change
        self._rr = 0
        self._binds = asyncio.Semaphore(config.bind_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._max_in_flight = 2 * config.bind_concurrency
        self._capacity = asyncio.Event()
        self._seen_generation = -1
        self._last_resync = 0.0
        self._backlog_exported_at = -float("inf")
        # Leading, a consistent cache, the first metric round and the policies confirmed
        # after a gap (runtime.gates): decisions wait for all four; the elector's fence
        # bounds every Binding.
        self.gates = gates
        # The cache's node names, rebuilt when its generation moves (a node added or
        # deleted always moves it): the check right before each Binding.
        self._node_names: frozenset[str] = frozenset()
        self._node_names_generation = -1

    # --- the loop ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.gates.leading.wait()
            await self.gates.consistent.wait()
            await self.gates.policies_confirmed.wait()
            await self.gates.metrics_ready.wait()
            now = self._monotonic()
            self._wake_on_changes(now)
            await self.queue.wait(now=now, max_wait=1.0)
            now = self._monotonic()
            # A change seen while waiting moves the pods it may help before anything pops:
            # otherwise a pod whose backoff just ended would take freed room ahead of a
            # higher-priority pod the change also helps (PrioritySort).
            self._wake_on_changes(now)
            last_yield = now
            for uid in self.queue.pop_ready(now, _BATCH):
                # Backpressure: decide no further ahead of the binder than it can follow,
                # or decisions (and their memory) pile up while binds starve for the loop.
                while len(self._tasks) >= self._max_in_flight:
                    self._capacity.clear()
                    await self._capacity.wait()
                if not self._may_decide() or self.cache.generation != self._seen_generation:
                    # Leadership lost, a re-list or a policy gap began, or the cluster
                    # changed (while the binder caught up) mid-batch: decide no more; the
                    # rest of the batch goes back to be ordered again with the pods the
                    # change moves.
                    self.queue.add(uid)
                    continue
                pod = self.cache.pending.get(uid)
                if pod is None:
                    self.queue.done(uid)
                    continue
                try:
                    self.attempt(pod, now=self._wall())
                except Exception:
                    # A bug in the cycle must not lose the pod: log, count, retry later.
                    logger.exception("scheduling attempt failed", extra={"pod": pod.key})
                    self.metrics.attempts.labels(result="error").inc()
                    self.queue.retry_later(uid, now=self._monotonic())
                # The Lease loop, the heartbeat and the watches get the loop at least every
                # _YIELD_AFTER_S of attempts, however expensive the pods of a batch are
                # (not after every pod: a bind confirmed meanwhile would cut the batch).
                if self._monotonic() - last_yield >= _YIELD_AFTER_S:
                    await asyncio.sleep(0)
                    last_yield = self._monotonic()
            self.export_backlog(self._wall())
            await asyncio.sleep(0)  # let the watches in between batches

    def _may_decide(self) -> bool:
        return (
            self.gates.leading.is_set()
            and self.gates.consistent.is_set()
            and self.gates.policies_confirmed.is_set()
        )

    def export_backlog(self, now: float) -> None:
        """Export how many pods wait and, at most once a second (it walks every pending
        pod), how old the oldest of them is."""
        self.metrics.pending_pods.set(len(self.cache.pending))
        if now - self._backlog_exported_at < _BACKLOG_EXPORT_S:
            return
        self._backlog_exported_at = now
        oldest = min(
            (p.creation_timestamp for p in self.cache.pending.values() if p.creation_timestamp),
            default=now,
        )
        self.metrics.oldest_pending_age.set(max(0.0, now - oldest))

    def _wake_on_changes(self, now: float) -> None:
        """Cluster or policy changes that may help waiting pods move them back; changed
        node annotations move the pods of the policies that score by them (Prometheus
        metric changes are hinted by the refresher, per policy). ``now`` is monotonic."""
        self.cache.expire_holds(now)
        if self.reservations is not None:
            self.reservations.expire()
        gen = self.cache.generation
        if gen != self._seen_generation:
            self._seen_generation = gen
            self.queue.on_cluster_change(now=now)
            self.cache.changed_annotations.clear()
        elif self.cache.changed_annotations:
            keys = self.cache.changed_annotations
            self.queue.on_metrics_change(
                (
                    p.key
                    for p in self.cache.policies.values()
                    if any(
                        m.source.node_annotation is not None and m.source.node_annotation in keys
                        for m in p.metrics
                    )
                ),
                now=now,
            )
            keys.clear()
        if now - self._last_resync >= _RESYNC_S:
            self._last_resync = now
            self.queue.sync(self.cache.pending)

    # --- one attempt -------------------------------------------------------------------

    def attempt(self, pod: model.PodInfo, *, now: float) -> model.Decision:
        """Decide for ``pod`` at wall time ``now``; bind, or requeue with backoff."""
        started = time.perf_counter()
        decision = self._decide(pod, now=now)
        elapsed = time.perf_counter() - started
        self.metrics.attempt_duration.observe(elapsed)
        logs.log_decision(logger, decision, duration_ms=elapsed * 1000)
        self._track_fallback(decision)
        self._track_fail_open(decision)
        self._count_soft_lifted(decision)
        if decision.outcome is model.Outcome.BIND and decision.node is not None:
            self._rr += 1
            # Built before the assume: nothing may raise between the assume and the bind.
            record = decision_record.annotation(
                decision, fallback_strategy=self._strategy(decision), now=now
            )
            self.cache.assume(pod, decision.node, now=now)
            if self.reservations is not None:
                self.reservations.consume(pod, decision.node)
            # The binder needs the node, the message and the record, not the verdicts.
            self._spawn(self._bind(pod, dataclasses.replace(decision, verdicts=()), record))
        elif decision.outcome in (model.Outcome.UNSCHEDULABLE, model.Outcome.WAIT):
            result = "wait" if decision.outcome is model.Outcome.WAIT else "unschedulable"
            self.metrics.attempts.labels(result=result).inc()
            self.queue.retry_later(
                pod.uid, now=self._monotonic(), policy=decision.policy or "", unschedulable=True
            )
            self._report_failure(pod, decision.message)
        else:  # SKIP: not ours (any more)
            self.queue.done(pod.uid)
            self.cache.pending.pop(pod.uid, None)
        return decision

    def _decide(self, pod: model.PodInfo, *, now: float) -> model.Decision:
        """``cycle.schedule_one``'s decision for ``pod``, made by the run of its class
        (``core.class_run``) when the previous pod decided was of the same class, at the same
        cache generation: the class's setup and its filters' answers for unchanged nodes
        are then reused, the decision is the same."""
        read = cycle_inputs.build(
            cache=self.cache, store=self.store, config=self.config, now=now, namespace=pod.namespace
        )
        inputs = dataclasses.replace(read, memo=self.memo)
        generation = self.cache.generation
        run = self._run
        if run is None or not run.admits(pod, generation=generation, elsewhere=inputs.elsewhere):
            run = self._run = class_run.Run.start(
                pod=pod, inputs=inputs, generation=generation, memo=self.memo
            )
        # per-metric scores for winner and runner-up only: half the cost
        if run is None:  # skipped or refused whatever the nodes: decided alone
            return cycle.decide(pod, inputs, rr_counter=self._rr, detail=False)
        return run.decide(pod, inputs, rr_counter=self._rr, detail=False)

    def forget_policy(self, key: model.PolicyKey) -> None:
        """A policy is gone (deleted, or re-created under its name): a new one starts at
        zero, not with the old one's counts."""
        self.counters.pop(key, None)

    def _strategy(self, decision: model.Decision) -> model.FallbackStrategy:
        chosen = self.cache.policies.get(decision.policy) if decision.policy else None
        return chosen.fallback if chosen is not None else self.config.default_fallback

    def _track_fallback(self, decision: model.Decision) -> None:
        if decision.policy is None or decision.outcome is model.Outcome.SKIP:
            return
        counters = self.counters[decision.policy]
        active = bool(decision.fallback_reason)
        if active:
            strategy = "Wait" if decision.outcome is model.Outcome.WAIT else "fallback"
            self.metrics.fallback_decisions.labels(
                strategy=strategy,
                reason_kind=(decision.fallback_kind or model.FallbackKind.OTHER).value,
            ).inc()
        if active != counters.fallback_active:
            counters.fallback_active = active
            self.metrics.set_policy_fallback(policy=decision.policy, active=active)
            counters.fallback_reason = decision.fallback_reason
            if self._on_fallback_change is not None:
                self._on_fallback_change(decision.policy, active, decision.fallback_reason)

    def _count_soft_lifted(self, decision: model.Decision) -> None:
        """Count each Soft threshold a decision lifted (docs/using.md, soft thresholds)."""
        if decision.policy is None:
            return
        for metric in decision.soft_lifted:
            self.metrics.count_soft_lifted(policy=decision.policy, metric=metric)

    def _track_fail_open(self, decision: model.Decision) -> None:
        """Count each learned estimate a decision left out; tell when the set of them a
        policy's scored decisions leave out changes (the cycle says so only on a pod its
        metrics placed: other outcomes leave the last word standing)."""
        if decision.policy is None:
            return
        for metric in decision.estimate_fail_open:
            self.metrics.count_estimate_fail_open(policy=decision.policy, metric=metric)
        if decision.outcome is not model.Outcome.BIND or decision.fallback_reason:
            return
        counters = self.counters[decision.policy]
        now = frozenset(decision.estimate_fail_open)
        if now == counters.fail_open:
            return
        before, counters.fail_open = counters.fail_open, now
        if self._on_fail_open_change is not None:
            for metric in sorted(now ^ before):
                self._on_fail_open_change(decision.policy, metric, metric in now)

    async def _bind(self, pod: model.PodInfo, decision: model.Decision, record: str = "") -> None:
        assert decision.node is not None
        node = decision.node
        async with self._binds:
            if not self._node_exists(node):
                # Deleted since the decision (the Binding may have waited for a slot):
                # the API server would accept it, and PodGC delete the pod ~40 s later.
                logger.info("binding %s to %s: not sent, the node was deleted", pod.key, node)
                self.cache.forget(pod)
                self.queue.retry_later(pod.uid, now=self._monotonic(), policy=decision.policy or "")
                return
            result = await binder.bind(
                self.http,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                node=node,
                fence=self.gates.fence,
                metrics=self.metrics,
                annotations={decision_record.ANNOTATION: record} if record else None,
            )
        if result.kind is binder.BindOutcome.UNKNOWN:
            logger.warning(
                "binding %s to %s: answer lost (%s); reading the pod back",
                pod.key,
                node,
                result.message,
            )
            result = await self._read_back(pod, node)
        await self._settle(pod, decision, result)

    def _node_exists(self, node: str) -> bool:
        if self._node_names_generation != self.cache.generation:
            self._node_names = frozenset(n.name for n in self.cache.nodes())
            self._node_names_generation = self.cache.generation
        return node in self._node_names

    async def _read_back(self, pod: model.PodInfo, node: str) -> binder.BindResult:
        """Read the pod until we know whether the Binding landed. Meanwhile the pod stays
        assumed on ``node``: its capacity is never freed on a guess."""
        delay, cap = _READ_BACK_S
        while True:
            result = await binder.read_back(
                self.http,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                node=node,
            )
            if result.kind is not binder.BindOutcome.UNKNOWN:
                return result
            await asyncio.sleep(delay)
            delay = min(cap, delay * 2)

    async def _settle(
        self, pod: model.PodInfo, decision: model.Decision, result: binder.BindResult
    ) -> None:
        """Apply a Binding's (known) outcome to the cache, the queue and the pod's events."""
        now, monotonic = self._wall(), self._monotonic()
        kind = result.kind
        node = decision.node or ""
        if kind is binder.BindOutcome.ALREADY_BOUND and result.node == node:
            kind = binder.BindOutcome.BOUND  # an earlier try of ours landed
        if kind is binder.BindOutcome.BOUND:
            self.cache.confirm_bound(pod.uid, at=monotonic)
            self.queue.done(pod.uid)
            self.metrics.attempts.labels(result="scheduled").inc()
            if pod.creation_timestamp:
                self.metrics.pod_scheduling_duration.observe(max(0.0, now - pod.creation_timestamp))
            if decision.policy is not None:
                counters = self.counters[decision.policy]
                counters.scheduled += 1
                if decision.fallback_reason:
                    counters.fallback += 1
            self.recorder.post_pod(
                pod=pod,
                event_type="Normal",
                reason="Scheduled",
                action="Binding",
                message=decision.message,
            )
            return
        if kind is binder.BindOutcome.ALREADY_BOUND:
            # Bound elsewhere by someone else: count it there now, not when the watch says.
            if result.node:
                self.cache.correct(pod, model.NodeName(result.node), now=now)
                self.cache.confirm_bound(pod.uid, at=monotonic)
            self.queue.done(pod.uid)
            return
        if kind is binder.BindOutcome.GONE:
            self.cache.remove_pod(pod.uid)
            self.queue.done(pod.uid)
            return
        self.cache.forget(pod)
        if kind is binder.BindOutcome.GATED:
            self.cache.pending.pop(pod.uid, None)  # the watch re-adds it once ungated
            self.queue.done(pod.uid)
            return
        if kind is binder.BindOutcome.FENCED:
            # Nothing was sent; the lease is going: the next leader schedules the pod.
            self.queue.retry_later(pod.uid, now=monotonic, policy=decision.policy or "")
            return
        if kind is binder.BindOutcome.NOT_BOUND:
            # The Binding may still be inside the API server: hold the node's share.
            self.cache.hold(pod, model.NodeName(node), until=monotonic + HOLD_S)
            self.metrics.attempts.labels(result="error").inc()
            self.queue.retry_later(pod.uid, now=monotonic, policy=decision.policy or "")
            return
        self.metrics.attempts.labels(result="error").inc()
        self.queue.retry_later(pod.uid, now=monotonic, policy=decision.policy or "")
        message = f"Binding rejected: {result.message}"
        self._report_failure(pod, message, reason="FailedScheduling")

    def cancel_binds(self) -> int:
        """Leadership is lost: stop waiting on Bindings in flight (their requests end
        within the fence) and schedule nothing more."""
        self.gates.leading.clear()
        n = 0
        for task in list(self._tasks):
            if not task.done():
                task.cancel()
                n += 1
        return n

    def _report_failure(
        self, pod: model.PodInfo, message: str, *, reason: str = "FailedScheduling"
    ) -> None:
        """The Warning Event (if the budget allows) and ``PodScheduled=False`` (if the pod
        does not have it yet), each written by a task only when it is written at all."""
        self.recorder.post_pod(
            pod=pod,
            event_type="Warning",
            reason=reason,
            action="Scheduling",
            message=message,
        )
        conditions = self.cache.pod_conditions.get(pod.uid, ())
        condition = pod_status.unschedulable(conditions, reason="Unschedulable", message=message)
        if condition is not None:
            self._spawn(
                pod_status.write(
                    self.http,
                    namespace=pod.namespace,
                    name=pod.name,
                    condition=condition,
                    metrics=self.metrics,
                )
            )

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if len(self._tasks) < self._max_in_flight:
            self._capacity.set()
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    async def drain(self) -> None:
        """Wait for the binds and writes in flight, the Events they posted included."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.recorder.drain()
