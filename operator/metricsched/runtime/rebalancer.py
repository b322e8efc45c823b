"""The rebalancing loop: leader-only passes that move pods off nodes past a policy's trigger.

Every ``period_s`` (the metric refresh interval: values change no faster), while this
replica leads and its cache is consistent, each policy with ``spec.rebalance`` gets one
pass: the trigger's fresh values update since when each node has been past it, and
``core.rebalance.plan`` picks the pods to move. In ``DryRun`` each pick is recorded as a
would-be eviction (status, a ``WouldRebalance`` event, ``/metrics``) and counted by the
limits as if it had happened; nothing is evicted. In ``Evict`` each goes through the
Eviction API (``edges.eviction``), fenced like a Binding, so PodDisruptionBudgets hold: a
429 is recorded (``Blocked``) and the pass goes on. Evicted pods get a ``Rebalanced``
event, as does the policy.

What a pass remembers (since when nodes are outside, the evictions the limits count, the
counters of ``status.rebalance``) lives in this process: a new leader starts its windows
over, which only delays moves (never adds any sooner than a window).

Two clocks, as in the scheduler: windows, intervals and the eviction history run on the
monotonic clock, so a step of the wall clock neither ends a window early nor stalls it;
wall time only where a value meets the API's or Prometheus's (metric ages, pod ages, the
status's times). ``core.rebalance`` takes one ``now``: it is handed the monotonic stamps
shifted onto the wall clock of this pass, so every duration it measures is monotonic.

Operator-wide, at most ``--rebalance-eviction-budget`` evictions are sent per minute
(``BUDGET_PERIOD_S``, on the monotonic clock) across every policy, whatever their own
limits: no tenant's policy can churn the cluster or load the API server past it. The
policy a pass starts with rotates, so one policy cannot take the budget every time.

``status.rebalance.held`` lists the room each policy's moves hold on their targets for
the replacements (``runtime.reservations``: node, owner, amount, until; at most ``HELD``),
republished when that set changes (a bind consumed a hold, a hold expired).

A failed pass is logged and the loop goes on; nothing here raises into the operator.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from metricsched.config import Config
from metricsched.core import api_formats, cycle, model, quantity, rebalance, reservation
from metricsched.edges import events, eviction, kube_http, metric_store, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import cycle_inputs
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import reservations as reservations_mod

logger = logging.getLogger("metricsched.rebalancer")

RECENT = 20  # status.rebalance.recent holds at most this many
HELD = 20  # status.rebalance.held lists at most this many (the soonest to end)
BUDGET_PERIOD_S = 60.0  # the operator-wide eviction budget counts over this period


@dataclasses.dataclass(slots=True)
class PolicyState:
    """What rebalancing remembers of one policy between passes."""

    outside_since: dict[model.NodeName, float] = dataclasses.field(default_factory=dict)
    history: collections.deque[rebalance.Eviction] = dataclasses.field(
        default_factory=collections.deque
    )
    evicted: int = 0
    would_evict: int = 0
    blocked: int = 0
    nodes_outside: int = 0
    nodes_due: int = 0
    last_move: float = 0.0
    recent: collections.deque[dict[str, Any]] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=RECENT)
    )
    held: frozenset[str] = frozenset()  # the evicted pods' uids status.rebalance.held shows


class Rebalancer:
    def __init__(
        self,
        *,
        config: Config,
        cache: cache_mod.ClusterCache,
        store: metric_store.MetricStore,
        http: kube_http.AsyncApi,
        recorder: events.EventRecorder,
        metrics: observe.Metrics,
        gates: gates_mod.Gates,
        policy_ref: Callable[[model.PolicyKey], events.ObjectRef],
        mark: Callable[[model.PolicyKey], None],
        period_s: float | None = None,
        reservations: reservations_mod.Reservations | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        # Room held on each move's target for its replacement (shared with the scheduler)
        self.reservations = reservations
        self.cache = cache
        self.store = store
        self.http = http
        self.recorder = recorder
        self.metrics = metrics
        self._policy_ref = policy_ref
        self._mark = mark
        self.period_s = period_s if period_s is not None else max(1.0, config.refresh_interval_s)
        self._clock = clock
        self._monotonic = monotonic
        self.states: dict[model.PolicyKey, PolicyState] = {}
        # Leading and a consistent cache (runtime.gates), as for the scheduler; the
        # elector's fence bounds every Eviction as it does every Binding.
        self.gates = gates
        self.budget = config.rebalance_eviction_budget
        self._sent: collections.deque[float] = collections.deque()  # monotonic, all policies
        self._held_by: dict[str, model.PolicyKey] = {}  # evicted pod's uid -> whose move held
        self._passes = 0

    # --- the loop ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.gates.leading.wait()
            await self.gates.consistent.wait()
            await self.gates.policies_confirmed.wait()
            try:
                await self.run_pass(self._clock())
            except Exception:
                logger.exception("rebalancing pass failed; retrying next period")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.period_s)

    def forget_policy(self, key: model.PolicyKey) -> None:
        """A policy is gone (``runtime.policies``): its rebalancing state and series go
        now; a pass forgets a policy whose rebalancing is off."""
        self.states.pop(key, None)
        self.metrics.forget_rebalance(key)

    async def run_pass(self, now: float) -> int:
        """One pass over every rebalancing policy at wall time ``now``; returns how many
        pods moved (or, in DryRun, would have)."""
        mono = self._monotonic()
        policies = list(self.cache.policies.values())
        rebalancing = sorted(
            (p for p in policies if p.rebalance is not None and p.mode is model.PolicyMode.ACTIVE),
            key=lambda p: p.key,
        )
        for key in set(self.states) - {p.key for p in rebalancing}:
            del self.states[key]
            self.metrics.forget_rebalance(key)
            self._mark(key)  # status.rebalance goes away
        if not rebalancing:
            return 0
        # Take turns at the front of a pass (the operator-wide budget may run out).
        start = self._passes % len(rebalancing)
        self._passes += 1
        rebalancing = rebalancing[start:] + rebalancing[:start]
        self._republish_held()
        moved = 0
        for chosen in rebalancing:
            if not self._may_move():
                break
            # A snapshot per policy, taken right before its plan: the cache's (and its node
            # table's) state moves on while a previous policy's evictions are awaited.
            read = cycle_inputs.build(
                cache=self.cache, store=self.store, config=self.config, now=now, namespace=""
            )
            moved += await self._policy_pass(
                chosen, inputs=dataclasses.replace(read, policies=policies), mono=mono
            )
            await asyncio.sleep(0)  # a pass's dry runs are cycles: let the watches in
        return moved

    async def _policy_pass(
        self,
        chosen: model.Policy,
        *,
        inputs: cycle.Inputs,
        mono: float,
    ) -> int:
        """One policy's part of a pass on ``inputs`` (the snapshot taken right before it,
        the policies of the pass's start, no other installs' policies)."""
        view, now = inputs.metrics, inputs.now
        nodes = [state.node for state in inputs.snapshot.nodes.values()]
        spec = chosen.rebalance
        assert spec is not None
        key = chosen.key
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = PolicyState()
            self.metrics.rebalance_policy(key)
        values = rebalance.trigger_values(policy=chosen, nodes=nodes, metrics=view, now=now)
        more_values = rebalance.more_trigger_values(
            policy=chosen, nodes=nodes, metrics=view, now=now
        )
        state.outside_since = rebalance.track_outside(
            spec=spec,
            previous=state.outside_since,
            values=values,
            now=mono,
            more_values=more_values,
        )
        horizon = mono - max(spec.window_s, spec.interval_s, spec.workload_interval_s)
        while state.history and state.history[0].time <= horizon:
            state.history.popleft()
        # Monotonic stamps as wall times of this pass: durations against ``now`` in the
        # plan are monotonic durations, whatever the wall clock did since they were taken.
        shift = now - mono
        found = rebalance.plan(
            policy=chosen,
            inputs=inputs,
            outside_since={node: since + shift for node, since in state.outside_since.items()},
            values=values,
            more_values=more_values,
            history=tuple(dataclasses.replace(e, time=e.time + shift) for e in state.history),
        )
        if (found.nodes_outside, found.nodes_due) != (state.nodes_outside, state.nodes_due):
            state.nodes_outside, state.nodes_due = found.nodes_outside, found.nodes_due
            self._mark(key)
        self.metrics.rebalance_nodes_outside.labels(policy=key).set(found.nodes_outside)
        self.metrics.rebalance_nodes_due.labels(policy=key).set(found.nodes_due)
        for _, reason in found.skipped:
            self.metrics.count_rebalance_skip(policy=key, reason=reason.name)
        moved = 0
        dry = spec.mode is model.RebalanceMode.DRY_RUN
        for move in found.moves:
            if not self._may_move():
                break
            if not dry and not self._within_budget():
                self.metrics.count_rebalance_skip(policy=key, reason="OPERATOR_BUDGET")
                continue  # the next pass (its own dry runs) decides again
            result = await self._move(chosen, state, move, now=now, mono=mono)
            if result is eviction.EvictOutcome.FENCED:
                break  # leadership is going: the next leader decides
            if result in (eviction.EvictOutcome.EVICTED, None):
                moved += 1
        return moved

    def _within_budget(self) -> bool:
        """Whether the operator-wide eviction budget lets one more eviction go now."""
        now = self._monotonic()
        while self._sent and self._sent[0] <= now - BUDGET_PERIOD_S:
            self._sent.popleft()
        return len(self._sent) < self.budget

    def _may_move(self) -> bool:
        return (
            self.gates.leading.is_set()
            and self.gates.consistent.is_set()
            and self.gates.policies_confirmed.is_set()
        )

    async def _move(
        self,
        chosen: model.Policy,
        state: PolicyState,
        move: rebalance.Move,
        *,
        now: float,
        mono: float,
    ) -> eviction.EvictOutcome | None:
        """Evict (or, in DryRun, record) one move; None for a DryRun record."""
        spec = chosen.rebalance
        assert spec is not None
        key, pod = chosen.key, move.pod
        dry = spec.mode is model.RebalanceMode.DRY_RUN
        result: eviction.EvictResult | None = None
        if dry:
            outcome: eviction.EvictOutcome | None = None
            label, reason = "WouldEvict", "WouldRebalance"
        else:
            # Held before the eviction is sent: an arrival must not take the target's room
            # between the eviction and the replacement's bind.
            if self.reservations is not None and self.reservations.hold(
                pod, node=move.target, window_s=spec.window_s
            ):
                self._held_by[pod.uid] = key
                state.held |= {pod.uid}
            result = await eviction.evict(
                self.http,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                fence=self.gates.fence,
                metrics=self.metrics,
            )
            outcome, label = result.kind, result.kind.value
            if outcome is not eviction.EvictOutcome.EVICTED and self.reservations is not None:
                self.reservations.release(pod.uid)  # no replacement is coming
                self._held_by.pop(pod.uid, None)
                state.held -= {pod.uid}
            if outcome is not eviction.EvictOutcome.FENCED:
                self._sent.append(self._monotonic())  # sent: it counts, whatever the answer
            reason = "Rebalanced" if outcome is eviction.EvictOutcome.EVICTED else ""
        self.metrics.rebalance_evictions.labels(policy=key, result=label).inc()
        if outcome in (eviction.EvictOutcome.GONE, eviction.EvictOutcome.FENCED):
            return outcome  # nothing happened to count
        state.history.append(
            rebalance.Eviction(
                pod=pod.key,
                node=move.node,
                time=mono,
                blocked=outcome is eviction.EvictOutcome.BLOCKED,
                workload=pod.usage_workload,
            )
        )
        state.recent.appendleft(
            {
                "pod": pod.key,
                "node": move.node,
                "targetNode": move.target,
                "value": _finite(move.value),
                "targetValue": _finite(move.target_value),
                "result": label,
                "time": api_formats.rfc3339(now),
            }
        )
        self._mark(key)
        text = rebalance.message(move, policy=chosen, dry_run=dry)
        if outcome is None or outcome is eviction.EvictOutcome.EVICTED:
            state.last_move = now
            state.outside_since = rebalance.restart_after_move(
                state.outside_since, move.node, now=mono
            )
        if outcome is None:
            state.would_evict += 1
        elif outcome is eviction.EvictOutcome.EVICTED:
            state.evicted += 1
        elif outcome is eviction.EvictOutcome.BLOCKED:
            state.blocked += 1
            reason = "RebalanceBlocked"
            detail = result.message if result is not None else ""
            text = f"a PodDisruptionBudget refused the eviction of {pod.key} now: {detail}"
        else:
            self._event(
                self._policy_ref(key),
                event_type="Warning",
                reason="RebalanceFailed",
                message=f"cannot evict {pod.key}: {label}: {result.message if result else ''}",
            )
            return outcome
        logger.info("%s", text, extra={"pod": pod.key, "policy": key})
        pod_ref = events.ObjectRef.pod(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        self._event(pod_ref, event_type="Normal", reason=reason, message=text)
        if reason != "RebalanceBlocked":
            self._event(self._policy_ref(key), event_type="Normal", reason=reason, message=text)
        return outcome

    def _event(
        self, ref: events.ObjectRef, *, event_type: events.EventType, reason: str, message: str
    ) -> None:
        self.recorder.post(
            ref,
            event_type=event_type,
            reason=reason,
            message=message,
            action="Rebalance",
        )

    # --- status ----------------------------------------------------------------------------

    def status_block(self, key: model.PolicyKey) -> Mapping[str, object] | None:
        """``status.rebalance`` of a policy (None: it does not rebalance, or not yet)."""
        state = self.states.get(key)
        chosen = self.cache.policies.get(key)
        if state is None or chosen is None or chosen.rebalance is None:
            return None
        block: dict[str, object] = {
            "mode": chosen.rebalance.mode.value,
            "nodesOutside": state.nodes_outside,
            "nodesDue": state.nodes_due,
            "evictedPods": state.evicted,
            "wouldEvictPods": state.would_evict,
            "blockedPods": state.blocked,
            "recent": [dict(entry) for entry in state.recent],
        }
        if state.last_move:
            block["lastMoveTime"] = api_formats.rfc3339(state.last_move)
        if self.reservations is not None:
            block["held"] = self._held_entries(key)
        return block

    def _holds_of(self, key: model.PolicyKey) -> list[reservations_mod.Hold]:
        """The holds ``key``'s moves keep now, the soonest to end first."""
        if self.reservations is None:
            return []
        found = [
            h
            for h in self.reservations.holds()
            if self._held_by.get(h.placeholder.uid.removesuffix(reservation.SUFFIX)) == key
        ]
        return sorted(found, key=lambda h: (h.until, h.node, h.placeholder.uid))

    def _held_entries(self, key: model.PolicyKey) -> list[dict[str, object]]:
        """``status.rebalance.held``: node, owner (the workload), amount (the requests
        held), until (wall time, from the monotonic bound)."""
        wall, mono = self._clock(), self._monotonic()
        return [
            {
                "node": h.node,
                "owner": h.workload,
                "amount": {
                    "cpu": quantity.format_milli(h.placeholder.requests.milli_cpu),
                    "memory": quantity.format_int(h.placeholder.requests.memory),
                },
                "until": api_formats.rfc3339(wall + max(0.0, h.until - mono)),
            }
            for h in self._holds_of(key)[:HELD]
        ]

    def _republish_held(self) -> None:
        """Forget the holds that ended, and mark each policy whose held room changed."""
        if self.reservations is None:
            return
        live = {
            h.placeholder.uid.removesuffix(reservation.SUFFIX) for h in self.reservations.holds()
        }
        self._held_by = {uid: key for uid, key in self._held_by.items() if uid in live}
        for key, state in self.states.items():
            now_held = frozenset(uid for uid, whose in self._held_by.items() if whose == key)
            if now_held != state.held:
                state.held = now_held
                self._mark(key)


def _finite(value: float) -> float:
    return float(f"{value:.4g}") if math.isfinite(value) else 0.0
