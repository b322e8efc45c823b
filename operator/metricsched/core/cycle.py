"""One scheduling decision for one pod: policy, filters, thresholds, then score or fallback.

``schedule_one`` reads a cluster snapshot and the metric view and returns a
``model.Decision``: what to do (bind, report unschedulable, wait, skip), the event
message a person reads in ``kubectl describe pod``, and a verdict for every node that
``metricsched explain`` renders. The same inputs always give the same decision: the clock,
the round-robin counter and the random seed are arguments.

``Inputs`` is everything a cycle reads besides the pod, as one object: the scheduler,
``metricsched explain``, shadow evaluation and rebalancing each get it from the runtime's
one builder (``runtime.scheduler.cycle_inputs``) and call ``decide``; shadow and
rebalance change only what their question changes (the pod's node taken out, the
policy). ``seed_of`` is the one rule for a pod's random seed, so that the same pod asked
about twice gets the same draw.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from metricsched.core import (
    api_formats,
    columns,
    estimate,
    framework,
    model,
    phases,
    pod_budget,
    policy,
    policy_defaults,
    policy_installs,
    policy_selection,
    profile,
    reservation,
    scoring,
    selectors,
)
from metricsched.core.plugins import fallback, kube_scores, preemption

NO_FRESH_VALUES: Final = phases.NO_FRESH_VALUES
FAIL_OPEN_NOTE: Final = "with it no node passes the thresholds the samples allow"
SOFT_NOTE: Final = "Soft threshold lifted, every node was outside it"


def _decision(
    *,
    pod: model.PodInfo,
    policy_key: model.PolicyKey | None,
    outcome: model.Outcome,
    message: str,
    node: model.NodeName | None = None,
    fallback_reason: str = "",
    fallback_kind: model.FallbackKind | None = None,
    verdicts: tuple[model.NodeVerdict, ...] = (),
    estimate_basis: Mapping[str, str] | None = None,
    estimate_fail_open: tuple[str, ...] = (),
    soft_lifted: tuple[str, ...] = (),
) -> model.Decision:
    return model.Decision(
        pod=pod.key,
        policy=policy_key,
        outcome=outcome,
        node=node,
        fallback_reason=fallback_reason,
        verdicts=verdicts,
        message=api_formats.truncate_message(message),
        fallback_kind=fallback_kind if fallback_reason else None,
        estimate_basis=estimate_basis or {},
        estimate_fail_open=estimate_fail_open,
        soft_lifted=soft_lifted,
    )


def _skip_reason(pod: model.PodInfo, scheduler_names: frozenset[str]) -> str | None:
    if pod.scheduler_name not in scheduler_names:
        ours = ", ".join(sorted(scheduler_names))
        return f"pod {pod.key} is for scheduler {pod.scheduler_name!r}, not {ours}"
    if pod.node_name:
        return f"pod {pod.key} is already bound to {pod.node_name}"
    if pod.deleting:
        return f"pod {pod.key} is being deleted"
    if pod.scheduling_gates:
        return f"pod has scheduling gates: {', '.join(pod.scheduling_gates)}"
    return None


# --- fallback strategies ---------------------------------------------------------------


# --- messages --------------------------------------------------------------------------


def _scored_message(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    winner: model.NodeVerdict,
    runner_up: model.NodeVerdict | None,
    penalty: float,
    basis: Mapping[str, str],
    ignored: Sequence[str] = (),
    lifted: Mapping[str, int] | None = None,
) -> str:
    # A source other than the policy's usual kinds is named after its metric
    # ("cpu from metrics-server 0.42 → 81").
    labels = {
        m.name: f" from {m.source.event_label}" for m in chosen.metrics if m.source.event_label
    }
    parts = [
        f"{metric.metric}{labels.get(metric.metric, '')}"
        f" {scoring.format_sample(metric, basis=basis.get(metric.metric, ''))}"
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
    if ignored:
        text += f"; learned estimate of {', '.join(ignored)} left out: {FAIL_OPEN_NOTE}"
    if lifted:
        text += f"; {SOFT_NOTE}: " + ", ".join(f"{n} {r}" for r, n in lifted.items())
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
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    *,
    table: columns.NodeTable | None = None,
    memo: framework.Memo | None = None,
) -> tuple[str, dict[model.NodeName, tuple[str, ...]]]:
    """kube-scheduler's PreFilter and Filter for ``pod``: a refusal that rules out every
    node ("" when none) or, without one, each node's reasons (empty: it passes them all)."""
    cycle = framework.CycleState.start(pod, snapshot, table=table, memo=memo)
    found = profile.find_feasible(cycle)
    if found.refusal:
        return found.refusal, {}
    return "", {name: found.rejected.get(name, ()) for name in cycle.table.names}


def seed_of(pod: model.PodInfo) -> int:
    """The seed of ``pod``'s Random strategy and tie-breaks: the CRC-32 of its uid, so
    that the scheduler, ``explain``, shadow and rebalance draw the same for one pod."""
    return zlib.crc32(pod.uid.encode())


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    """What one cycle reads besides the pod (``schedule_one``'s arguments of the same
    names): the cluster at ``now``, the policies, the metric view, the default policy's
    strategy, the scheduler names this install serves, the other installs' policies of
    the pod's namespace, and the runtime's memo (None: start from nothing)."""

    snapshot: model.ClusterSnapshot
    table: columns.NodeTable | None
    policies: Sequence[model.Policy]
    metrics: model.MetricView
    default_fallback: model.FallbackStrategy
    scheduler_names: frozenset[str]
    now: float
    elsewhere: Sequence[policy_installs.Elsewhere] = ()
    namespace_labels: selectors.NamespaceLabels | None = None
    memo: framework.Memo | None = None


def decide(
    pod: model.PodInfo, inputs: Inputs, *, rr_counter: int = 0, detail: bool = True
) -> model.Decision:
    """``schedule_one`` for ``pod`` on ``inputs``, with the pod's own seed (``seed_of``)."""
    return schedule_one(
        pod=pod,
        snapshot=inputs.snapshot,
        table=inputs.table,
        policies=inputs.policies,
        metrics=inputs.metrics,
        default_fallback=inputs.default_fallback,
        now=inputs.now,
        scheduler_names=inputs.scheduler_names,
        elsewhere=inputs.elsewhere,
        rr_counter=rr_counter,
        seed=seed_of(pod),
        detail=detail,
        namespace_labels=inputs.namespace_labels,
        memo=inputs.memo,
    )


def schedule_one(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None = None,
    policies: Sequence[model.Policy],
    metrics: model.MetricView,
    default_fallback: model.FallbackStrategy,
    now: float,
    scheduler_names: frozenset[str],
    elsewhere: Sequence[policy_installs.Elsewhere] = (),
    rr_counter: int,
    seed: int,
    detail: bool = True,
    namespace_labels: selectors.NamespaceLabels | None = None,
    memo: framework.Memo | None = None,
) -> model.Decision:
    """Decide where ``pod`` goes, or why it does not go anywhere now: find the feasible
    nodes (``core.profile``), score them (the policy's metrics blended with
    kube-scheduler's scores) or let the fallback pick, and select one.

    ``default_fallback`` is the strategy of the operator's default policy (pods no
    SchedulingPolicy governs). ``rr_counter`` and ``seed`` drive the RoundRobin and Random
    fallback strategies; ``now`` is the time that decides freshness and recent binds.
    ``memo`` carries work derived from unchanged pods and nodes across cycles (the
    runtime passes its own; without one the cycle starts from nothing). ``table`` is the
    snapshot's node table as its maker hands it out beside it (the runtime cache's
    ``table``); one that does not mirror the snapshot is never read (``columns.table_of``),
    and without one the cycle builds its own.

    Every node gets a verdict. With ``detail`` off (the operator's hot path), a pod that
    is placed by its metrics or by a fallback strategy carries the verdicts of the winner
    and the runner-up only (all the event message, the decision record and the log need),
    and a pod left waiting by the strategy Wait none: at thousands of nodes the others
    cost more than the decision itself. ``metricsched explain`` keeps it on.

    ``namespace_labels`` (namespace name -> labels) lets pod (anti-)affinity terms with a
    namespaceSelector be decided as kube-scheduler decides them; without it, the
    snapshot's (the runtime's Namespace watch) are used, and without those such a term
    gets the restrictive answer (see ``plugins.inter_pod_affinity``).

    ``elsewhere`` are the policies of the pod's namespace that another install serves
    (the runtime's light index of them): each that selects the pod is named at the end of
    its Scheduled or FailedScheduling message, since it does not place the pod.
    """
    prepared = prepare(
        pod=pod,
        policies=policies,
        default_fallback=default_fallback,
        scheduler_names=scheduler_names,
        elsewhere=elsewhere,
    )
    if isinstance(prepared, model.Decision):
        return prepared
    return decide_prepared(
        pod=pod,
        prepared=prepared,
        snapshot=snapshot,
        table=table,
        metrics=metrics,
        now=now,
        rr_counter=rr_counter,
        seed=seed,
        detail=detail,
        namespace_labels=namespace_labels,
        memo=memo,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Prepared:
    """What the cycle works out before it looks at any node, from the pod's class (every
    field but its name, uid and creation time: ``core.class_run.same_class``), the policies,
    the default strategy, the scheduler names and the other installs' policies alone: the
    policy that governs the pod and the note naming other installs' policies."""

    chosen: model.Policy
    policy_key: model.PolicyKey | None
    note: str


def prepare(
    *,
    pod: model.PodInfo,
    policies: Sequence[model.Policy],
    default_fallback: model.FallbackStrategy,
    scheduler_names: frozenset[str],
    elsewhere: Sequence[policy_installs.Elsewhere] = (),
) -> Prepared | model.Decision:
    """The part of ``schedule_one`` before the nodes: the decision itself when the pod is
    skipped or refused whatever the nodes (no policy it pins, an unsupported feature, too
    expensive to evaluate), else what ``decide_prepared`` needs."""
    skip = _skip_reason(pod, scheduler_names)
    if skip is not None:
        return _decision(pod=pod, policy_key=None, outcome=model.Outcome.SKIP, message=skip)
    note = policy_installs.elsewhere_note(pod, elsewhere) if elsewhere else ""
    choice = policy_selection.select_policy(pod, policies)
    if choice.reason is policy_selection.ChoiceReason.PINNED_MISSING:
        return _with_note(
            _decision(
                pod=pod,
                policy_key=choice.pinned,
                outcome=model.Outcome.UNSCHEDULABLE,
                message=(
                    f"policy {choice.pinned} named by label {policy_defaults.POLICY_LABEL}"
                    " not found"
                ),
            ),
            note,
        )
    chosen = choice.policy or policy.default_policy(default_fallback)
    policy_key = None if policy.is_default(chosen) else chosen.key
    refusal = profile.unsupported_reason(pod) or pod_budget.refusal(pod)
    if refusal:
        return _with_note(
            _decision(
                pod=pod,
                policy_key=policy_key,
                outcome=model.Outcome.UNSCHEDULABLE,
                message=refusal,
            ),
            note,
        )
    return Prepared(chosen=chosen, policy_key=policy_key, note=note)


def _with_note(decision: model.Decision, note: str) -> model.Decision:
    """``decision`` with the note on other installs' policies at the end of its message."""
    if not note or decision.outcome is model.Outcome.SKIP:
        return decision
    # The note is what a user of the other install needs: it survives the cut (up to half
    # the message, for a namespace of many such policies).
    note = api_formats.truncate_message(note, limit=api_formats.MESSAGE_LIMIT // 2)
    limit = api_formats.MESSAGE_LIMIT - len(note.encode())
    return dataclasses.replace(
        decision, message=api_formats.truncate_message(decision.message, limit=limit) + note
    )


Finder = Callable[[framework.CycleState], framework.FilterOutcome]


def decide_prepared(
    *,
    pod: model.PodInfo,
    prepared: Prepared,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None,
    metrics: model.MetricView,
    now: float,
    rr_counter: int,
    seed: int,
    detail: bool = True,
    namespace_labels: selectors.NamespaceLabels | None = None,
    memo: framework.Memo | None = None,
    find: Finder | None = None,
) -> model.Decision:
    """The part of ``schedule_one`` that reads the nodes, for a pod ``prepare`` let
    through. ``find`` runs the PreFilters and Filters (default ``profile.find_feasible``;
    ``core.class_run`` hands in one that redoes only the rows changed since the previous pod
    of its run)."""
    return _with_note(
        _decide(
            pod=pod,
            chosen=prepared.chosen,
            policy_key=prepared.policy_key,
            snapshot=snapshot,
            table=table,
            metrics=metrics,
            now=now,
            rr_counter=rr_counter,
            seed=seed,
            detail=detail,
            namespace_labels=namespace_labels,
            memo=memo,
            find=find,
        ),
        prepared.note,
    )


def _decide(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    policy_key: model.PolicyKey | None,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable | None,
    metrics: model.MetricView,
    now: float,
    rr_counter: int,
    seed: int,
    detail: bool,
    namespace_labels: selectors.NamespaceLabels | None,
    memo: framework.Memo | None,
    find: Finder | None,
) -> model.Decision:
    """Filter, score and select for a pod ``prepare`` let through."""
    if namespace_labels is not None:
        snapshot = dataclasses.replace(snapshot, namespace_labels=namespace_labels)
    # Room rebalancing holds for this pod's workload is free to it (and to it only).
    snapshot, table = reservation.release_for(pod, snapshot, table)
    cycle = framework.CycleState.start(pod, snapshot, table=table, memo=memo)
    table = cycle.table
    if not len(table):
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=profile.fit_error_message(0, {}),
        )
    found = (find or profile.find_feasible)(cycle)
    if found.refusal:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=profile.fit_error_message(len(table), {}, pre_filter_msg=found.refusal)
            + preemption.suffix(pod=pod, snapshot=snapshot, table=table, reasons={}),
        )
    bursts = scoring.burst_counts(table, now=now, window_s=chosen.burst_window_s)
    verdicts = _Verdicts(table=table, rejected=found.rejected, bursts=bursts)
    feasible = found.feasible  # rows of the table, in name order
    if not len(feasible):
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=profile.fit_error_message(len(table), found.rejected)
            + preemption.suffix(pod=pod, snapshot=snapshot, table=table, reasons=found.rejected),
            verdicts=verdicts.all(),
        )
    return _score_and_select(
        cycle=cycle,
        chosen=chosen,
        policy_key=policy_key,
        feasible=feasible,
        verdicts=verdicts,
        metrics=metrics,
        now=now,
        rr_counter=rr_counter,
        seed=seed,
        detail=detail,
    )


@dataclasses.dataclass(slots=True)
class _Verdicts:
    """Every node's verdict, made only when a decision needs them all (explain, or a pod
    no node takes): the filters' rejections, then what scoring or the fallback adds."""

    table: columns.NodeTable
    rejected: Mapping[model.NodeName, tuple[str, ...]]
    bursts: columns.Ints
    given: dict[int, model.NodeVerdict] = dataclasses.field(default_factory=dict)

    def reject(
        self, row: int, reasons: Sequence[str], metrics: tuple[model.MetricScore, ...]
    ) -> None:
        self.given[row] = _infeasible(
            self.table.names[row], reasons, int(self.bursts[row]), metrics
        )

    def all(self) -> tuple[model.NodeVerdict, ...]:
        names, bursts, rejected = self.table.names, self.bursts.tolist(), self.rejected
        return tuple(
            self.given.get(row) or _infeasible(name, rejected.get(name, ()), bursts[row])
            for row, name in enumerate(names)
        )


def _score_and_select(
    *,
    cycle: framework.CycleState,
    chosen: model.Policy,
    policy_key: model.PolicyKey | None,
    feasible: columns.Rows,
    verdicts: _Verdicts,
    metrics: model.MetricView,
    now: float,
    rr_counter: int,
    seed: int,
    detail: bool,
) -> model.Decision:
    """The metric phases (``core.phases``: PreScore, the metric Filter, Score) on the
    feasible nodes, then the decision: the best node, or the fallback's choice when there
    is nothing to score by, or no node when the thresholds refuse every one."""
    pod, table = cycle.pod, cycle.table
    stage = phases.Stage(cycle=cycle, chosen=chosen, feasible=feasible, metrics=metrics)
    prescored = phases.prescore(stage, now=now)
    # Fallback: no metrics to score by (the default policy), or no data to trust.
    why = ("", model.FallbackKind.OTHER)
    if chosen.metrics:
        why = phases.no_data(stage, prescored) or why
    if not chosen.metrics or why[0]:
        return _fallback(
            pod=pod,
            chosen=chosen,
            policy_key=policy_key,
            reason=why[0],
            kind=why[1],
            feasible=feasible,
            verdicts=verdicts,
            rr_counter=rr_counter,
            seed=seed,
            detail=detail,
            memo=cycle.memo,
        )
    filtered = phases.metric_filter(stage, prescored)
    thresholds, judged = filtered.thresholds, filtered.prescored
    for position, reasons in thresholds.reasons.items():
        verdicts.reject(
            int(feasible[position]),
            reasons,
            _metric_scores(
                chosen,
                [column[position] for column in judged.sampled],
                (),
                [column[position] for column in judged.added],
            ),
        )
    if not thresholds.passed.any():
        extra = collections.Counter(r for reasons in thresholds.reasons.values() for r in reasons)
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.UNSCHEDULABLE,
            message=profile.fit_error_message(len(table), verdicts.rejected, extra)
            + preemption.suffix(
                pod=pod, snapshot=cycle.snapshot, table=table, reasons=verdicts.rejected
            ),
            verdicts=verdicts.all(),
        )
    scored = phases.score(stage, filtered, bursts=verdicts.bursts, seed=seed)
    return _selected(
        pod=pod,
        chosen=chosen,
        policy_key=policy_key,
        filtered=filtered,
        scored=scored,
        verdicts=verdicts,
        metrics=metrics,
        detail=detail,
    )


def _selected(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    policy_key: model.PolicyKey | None,
    filtered: phases.MetricFiltered,
    scored: phases.Scored,
    verdicts: _Verdicts,
    metrics: model.MetricView,
    detail: bool,
) -> model.Decision:
    """Render the ranking's pick as the decision: its verdicts (every node's for explain;
    on the hot path only the winner's and the runner-up's, all the event and the log
    need: one verdict per node would cost more than the decision at thousands of nodes),
    the message and the record's estimate basis."""
    top = scored.top
    # The slots rendered, each column read as a list once for them.
    slots = list(range(len(scored.rows))) if detail else top
    pick = np.asarray(slots, dtype=np.intp)
    rows = scored.rows[pick].tolist()
    shown = [column[pick].tolist() for column in scored.sampled]
    added = [column[pick].tolist() for column in scored.added]
    per_metric = [column[pick].tolist() for column in scored.scores.per_metric]
    totals = scored.scores.totals[pick].tolist()
    bursts = scored.bursts[pick].tolist()
    kube = [(term.plugin, term.weight, term.scores[pick].tolist()) for term in scored.scores.kube]
    table = verdicts.table
    rendered = {
        slot: model.NodeVerdict(
            table.names[rows[at]],
            True,
            "",
            _metric_scores(
                chosen,
                [column[at] for column in shown],
                [column[at] for column in per_metric],
                [column[at] for column in added],
            ),
            int(bursts[at]),
            float(totals[at]),
            tuple(
                model.KubeScore(plugin, float(found[at]), weight) for plugin, weight, found in kube
            ),
        )
        for at, slot in enumerate(slots)
    }
    winner = rendered[top[0]]
    runner_up = rendered[top[1]] if len(top) > 1 else None
    if detail:
        for at, slot in enumerate(slots):
            verdicts.given[rows[at]] = rendered[slot]
        final = verdicts.all()
    else:
        final = tuple(rendered[slot] for slot in top)
    basis = {
        metric.name: estimate.basis(metric, pod, phases.usage(metrics, chosen, metric))
        for metric in chosen.metrics
        if metric.estimate.source is model.EstimateFrom.MEASURED
    }
    thresholds = filtered.thresholds
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
            penalty=float(scored.scores.penalties[top[0]]),
            basis=basis,
            ignored=filtered.ignored,
            lifted=thresholds.lifted,
        ),
        verdicts=final,
        estimate_basis=basis,
        estimate_fail_open=filtered.ignored,
        soft_lifted=tuple(
            metric.name
            for metric in chosen.metrics
            if metric.threshold_mode is model.ThresholdMode.SOFT
        )
        if thresholds.lifted
        else (),
    )


def _metric_scores(
    chosen: model.Policy,
    values: Sequence[float],
    scores: Sequence[float],
    added: Sequence[float],
) -> tuple[model.MetricScore, ...]:
    """One node's sampled metric values (NaN: missing), scores (none: 0) and estimates
    as verdict entries."""
    return tuple(
        model.MetricScore(
            metric=metric.name,
            value=None if math.isnan(value) else float(value),
            score=float(scores[index]) if scores else 0.0,
            estimate=0.0 if math.isnan(value) else float(added[index]),
        )
        for index, (metric, value) in enumerate(zip(chosen.metrics, values, strict=True))
    )


def _fallback(
    *,
    pod: model.PodInfo,
    chosen: model.Policy,
    policy_key: model.PolicyKey | None,
    reason: str,
    kind: model.FallbackKind,
    feasible: columns.Rows,
    verdicts: _Verdicts,
    rr_counter: int,
    seed: int,
    detail: bool,
    memo: framework.Memo,
) -> model.Decision:
    """Let the policy's strategy decide among the filter-feasible nodes (thresholds are
    not applied: there is no data to trust).

    With ``detail`` off only the verdicts the decision record and the log read are made:
    the pick's and the runner-up's (the record's rule: best score, then fewest recent
    binds, then name); none for a pod left waiting."""
    strategy = chosen.fallback
    table = verdicts.table
    bursts = verdicts.bursts[feasible]
    if strategy is model.FallbackStrategy.WAIT:
        scores: columns.Floats = np.zeros(len(feasible))
        picked: int | None = None
    else:
        picked, scores = fallback.pick(
            strategy=strategy,
            pod=pod,
            table=table,
            rows=feasible,
            burst_counts=bursts,
            rr_counter=rr_counter,
            seed=seed,
            memo=memo,
        )

    def verdict(position: int) -> model.NodeVerdict:
        return model.NodeVerdict(
            node=table.names[feasible[position]],
            feasible=True,
            reason="",
            metrics=(),
            burst_count=int(bursts[position]),
            score=float(scores[position]),
        )

    final: tuple[model.NodeVerdict, ...] = ()
    if detail:
        for position, row in enumerate(feasible.tolist()):
            verdicts.given[row] = verdict(position)
        final = verdicts.all()
    elif picked is not None:
        runner_up = scoring.next_best(totals=scores, burst_counts=bursts, taken=(picked,))
        shown = [picked] if runner_up is None else sorted((picked, runner_up))
        final = tuple(verdict(position) for position in shown)
    if picked is None:
        return _decision(
            pod=pod,
            policy_key=policy_key,
            outcome=model.Outcome.WAIT,
            fallback_reason=reason,
            fallback_kind=kind,
            message=_wait_message(pod=pod, chosen=chosen, reason=reason),
            verdicts=final,
        )
    node = table.names[feasible[picked]]
    return _decision(
        pod=pod,
        policy_key=policy_key,
        outcome=model.Outcome.BIND,
        node=node,
        fallback_reason=reason,
        fallback_kind=kind,
        message=_fallback_message(pod=pod, chosen=chosen, node=node, reason=reason),
        verdicts=final,
    )
