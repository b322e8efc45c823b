"""Rebalancing: which pods a policy moves off nodes whose metrics stay past a trigger.

``plan`` reads what the cycle reads (the snapshot and the metric view) plus two things the
runtime keeps: since when each node has been past a trigger (``track_outside``) and the
policy's past evictions. It returns the pods to evict now, each with the node a dry run
of the cycle (``core.cycle.schedule_one``, the pod as if pending, on the snapshot without
it) chose for it. A policy has one trigger or several (``spec.triggers``), each a metric
with its own threshold and margin; a node is outside while any one is past. A pod moves
only when all of these hold:

- metricsched placed it under this policy: its ``metricsched.io/decision`` annotation
  names the policy, *and* it is of the policy's namespace and names the policy's
  scheduler (an annotation is pod-authored; nothing else spends the policy's dry runs);
  it runs, and its controller recreates it (``RECREATING_OWNERS``; a Job's pods only with
  ``evictJobPods``);
- it is at least ``minPodAge`` old and was not evicted (by name) within ``window`` (an
  eviction a PodDisruptionBudget refused is tried again after ``interval``);
- its workload (a Deployment across its ReplicaSets, a StatefulSet, ...: a replacement's
  new name does not reset it) moved fewer than ``maxPerWorkload`` times within
  ``workloadInterval`` (Koordinator's per-workload migration limit, 5 min by default; a
  count, a share of the workload's pods, or unset the scaled rule of
  ``RebalanceSpec.workload_limit``);
- its node has been past a trigger for a whole ``window``, counted again from each
  move off it (``restart_after_move``), so that a node's next move waits for samples
  that show the last one;
- fewer than ``maxPerNode`` evictions from its node, and fewer than ``maxTotal`` in all,
  happened within ``interval``;
- **stop conditions** (Koordinator LowNodeLoad's and the descheduler's): the moves
  decided this pass do not already bring its node to the trigger (each move takes the
  pod's contribution, ``core.rebalance_room.contribution``, off the source), and the
  pooled room inside ``trigger - margin`` on the other nodes is not used up;
- **acceptance by improvement**: the dry run places it under this same policy, by its
  metrics (no fallback), on another node which, with the pod (what it measurably uses
  where the trigger is resource-backed, not a declared amount it may have outgrown),
  ends at or below ``trigger - margin`` in every trigger, and, in each trigger the source
  is past, at least ``margin`` below the source after the move.

A pod already moved off a node (gone from it, not a DryRun's would-be move) is taken out
of the node's values while the per-pod answer still shows it: the node's samples still
hold it (a rate window, a scrape and a refresh), the next ones will not, and a node judged
by them alone would shed pods again for a move that has not shown yet.

Why this cannot cycle: let Φ be the sum over nodes and triggers of how far each value is
past its trigger. A move takes a pod off a node past a trigger (its excess falls by the
pod's contribution, or stays) onto a node that ends ``margin`` inside every trigger (no
excess before or after), so Φ never rises and falls with every pod whose share is
known; the target stays ``margin`` inside, so in a static world it is never due and
nothing moves back. The source-after rule keeps a move from swapping which node is hot,
and the per-workload limit bounds what a changing world can do to one workload.

Each move is applied to the working snapshot before the next dry run, so two pods of a
pass do not both count on the same free room. Nodes furthest past their triggers go
first; on a node, the pods that contribute most to the trigger it is furthest past
(measured usage where the metric is resource-backed), then the lowest priority, then
the oldest.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from metricsched.core import columns, cycle, model, node_state, rebalance_room, scoring, shadow

MAX_DRY_RUNS: Final = 64
"""Dry runs of the cycle per policy per pass at most: each costs a scheduling cycle, and
a pass runs on the operator's event loop. Candidates past it wait for the next pass."""

RECREATING_OWNERS: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
"""Controller kinds that recreate an evicted pod (a Deployment's pods belong to a ReplicaSet).
A Job recreates one too, but an evicted Job pod counts against its ``backoffLimit`` (unless
a podFailurePolicy ignores ``DisruptionTarget``): only with ``evictJobPods``."""


class Skip(enum.StrEnum):
    """Why a pod on a node past the trigger stays (reported by ``plan``)."""

    NOT_RUNNING = "not running"
    NO_CONTROLLER = "no controller recreates it"
    JOB = "a Job's pod (evictJobPods is off)"
    TOO_YOUNG = "younger than minPodAge"
    RECENTLY_EVICTED = "evicted within the window"
    WORKLOAD_LIMIT = "its workload was moved maxPerWorkload times within workloadInterval"
    NODE_LIMIT = "maxPerNode reached for the interval"
    TOTAL_LIMIT = "maxTotal reached for the interval"
    RELIEVED = "the moves decided bring its node back to the trigger"
    NO_ROOM = "the room inside the trigger on other nodes is used up"
    NO_BETTER_NODE = "no other node is inside the trigger by the margin"
    OTHER_POLICY = "the cycle would place it under another policy"
    FALLBACK = "the cycle would place it by fallback (no metrics to trust)"
    BUDGET = "this pass's dry runs are spent"


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    """A past eviction (or, in DryRun, a would-be one) the limits count."""

    pod: model.PodKey
    node: model.NodeName  # the node it was moved off
    time: float
    # a PodDisruptionBudget refused it (429): it counts against the interval's limits
    # (so a refused pod is retried once an interval, not every pass) but not as the
    # pod's once-per-window eviction
    blocked: bool = False
    # the pod's workload (``PodInfo.usage_workload``: the Deployment across its
    # ReplicaSets, the StatefulSet, ...), which the per-workload limit counts
    workload: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    """A pod to evict now, and where the dry run of the cycle would place it."""

    pod: model.PodInfo
    node: model.NodeName
    target: model.NodeName
    value: float  # the trigger metric on ``node``
    target_value: float  # on ``target``, with the estimate of the pods it does not show yet
    score: float  # the dry run's score of ``target``
    trigger: model.Trigger | None = None  # the trigger ``value`` is of (None: the first)


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    moves: tuple[Move, ...]
    nodes_outside: int  # nodes past the trigger now
    nodes_due: int  # ... for a whole window
    skipped: tuple[tuple[model.PodKey, Skip], ...]  # candidates that stay, and why


def trigger_values(
    *,
    policy: model.Policy,
    nodes: Sequence[model.NodeInfo],
    metrics: model.MetricView,
    now: float,
    metric_name: str | None = None,
) -> dict[model.NodeName, float]:
    """The fresh sampled value of a trigger metric (the first trigger's unless
    ``metric_name`` is given) on each node that has one."""
    spec = policy.rebalance
    wanted = metric_name if metric_name is not None else spec.metric if spec else None
    metric = next((m for m in policy.metrics if m.name == wanted), None)
    if metric is None:
        return {}
    column = scoring.metric_column(
        policy=policy, metric=metric, nodes=nodes, metrics=metrics, now=now
    )
    return {
        node.name: value
        for node, value in zip(nodes, column, strict=True)
        if value is not None and not math.isnan(value)
    }


def more_trigger_values(
    *,
    policy: model.Policy,
    nodes: Sequence[model.NodeInfo],
    metrics: model.MetricView,
    now: float,
) -> tuple[dict[model.NodeName, float], ...]:
    """``trigger_values`` of each of ``spec.more_triggers``, in their order."""
    spec = policy.rebalance
    if spec is None:
        return ()
    return tuple(
        trigger_values(policy=policy, nodes=nodes, metrics=metrics, now=now, metric_name=t.metric)
        for t in spec.more_triggers
    )


def track_outside(
    *,
    spec: model.RebalanceSpec,
    previous: Mapping[model.NodeName, float],
    values: Mapping[model.NodeName, float],
    now: float,
    more_values: Sequence[Mapping[model.NodeName, float]] = (),
) -> dict[model.NodeName, float]:
    """Since when each node has been past a trigger (any one of them: ``values`` are the
    first's, ``more_values`` those of ``spec.more_triggers``): kept from ``previous`` while
    it stays past, ``now`` when it just went past; a node back inside, or without a fresh
    value (nothing to judge by), is dropped and starts over."""
    past = {node for node, value in values.items() if spec.outside(value)}
    for trigger, found in zip(spec.more_triggers, more_values, strict=False):
        past.update(node for node, value in found.items() if trigger.outside(value))
    return {node: previous.get(node, now) for node in sorted(past)}


def restart_after_move(
    outside_since: Mapping[model.NodeName, float], node: model.NodeName, *, now: float
) -> dict[model.NodeName, float]:
    """``outside_since`` after a pod moved off ``node``: the node starts its window over,
    so the next move from it waits until samples taken after this one still show it
    outside (a move's effect shows only after a scrape and a refresh)."""
    return {**outside_since, node: now} if node in outside_since else dict(outside_since)


def _within(history: Iterable[Eviction], since: float) -> list[Eviction]:
    return [e for e in history if e.time > since]


def _candidates(
    state: model.NodeState, policy: model.Policy, scheduler_names: frozenset[str]
) -> list[model.PodInfo]:
    """The pods of ``state`` this policy may move: its decision annotation names the
    policy (which any pod author can write), and the pod is of the policy's own
    namespace and was placed by this install (its scheduler name is the policy's and one
    of ours). Nothing else spends the policy's dry runs."""
    return [
        p
        for p in state.pods
        if p.placed_by == policy.key
        and p.namespace == policy.namespace
        and p.scheduler_name == policy.scheduler_name
        and p.scheduler_name in scheduler_names
    ]


def _eligible(
    pod: model.PodInfo,
    *,
    spec: model.RebalanceSpec,
    recently_evicted: frozenset[model.PodKey],
    now: float,
) -> Skip | None:
    if pod.deleting or pod.phase != "Running":
        return Skip.NOT_RUNNING
    if pod.owner_kind == "Job":
        if not spec.evict_job_pods:
            return Skip.JOB
    elif pod.owner_kind not in RECREATING_OWNERS:
        return Skip.NO_CONTROLLER
    if not pod.creation_timestamp or now - pod.creation_timestamp < spec.min_pod_age_s:
        return Skip.TOO_YOUNG
    if pod.key in recently_evicted:
        return Skip.RECENTLY_EVICTED
    return None


def with_pod(
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None,
    pod: model.PodInfo,
    node: model.NodeName,
    *,
    now: float,
) -> tuple[model.ClusterSnapshot, columns.NodeTable | None]:
    """``snapshot`` with ``pod`` placed on ``node`` as if bound at ``now`` (so the estimates
    and the burst penalty count it there until the metrics show it), and its node table
    (see ``shadow.without_pod``)."""
    state = snapshot.nodes.get(node)
    if state is None:
        return snapshot, table
    placed = dataclasses.replace(pod, node_name=node, bound_at=now)
    pods = (*state.pods, placed)
    rebuilt = node_state.build(state.node, pods, recent_binds=(*state.recent_binds, now))
    return columns.replace_state(snapshot, table, rebuilt)


def dry_run(
    pod: model.PodInfo, inputs: cycle.Inputs
) -> tuple[model.Decision, model.ClusterSnapshot, columns.NodeTable | None]:
    """The cycle's decision for ``pod`` as if it were pending, on ``inputs`` with the pod
    taken off its node; and that snapshot with its node table."""
    before, before_table = shadow.without_pod(inputs.snapshot, inputs.table, pod)
    pending = dataclasses.replace(pod, node_name="", bound_at=0.0)
    asked = dataclasses.replace(inputs, snapshot=before, table=before_table)
    return cycle.decide(pending, asked, detail=False), before, before_table


def _target_value(decision: model.Decision, metric: str) -> float | None:
    winner = next((v for v in decision.verdicts if v.node == decision.node), None)
    found = next((m for m in winner.metrics if m.metric == metric), None) if winner else None
    if found is None or found.value is None:
        return None
    return found.value + found.estimate


def plan(
    *,
    policy: model.Policy,
    inputs: cycle.Inputs,
    outside_since: Mapping[model.NodeName, float],
    values: Mapping[model.NodeName, float],
    history: Sequence[Eviction],
    more_values: Sequence[Mapping[model.NodeName, float]] = (),
) -> Plan:
    """The pods ``policy`` moves now (see the module docstring), on ``inputs`` (the
    cluster, the metrics and the policies a cycle reads, at its ``now``); ``values`` are
    the first trigger's fresh values (``trigger_values``) and ``more_values`` those of the
    others (``more_trigger_values``), ``outside_since`` from ``track_outside``,
    ``history`` the policy's evictions (older ones than the window and the intervals are
    ignored)."""
    snapshot, table, metrics, now = inputs.snapshot, inputs.table, inputs.metrics, inputs.now
    scheduler_names = inputs.scheduler_names
    spec = policy.rebalance
    if spec is None:
        return Plan(moves=(), nodes_outside=0, nodes_due=0, skipped=())
    triggers = spec.triggers
    by_name = {m.name: m for m in policy.metrics}
    trigger_metrics = [by_name.get(t.metric) for t in triggers]
    usages = [_usage(metrics, policy, t.metric) for t in triggers]
    found = _without_moved(
        [values, *more_values][: len(triggers)]
        + [{}] * max(0, len(triggers) - 1 - len(more_values)),
        triggers=triggers,
        metrics=trigger_metrics,
        usages=usages,
        history=history,
        snapshot=snapshot,
    )

    def past(node: model.NodeName) -> list[int]:
        return [i for i, t in enumerate(triggers) if node in found[i] and t.outside(found[i][node])]

    def excess(node: model.NodeName, i: int) -> float:
        return triggers[i].excess(found[i][node]) / _scale(triggers[i])

    due = [
        node
        for node, since in outside_since.items()
        if now - since >= spec.window_s and node in snapshot.nodes and past(node)
    ]
    # Furthest past the triggers first, so maxTotal goes to the worst nodes.
    due.sort(key=lambda node: (-sum(excess(node, i) for i in past(node)), node))
    in_interval = _within(history, now - spec.interval_s)
    per_node: dict[model.NodeName, int] = {}
    for e in in_interval:
        per_node[e.node] = per_node.get(e.node, 0) + 1
    total = len(in_interval)
    recently_evicted = frozenset(
        e.pod for e in _within(history, now - spec.window_s) if not e.blocked
    )
    per_workload: dict[str, int] = {}
    for e in _within(history, now - spec.workload_interval_s):
        if e.workload and not e.blocked:
            per_workload[e.workload] = per_workload.get(e.workload, 0) + 1
    sizes = _WorkloadSizes(snapshot, needed=spec.max_per_workload is None)
    room = rebalance_room.Room.of(triggers, found, metrics=trigger_metrics)
    moves: list[Move] = []
    skipped: list[tuple[model.PodKey, Skip]] = []
    working, working_table = snapshot, table
    dry_runs = 0
    for node in due:
        state = snapshot.nodes[node]
        outside = past(node)
        main = max(outside, key=lambda i: (excess(node, i), -i))
        # The source's value in each trigger it is past, once this pass's moves are off it.
        after = {i: triggers[i].load(found[i][node]) for i in outside}

        def weigh(pod: model.PodInfo, i: int, on: model.NodeInfo) -> float:
            return rebalance_room.contribution(
                pod=pod, node=on, metric=trigger_metrics[i], usage=usages[i]
            )

        def shift(pod: model.PodInfo, i: int, target: model.NodeName) -> float:
            """On the target, what the pod measurably uses beyond what the cycle's estimate
            counted for it (a declared amount can be far below a pod that heated up)."""
            on = snapshot.nodes.get(target)
            if on is None:
                return 0.0
            return rebalance_room.contribution(
                pod=pod, node=on.node, metric=trigger_metrics[i], usage=usages[i]
            ) - rebalance_room.own_estimate(
                pod=pod, node=on.node, metric=trigger_metrics[i], usage=usages[i]
            )

        # Victims by contribution to the trigger the node is furthest past (Koordinator's
        # order), then lowest priority, then oldest.
        candidates = sorted(
            _candidates(state, policy, scheduler_names),
            key=lambda p: (-weigh(p, main, state.node), p.priority, p.creation_timestamp, p.key),
        )
        for pod in candidates:
            reason = _eligible(pod, spec=spec, recently_evicted=recently_evicted, now=now)
            workload = pod.usage_workload
            if reason is None and total >= spec.max_total:
                reason = Skip.TOTAL_LIMIT
            elif reason is None and per_node.get(node, 0) >= spec.max_per_node:
                reason = Skip.NODE_LIMIT
            elif reason is None and per_workload.get(workload, 0) >= spec.workload_limit(
                sizes.of(workload)
            ):
                reason = Skip.WORKLOAD_LIMIT
            elif reason is None and all(
                rebalance_room.relieved(triggers[i], after[i]) for i in outside
            ):
                reason = Skip.RELIEVED
            elif reason is None and any(room.used_up(i) for i in outside):
                reason = Skip.NO_ROOM
            elif reason is None and dry_runs >= MAX_DRY_RUNS:
                reason = Skip.BUDGET
            if reason is None:
                dry_runs += 1
                decision, without, without_table = dry_run(
                    pod, dataclasses.replace(inputs, snapshot=working, table=working_table)
                )
                leaving = {i: after[i] - weigh(pod, i, state.node) for i in outside}
                reason, move = _judge(
                    decision,
                    pod=pod,
                    node=node,
                    policy=policy,
                    main=main,
                    value=found[main][node],
                    source_after=leaving,
                    shift=lambda i, target, pod=pod: shift(pod, i, target),  # type: ignore[misc]
                )
                if move is not None:
                    moves.append(move)
                    after.update(leaving)
                    per_node[node] = per_node.get(node, 0) + 1
                    per_workload[workload] = per_workload.get(workload, 0) + 1
                    total += 1
                    target = snapshot.nodes.get(move.target)
                    if target is not None:
                        for i in range(len(triggers)):
                            room.take(i, weigh(pod, i, target.node))
                    working, working_table = with_pod(
                        without, without_table, pod, move.target, now=now
                    )
            if reason is not None:
                skipped.append((pod.key, reason))
    return Plan(
        moves=tuple(moves),
        nodes_outside=len(outside_since),
        nodes_due=len(due),
        skipped=tuple(skipped),
    )


class _WorkloadSizes:
    """How many pods each workload has in the snapshot (``PodInfo.usage_workload``), for
    the per-workload limit's share of them; counted once, and only when the limit is not
    a plain count (``needed``)."""

    def __init__(self, snapshot: model.ClusterSnapshot, *, needed: bool) -> None:
        self._snapshot, self._needed = snapshot, needed
        self._counts: collections.Counter[str] | None = None

    def of(self, workload: str) -> int:
        if not self._needed:
            return 0
        if self._counts is None:
            self._counts = collections.Counter(
                pod.usage_workload for state in self._snapshot.nodes.values() for pod in state.pods
            )
        return self._counts[workload]


def _without_moved(
    found: Sequence[Mapping[model.NodeName, float]],
    *,
    triggers: Sequence[model.Trigger],
    metrics: Sequence[model.MetricSpec | None],
    usages: Sequence[model.PodUsage | None],
    history: Sequence[Eviction],
    snapshot: model.ClusterSnapshot,
) -> list[dict[model.NodeName, float]]:
    """Each trigger's values with the pods already moved off a node taken out while the
    samples still hold them: an evicted pod that is gone from its node but still in the
    per-pod answer (the rate windows still cover it) weighs in the node's sample and will
    not in the next ones. Without this, a node whose last move has not shown yet looks as
    hot as before and sheds more pods than it needs (the window can be shorter than a
    scrape, a rate window and a refresh together)."""
    adjusted = [dict(values) for values in found]
    for e in history:
        state = snapshot.nodes.get(e.node)
        if e.blocked or state is None or any(p.key == e.pod for p in state.pods):
            continue  # refused, its node gone, or still there (DryRun moves nothing)
        for i, trigger in enumerate(triggers):
            if e.node not in adjusted[i]:
                continue
            weight = rebalance_room.still_shown(
                pod=e.pod, node=state.node, metric=metrics[i], usage=usages[i]
            )
            adjusted[i][e.node] -= trigger.load(weight)
    return adjusted


def _usage(metrics: model.MetricView, policy: model.Policy, metric: str) -> model.PodUsage | None:
    series = metrics.get(model.MetricKey(policy=policy.key, metric=metric))
    return series.usage if series is not None else None


def _scale(trigger: model.Trigger) -> float:
    """A trigger's magnitude, so that excesses of different metrics compare."""
    value = trigger.above if trigger.above is not None else trigger.below
    return abs(value) if value else 1.0


def _judge(
    decision: model.Decision,
    *,
    pod: model.PodInfo,
    node: model.NodeName,
    policy: model.Policy,
    main: int,
    value: float,
    source_after: Mapping[int, float],
    shift: Callable[[int, model.NodeName], float] = lambda _i, _node: 0.0,
) -> tuple[Skip | None, Move | None]:
    """Acceptance by improvement: the dry run binds the pod under this policy, by its
    metrics, on another node that, with the pod, is inside every trigger by its margin
    and, in each trigger the source is past, at least the margin below the source after
    the move (``rebalance_room.accepts``)."""
    spec = policy.rebalance
    assert spec is not None
    if decision.outcome is not model.Outcome.BIND or decision.node is None:
        return Skip.NO_BETTER_NODE, None
    if decision.policy != policy.key:
        return Skip.OTHER_POLICY, None
    if decision.fallback_reason:
        return Skip.FALLBACK, None
    triggers = spec.triggers
    target_node = decision.node
    targets = [
        None
        if (v := _target_value(decision, t.metric)) is None
        else v + t.load(shift(i, target_node))
        for i, t in enumerate(triggers)
    ]
    main_target = targets[main]
    if decision.node == node or main_target is None:
        return Skip.NO_BETTER_NODE, None
    for i, trigger in enumerate(triggers):
        target = targets[i]
        if target is None:
            continue  # no value on the target: this trigger cannot judge it
        if not rebalance_room.accepts(
            trigger=trigger, target=target, source_after=source_after.get(i)
        ):
            return Skip.NO_BETTER_NODE, None
    winner = next(v for v in decision.verdicts if v.node == decision.node)
    return None, Move(
        pod=pod,
        node=node,
        target=decision.node,
        value=value,
        target_value=main_target,
        score=winner.score,
        trigger=triggers[main],
    )


def message(move: Move, *, policy: model.Policy, dry_run: bool) -> str:
    """The Rebalanced / WouldRebalance event message."""
    spec = policy.rebalance
    assert spec is not None
    trigger = move.trigger or spec.triggers[0]
    bound = (
        f"above {scoring.format_value(trigger.above)}"
        if trigger.above is not None
        else f"below {scoring.format_value(trigger.below or 0.0)}"
    )
    verb = "would evict" if dry_run else "evicted"
    return (
        f"{verb} {move.pod.key} of {move.pod.owner} from {move.node} "
        f"(policy {policy.key}: {trigger.metric} {scoring.format_value(move.value)} {bound} "
        f"for {_seconds(spec.window_s)}); "
        f"dry run placed it on {move.target} ({trigger.metric} "
        f"{scoring.format_value(move.target_value)}, score {scoring.format_score(move.score)})"
    )


def _seconds(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
