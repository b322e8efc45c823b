"""Rebalancing: which pods a policy moves off nodes whose metric stays past its trigger.

``plan`` reads what the cycle reads (the snapshot and the metric view) plus two things the
runtime keeps: since when each node has been past the trigger (``track_outside``) and the
policy's past evictions. It returns the pods to evict now, each with the node a dry run
of the cycle (``core.cycle.schedule_one``, the pod as if pending, on the snapshot without
it) chose for it. A pod moves only when all of these hold:

- metricsched placed it under this policy (its ``metricsched.io/decision`` annotation
  names the policy), it runs, and its controller recreates it (``RECREATING_OWNERS``);
- it is at least ``minPodAge`` old and was not evicted (by name) within ``window`` (an
  eviction a PodDisruptionBudget refused is tried again after ``interval``);
- its node has been past the trigger for a whole ``window``, counted again from each
  move off it (``restart_after_move``), so that a node's next move waits for samples
  that show the last one;
- fewer than ``maxPerNode`` evictions from its node, and fewer than ``maxTotal`` in all,
  happened within ``interval``;
- the dry run places it under this same policy, by its metrics (no fallback), on another
  node whose trigger value, with the pod's estimate, is at least ``margin`` inside the
  trigger (hysteresis: a pod never moves to a node about to trip the trigger itself).

Each move is applied to the working snapshot before the next dry run, so two pods of a
pass do not both count on the same free room. Nodes furthest past the trigger go first;
on a node, the lowest priority, then the oldest pod.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from metricsched.core import columns, cycle, model, node_state, scoring, shadow

MAX_DRY_RUNS: Final = 64
"""Dry runs of the cycle per policy per pass at most: each costs a scheduling cycle, and
a pass runs on the operator's event loop. Candidates past it wait for the next pass."""

RECREATING_OWNERS: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController", "Job"})
"""Controller kinds that recreate an evicted pod (a Deployment's pods belong to a ReplicaSet)."""


class Skip(enum.StrEnum):
    """Why a pod on a node past the trigger stays (reported by ``plan``)."""

    NOT_RUNNING = "not running"
    NO_CONTROLLER = "no controller recreates it"
    TOO_YOUNG = "younger than minPodAge"
    RECENTLY_EVICTED = "evicted within the window"
    NODE_LIMIT = "maxPerNode reached for the interval"
    TOTAL_LIMIT = "maxTotal reached for the interval"
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


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    """A pod to evict now, and where the dry run of the cycle would place it."""

    pod: model.PodInfo
    node: model.NodeName
    target: model.NodeName
    value: float  # the trigger metric on ``node``
    target_value: float  # on ``target``, with the estimate of the pods it does not show yet
    score: float  # the dry run's score of ``target``


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
) -> dict[model.NodeName, float]:
    """The fresh sampled value of the trigger metric on each node that has one."""
    spec = policy.rebalance
    metric = next((m for m in policy.metrics if spec and m.name == spec.metric), None)
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


def track_outside(
    *,
    spec: model.RebalanceSpec,
    previous: Mapping[model.NodeName, float],
    values: Mapping[model.NodeName, float],
    now: float,
) -> dict[model.NodeName, float]:
    """Since when each node has been past the trigger: kept from ``previous`` while it
    stays past, ``now`` when it just went past; a node back inside, or without a fresh
    value (nothing to judge by), is dropped and starts over."""
    return {node: previous.get(node, now) for node, value in values.items() if spec.outside(value)}


def restart_after_move(
    outside_since: Mapping[model.NodeName, float], node: model.NodeName, *, now: float
) -> dict[model.NodeName, float]:
    """``outside_since`` after a pod moved off ``node``: the node starts its window over,
    so the next move from it waits until samples taken after this one still show it
    outside (a move's effect shows only after a scrape and a refresh)."""
    return {**outside_since, node: now} if node in outside_since else dict(outside_since)


def _within(history: Iterable[Eviction], since: float) -> list[Eviction]:
    return [e for e in history if e.time > since]


def _running_candidates(state: model.NodeState, policy: model.Policy) -> list[model.PodInfo]:
    mine = [p for p in state.pods if p.placed_by == policy.key]
    return sorted(mine, key=lambda p: (p.priority, p.creation_timestamp, p.key))


def _eligible(
    pod: model.PodInfo,
    *,
    spec: model.RebalanceSpec,
    recently_evicted: frozenset[model.PodKey],
    now: float,
) -> Skip | None:
    if pod.deleting or pod.phase != "Running":
        return Skip.NOT_RUNNING
    if pod.owner_kind not in RECREATING_OWNERS:
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
    *,
    pod: model.PodInfo,
    policy: model.Policy,
    policies: Sequence[model.Policy],
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None,
    metrics: model.MetricView,
    default_fallback: model.FallbackStrategy,
    scheduler_names: frozenset[str],
    now: float,
) -> tuple[model.Decision, model.ClusterSnapshot, columns.NodeTable | None]:
    """The cycle's decision for ``pod`` as if it were pending, on ``snapshot`` without it;
    and that snapshot with its node table."""
    before, before_table = shadow.without_pod(snapshot, table, pod)
    pending = dataclasses.replace(pod, node_name="", bound_at=0.0)
    decision = cycle.schedule_one(
        pod=pending,
        snapshot=before,
        table=before_table,
        policies=policies,
        metrics=metrics,
        default_fallback=default_fallback,
        now=now,
        scheduler_names=scheduler_names,
        rr_counter=0,
        seed=zlib.crc32(pod.uid.encode()),
        detail=False,
    )
    return decision, before, before_table


def _target_value(decision: model.Decision, metric: str) -> float | None:
    winner = next((v for v in decision.verdicts if v.node == decision.node), None)
    found = next((m for m in winner.metrics if m.metric == metric), None) if winner else None
    if found is None or found.value is None:
        return None
    return found.value + found.estimate


def plan(
    *,
    policy: model.Policy,
    policies: Sequence[model.Policy],
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None = None,
    metrics: model.MetricView,
    outside_since: Mapping[model.NodeName, float],
    values: Mapping[model.NodeName, float],
    history: Sequence[Eviction],
    default_fallback: model.FallbackStrategy,
    scheduler_names: frozenset[str],
    now: float,
) -> Plan:
    """The pods ``policy`` moves now (see the module docstring); ``values`` are the
    trigger's fresh values (``trigger_values``), ``outside_since`` from ``track_outside``,
    ``history`` the policy's evictions (older ones than window and interval are ignored);
    ``table`` the snapshot's node table, as its maker hands it out beside it."""
    spec = policy.rebalance
    if spec is None:
        return Plan(moves=(), nodes_outside=0, nodes_due=0, skipped=())
    due = [
        node
        for node, since in outside_since.items()
        if now - since >= spec.window_s and node in snapshot.nodes and node in values
    ]
    # Furthest past the trigger first, so maxTotal goes to the worst nodes.
    sign = 1.0 if spec.above is not None else -1.0
    due.sort(key=lambda node: (-sign * values[node], node))
    in_interval = _within(history, now - spec.interval_s)
    per_node: dict[model.NodeName, int] = {}
    for e in in_interval:
        per_node[e.node] = per_node.get(e.node, 0) + 1
    total = len(in_interval)
    recently_evicted = frozenset(
        e.pod for e in _within(history, now - spec.window_s) if not e.blocked
    )
    moves: list[Move] = []
    skipped: list[tuple[model.PodKey, Skip]] = []
    working, working_table = snapshot, table
    dry_runs = 0
    for node in due:
        for pod in _running_candidates(snapshot.nodes[node], policy):
            reason = _eligible(pod, spec=spec, recently_evicted=recently_evicted, now=now)
            if reason is None and total >= spec.max_total:
                reason = Skip.TOTAL_LIMIT
            elif reason is None and per_node.get(node, 0) >= spec.max_per_node:
                reason = Skip.NODE_LIMIT
            elif reason is None and dry_runs >= MAX_DRY_RUNS:
                reason = Skip.BUDGET
            if reason is None:
                dry_runs += 1
                decision, without, without_table = dry_run(
                    pod=pod,
                    policy=policy,
                    policies=policies,
                    snapshot=working,
                    table=working_table,
                    metrics=metrics,
                    default_fallback=default_fallback,
                    scheduler_names=scheduler_names,
                    now=now,
                )
                reason, move = _judge(
                    decision, pod=pod, node=node, spec=spec, policy=policy, value=values[node]
                )
                if move is not None:
                    moves.append(move)
                    per_node[node] = per_node.get(node, 0) + 1
                    total += 1
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


def _judge(
    decision: model.Decision,
    *,
    pod: model.PodInfo,
    node: model.NodeName,
    spec: model.RebalanceSpec,
    policy: model.Policy,
    value: float,
) -> tuple[Skip | None, Move | None]:
    if decision.outcome is not model.Outcome.BIND or decision.node is None:
        return Skip.NO_BETTER_NODE, None
    if decision.policy != policy.key:
        return Skip.OTHER_POLICY, None
    if decision.fallback_reason:
        return Skip.FALLBACK, None
    target_value = _target_value(decision, spec.metric)
    if decision.node == node or target_value is None or not spec.inside_by_margin(target_value):
        return Skip.NO_BETTER_NODE, None
    winner = next(v for v in decision.verdicts if v.node == decision.node)
    return None, Move(
        pod=pod,
        node=node,
        target=decision.node,
        value=value,
        target_value=target_value,
        score=winner.score,
    )


def message(move: Move, *, policy: model.Policy, dry_run: bool) -> str:
    """The Rebalanced / WouldRebalance event message."""
    spec = policy.rebalance
    assert spec is not None
    bound = (
        f"above {scoring.format_value(spec.above)}"
        if spec.above is not None
        else f"below {scoring.format_value(spec.below or 0.0)}"
    )
    verb = "would evict" if dry_run else "evicted"
    return (
        f"{verb} {move.pod.key} of {move.pod.owner} from {move.node} "
        f"(policy {policy.key}: {spec.metric} {scoring.format_value(move.value)} {bound} "
        f"for {_seconds(spec.window_s)}); "
        f"dry run placed it on {move.target} ({spec.metric} "
        f"{scoring.format_value(move.target_value)}, score {scoring.format_score(move.score)})"
    )


def _seconds(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
