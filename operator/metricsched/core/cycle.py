"""One scheduling decision for one pod: policy, filters, thresholds, then score or fallback.

``schedule_one`` reads a cluster snapshot and the metric view and returns a
``model.Decision``: what to do (bind, report unschedulable, wait, skip), the event
message a person reads in ``kubectl describe pod``, and a verdict for every node that
``metricsched explain`` renders. The same inputs always give the same decision: the clock,
the round-robin counter and the random seed are arguments.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Sequence
from typing import Final

from metricsched.core import filters, model, policy, scoring
from metricsched.core.plugins import (
    dynamic_resources,
    kube_scores,
    node_volume_limits,
    preemption,
    volume_binding,
)
from metricsched.core.plugins.kube_scores import node_resources_fit

MESSAGE_LIMIT: Final = 1024
"""Bytes an event note may hold; kube-scheduler truncates to it the same way."""

NO_FRESH_VALUES: Final = "no fresh metric values for any feasible node"


def truncate_message(message: str, *, limit: int = MESSAGE_LIMIT) -> str:
    """Cut ``message`` to ``limit`` UTF-8 bytes, ending with " ..." when cut."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    suffix = " ..."
    head = encoded[: limit - len(suffix)].decode(errors="ignore")  # never split a character
    return head + suffix


def _decision(
    *,
    pod: model.PodInfo,
    policy_key: model.PolicyKey | None,
    outcome: model.Outcome,
    message: str,
    node: model.NodeName | None = None,
    fallback_reason: str = "",
    verdicts: tuple[model.NodeVerdict, ...] = (),
) -> model.Decision:
    return model.Decision(
        pod=pod.key,
        policy=policy_key,
        outcome=outcome,
        node=node,
        fallback_reason=fallback_reason,
        verdicts=verdicts,
        message=truncate_message(message),
    )


def _skip_reason(pod: model.PodInfo, scheduler_names: frozenset[str]) -> str | None:
    if pod.scheduler_name not in scheduler_names:
        ours = ", ".join(sorted(scheduler_names))
        return f"pod {pod.key} is for scheduler {pod.scheduler_name!r}, not {ours}"
    if pod.node_name:
        return f"pod {pod.key} is already bound to {pod.node_name}"
    if pod.deleting:
        return f"pod {pod.key} is being deleted"
    schedulable, why = filters.is_schedulable_now(pod)
    if not schedulable:
        return why or f"pod {pod.key} cannot be scheduled now"
    return None


# --- fallback strategies ---------------------------------------------------------------


# The fallback's LeastAllocated / MostAllocated are kube-scheduler's NodeResourcesFit score.
allocation_score = node_resources_fit.allocation_score


def _pick_by_strategy(
    *,
    strategy: model.FallbackStrategy,
    pod: model.PodInfo,
    states: Sequence[model.NodeState],
    burst_counts: Sequence[int],
    rr_counter: int,
    seed: int,
) -> tuple[int, tuple[float, ...]]:
    """The index of the node ``strategy`` picks among ``states`` (sorted by name), and the
    strategy's score of each (0 for RoundRobin and Random)."""
    names = [state.node.name for state in states]
    if strategy in (
        model.FallbackStrategy.LEAST_ALLOCATED,
        model.FallbackStrategy.MOST_ALLOCATED,
    ):
        scores = tuple(
            float(allocation_score(state=state, pod=pod, strategy=strategy)) for state in states
        )
        best = scoring.ranking(
            totals=scores, burst_counts=burst_counts, names=names, seed=seed, count=1
        )
        return best[0], scores
    zeros = (0.0,) * len(states)
    if strategy is model.FallbackStrategy.ROUND_ROBIN:
        return rr_counter % len(states), zeros
    if strategy is model.FallbackStrategy.RANDOM:
        return random.Random(seed).randrange(len(states)), zeros
    raise ValueError(f"strategy {strategy} does not pick a node")


# --- messages --------------------------------------------------------------------------


def _scored_message(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    winner: model.NodeVerdict,
    runner_up: model.NodeVerdict | None,
    penalty: float,
) -> str:
    parts = [
        f"{metric.metric} "
        f"{'missing' if metric.value is None else scoring.format_value(metric.value)}"
        f" → {scoring.format_score(metric.score)}"
        for metric in winner.metrics
    ]
    if penalty:
        parts.append(f"burst -{scoring.format_score(penalty)}")
    terms = ", ".join(parts)
    if winner.kube:
        terms += "; kube: " + ", ".join(kube_scores.term_text(term) for term in winner.kube)
    text = (
        f"Successfully assigned {pod.key} to {winner.node} (policy {chosen.key}: "
        f"score {scoring.format_score(winner.score)} [{terms}]"
    )
    if runner_up is not None:
        text += f"; runner-up {runner_up.node} {scoring.format_score(runner_up.score)}"
    return text + ")"


def _fallback_message(
    *, pod: model.PodInfo, chosen: model.Policy, node: model.NodeName, reason: str
) -> str:
    if policy.is_default(chosen):
        return f"Successfully assigned {pod.key} to {node} (default policy: {chosen.fallback})"
    return (
        f"Successfully assigned {pod.key} to {node} "
        f"(policy {chosen.key}: fallback {chosen.fallback} because {reason})"
    )


def _wait_message(*, pod: model.PodInfo, chosen: model.Policy, reason: str) -> str:
    if policy.is_default(chosen):
        return (
            f"waiting for a SchedulingPolicy: none in namespace {pod.namespace} selects "
            "this pod and the default policy's strategy is Wait"
        )
    return f"waiting for metrics: {reason} (policy {chosen.key}: fallback Wait)"


# --- the cycle -------------------------------------------------------------------------


def _infeasible(
    node: model.NodeName,
    reasons: Sequence[str],
    burst: int,
    metrics: tuple[model.MetricScore, ...] = (),
) -> model.NodeVerdict:
    return model.NodeVerdict(
        node=node,
        feasible=False,
        reason="; ".join(reasons),
        metrics=metrics,
        burst_count=burst,
        score=0.0,
    )


def filter_nodes(
    pod: model.PodInfo, snapshot: model.ClusterSnapshot
) -> tuple[str, dict[model.NodeName, tuple[str, ...]]]:
    """kube-scheduler's PreFilter and Filter for ``pod``: a refusal that rules out every
    node ("" when none) or, without one, each node's reasons (empty: it passes them all)."""
    volumes, refusal = volume_binding.bound_volumes(pod, snapshot)
    refusal = refusal or dynamic_resources.pre_filter(pod)
    if refusal:
        return refusal, {}
    reasons = filters.run_filters(pod, snapshot, namespace_labels=snapshot.namespace_labels)
    if volume_limits := node_volume_limits.pre_filter(volumes):
        reasons = node_volume_limits.run_filter(
            state=volume_limits, snapshot=snapshot, reasons=reasons
        )
    if volumes:
        reasons = volume_binding.run_filter(volumes=volumes, snapshot=snapshot, reasons=reasons)
    return "", reasons


def schedule_one(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    policies: Sequence[model.Policy],
    metrics: model.MetricView,
    default_fallback: model.FallbackStrategy,
    now: float,
    scheduler_names: frozenset[str],
    rr_counter: int,
    seed: int,
    detail: bool = True,
    namespace_labels: filters.NamespaceLabels | None = None,
) -> model.Decision:
    """Decide where ``pod`` goes, or why it does not go anywhere now.

    ``default_fallback`` is the strategy of the operator's default policy (pods no
    SchedulingPolicy governs). ``rr_counter`` and ``seed`` drive the RoundRobin and Random
    fallback strategies; ``now`` is the time that decides freshness and recent binds.

    Every node gets a verdict. With ``detail`` off (the operator's hot path), a pod that
    is placed by its metrics carries the verdicts of the winner and the runner-up only
    (all the event message and the log need): at thousands of nodes the others cost more
    than the decision itself. ``metricsched explain`` keeps it on.

    ``namespace_labels`` (namespace name -> labels) lets pod (anti-)affinity terms with a
    namespaceSelector be decided as kube-scheduler decides them; without it, the
    snapshot's (the runtime's Namespace watch) are used, and without those such a term
    gets the restrictive answer (see ``filters.run_filters``).
    """
    if namespace_labels is not None:
        snapshot = dataclasses.replace(snapshot, namespace_labels=namespace_labels)
    skip = _skip_reason(pod, scheduler_names)
    if skip is not None:
        return _decision(pod=pod, policy_key=None, outcome=model.Outcome.SKIP, message=skip)

    choice = policy.select_policy(pod, policies)
    if choice.reason is policy.ChoiceReason.PINNED_MISSING:
        return _decision(
            pod=pod,
            policy_key=choice.pinned,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=f"policy {choice.pinned} named by label {policy.POLICY_LABEL} not found",
        )
    chosen = choice.policy or policy.default_policy(default_fallback)
    policy_key = None if policy.is_default(chosen) else chosen.key

    if pod.unsupported:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=(
                f"metricsched does not support {', '.join(pod.unsupported)} yet; "
                "remove it from the pod or let another scheduler place the pod "
                "(spec.schedulerName)"
            ),
        )

    names = sorted(snapshot.nodes)
    refusal, filter_reasons = filter_nodes(pod, snapshot)
    if refusal and names:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=filters.fit_error_message(len(names), {}, pre_filter_msg=refusal)
            + preemption.suffix(pod=pod, snapshot=snapshot, reasons={}),
        )
    if not names:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=filters.fit_error_message(0, {}),
        )
    states = [snapshot.nodes[name] for name in names]
    bursts = [
        scoring.burst_count(
            recent_binds=state.recent_binds, now=now, window_s=chosen.burst_window_s
        )
        if state.recent_binds
        else 0
        for state in states
    ]
    verdicts: list[model.NodeVerdict | None] = [None] * len(names)
    feasible: list[int] = []  # indices into names/states
    for index, name in enumerate(names):
        reasons = filter_reasons.get(name, ())
        if reasons:
            verdicts[index] = _infeasible(name, reasons, bursts[index])
        else:
            feasible.append(index)

    def finish() -> tuple[model.NodeVerdict, ...]:
        assert all(verdict is not None for verdict in verdicts)
        return tuple(verdict for verdict in verdicts if verdict is not None)

    if not feasible:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=filters.fit_error_message(
                len(names), filter_reasons, pre_filter_msg=filters.pre_filter(pod)
            )
            + preemption.suffix(pod=pod, snapshot=snapshot, reasons=filter_reasons),
            verdicts=finish(),
        )

    # Fallback: no metrics to score by (the default policy), or no data to trust.
    fallback_reason = ""
    columns: tuple[scoring.Column, ...] = ()
    if chosen.metrics:
        columns = scoring.policy_columns(
            policy=chosen,
            nodes=[states[index].node for index in feasible],
            metrics=metrics,
            now=now,
        )
        unreachable = scoring.unreachable_error(policy=chosen, metrics=metrics)
        if unreachable is not None:
            fallback_reason = f"Prometheus unreachable: {unreachable}"
        elif all(value is None for column in columns for value in column):
            fallback_reason = NO_FRESH_VALUES
    if not chosen.metrics or fallback_reason:
        return _fallback(
            pod=pod,
            chosen=chosen,
            policy_key=policy_key,
            reason=fallback_reason,
            feasible=feasible,
            states=states,
            bursts=bursts,
            verdicts=verdicts,
            rr_counter=rr_counter,
            seed=seed,
        )

    # Thresholds and onMissing: Exclude.
    threshold_reasons = scoring.metric_filter(
        policy=chosen, columns=columns, node_count=len(feasible)
    )
    passing: list[int] = []  # positions in feasible (and in each column)
    for position, reasons in enumerate(threshold_reasons):
        if reasons:
            index = feasible[position]
            values = tuple(
                model.MetricScore(metric=metric.name, value=column[position], score=0.0)
                for metric, column in zip(chosen.metrics, columns, strict=True)
            )
            verdicts[index] = _infeasible(names[index], reasons, bursts[index], values)
        else:
            passing.append(position)
    if not passing:
        extra = collections.Counter(reason for reasons in threshold_reasons for reason in reasons)
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=filters.fit_error_message(len(names), filter_reasons, extra)
            + preemption.suffix(pod=pod, snapshot=snapshot, reasons=filter_reasons),
            verdicts=finish(),
        )

    # Score the nodes that passed everything.
    scored_columns = tuple(tuple([column[position] for position in passing]) for column in columns)
    scored_indices = [feasible[position] for position in passing]
    scored_bursts = [bursts[index] for index in scored_indices]
    kube_terms = (
        kube_scores.score_terms(
            pod=pod,
            nodes=[states[index] for index in scored_indices],
            snapshot=snapshot,
            weights=chosen.kube_weights,
        )
        if chosen.kube_weights
        else ()
    )
    scores = scoring.score_nodes(
        policy=chosen, columns=scored_columns, burst_counts=scored_bursts, kube=kube_terms
    )
    top = scoring.ranking(
        totals=scores.totals,
        burst_counts=scored_bursts,
        names=[names[index] for index in scored_indices],
        seed=seed,
    )
    metric_names = [metric.name for metric in chosen.metrics]
    detailed = range(len(scored_indices)) if detail else top
    per_node_metrics: dict[int, tuple[model.MetricScore, ...]] = {
        slot: tuple(
            map(
                model.MetricScore,
                metric_names,
                [column[slot] for column in scored_columns],
                [metric_scores[slot] for metric_scores in scores.per_metric],
            )
        )
        for slot in detailed
    }

    def verdict(slot: int) -> model.NodeVerdict:
        return model.NodeVerdict(
            names[scored_indices[slot]],
            True,
            "",
            per_node_metrics.get(slot, ()),
            scored_bursts[slot],
            scores.totals[slot],
            tuple(
                model.KubeScore(term.plugin, term.scores[slot], term.weight) for term in scores.kube
            ),
        )

    if detail:
        for slot, index in enumerate(scored_indices):
            verdicts[index] = verdict(slot)
        final = finish()
        winner = verdicts[scored_indices[top[0]]]
        runner_up = verdicts[scored_indices[top[1]]] if len(top) > 1 else None
    else:
        # The hot path: the winner and the runner-up are all the event and the log need;
        # one verdict per node would cost more than the decision at thousands of nodes.
        final = tuple(verdict(slot) for slot in top)
        winner, runner_up = final[0], (final[1] if len(final) > 1 else None)
    assert winner is not None
    return _decision(
        pod=pod,
        policy_key=policy_key,
        outcome=model.Outcome.BIND,
        node=winner.node,
        message=_scored_message(
            pod=pod,
            chosen=chosen,
            winner=winner,
            runner_up=runner_up,
            penalty=scores.penalties[top[0]],
        ),
        verdicts=final,
    )


def _fallback(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    policy_key: model.PolicyKey | None,
    reason: str,
    feasible: Sequence[int],
    states: Sequence[model.NodeState],
    bursts: Sequence[int],
    verdicts: list[model.NodeVerdict | None],
    rr_counter: int,
    seed: int,
) -> model.Decision:
    """Let the policy's strategy decide among the filter-feasible nodes (thresholds are
    not applied: there is no data to trust)."""
    strategy = chosen.fallback
    candidates = [states[index] for index in feasible]
    if strategy is model.FallbackStrategy.WAIT:
        scores: tuple[float, ...] = (0.0,) * len(candidates)
        picked: int | None = None
    else:
        picked, scores = _pick_by_strategy(
            strategy=strategy,
            pod=pod,
            states=candidates,
            burst_counts=[bursts[index] for index in feasible],
            rr_counter=rr_counter,
            seed=seed,
        )
    for position, index in enumerate(feasible):
        verdicts[index] = model.NodeVerdict(
            node=states[index].node.name,
            feasible=True,
            reason="",
            metrics=(),
            burst_count=bursts[index],
            score=scores[position],
        )
    final = tuple(verdict for verdict in verdicts if verdict is not None)
    if picked is None:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.WAIT,
            fallback_reason=reason,
            message=_wait_message(pod=pod, chosen=chosen, reason=reason),
            verdicts=final,
        )
    node = candidates[picked].node.name
    return _decision(
        pod=pod,
        policy_key=policy_key,
        outcome=model.Outcome.BIND,
        node=node,
        fallback_reason=reason,
        message=_fallback_message(pod=pod, chosen=chosen, node=node, reason=reason),
        verdicts=final,
    )
