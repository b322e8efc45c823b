"""Shadow mode: what a policy would have done with a pod another scheduler placed.

``evaluate`` takes a pod that its own scheduler has just bound, takes it off its node in
the snapshot (the cluster as that scheduler saw it), and runs the same pure cycle as the
operator with the shadow policy as if it were active. It records where the policy would
have placed the pod, whether that is where the pod went (a tie with the winner's score
counts as agreement: kube-scheduler breaks ties at random too), the policy's metric
values on both nodes and the score gap.

``summarize`` turns the latest evaluations into the policy's agreement rate and, per
metric, the mean value on the nodes the policy would have chosen and on the nodes the
pods went to, and the policy's advantage in percent of the latter: positive when its
nodes are better by the metric's goal ("23 % lower latency"). ``status_block`` and
``render`` give the status field and the ``metricsched shadow`` table.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from metricsched.core import api_formats, columns, cycle, model, node_state, scoring

SHADOW_SCHEDULER: Final = "metricsched-shadow"
"""The schedulerName a shadowed pod is given for the cycle (never sent anywhere)."""

MAX_REASON_CHARS: Final = 256


@dataclasses.dataclass(frozen=True, slots=True)
class Evaluation:
    pod: model.PodKey
    policy: model.PolicyKey
    node: model.NodeName  # where its own scheduler placed it
    policy_node: model.NodeName | None  # where the policy would have; None: nowhere
    agree: bool
    score_gap: float  # the policy's node's score minus the actual node's (0 if no node)
    policy_values: Mapping[str, float | None]  # the policy's metrics on policy_node
    actual_values: Mapping[str, float | None]  # ... and on node
    reason: str  # why not node (infeasible or lower score), or why no node; "" if agree
    time: float


def without_pod(
    snapshot: model.ClusterSnapshot, table: columns.NodeTable | None, pod: model.PodInfo
) -> tuple[model.ClusterSnapshot, columns.NodeTable | None]:
    """``snapshot`` with ``pod`` taken off its node: the cluster before it was bound; and
    beside it its node table (``table`` with the node's row rewritten, when it mirrors
    ``snapshot``; else None, and the cycle builds one)."""
    state = snapshot.nodes.get(model.NodeName(pod.node_name))
    if state is None or all(p.uid != pod.uid for p in state.pods):
        return snapshot, table
    pods = tuple(p for p in state.pods if p.uid != pod.uid)
    rebuilt = node_state.build(state.node, pods, recent_binds=state.recent_binds)
    # The namespace labels, claims and volumes the filters read are kept; the node table
    # (if given) is copied with the node's row rewritten.
    return columns.replace_state(snapshot, table, rebuilt)


def _values(
    *,
    policy: model.Policy,
    snapshot: model.ClusterSnapshot,
    node: model.NodeName | None,
    metrics: model.MetricView,
    now: float,
) -> dict[str, float | None]:
    state = snapshot.nodes.get(node) if node is not None else None
    if state is None:
        return {}
    return {
        m.name: scoring.metric_column(
            policy=policy, metric=m, nodes=[state.node], metrics=metrics, now=now
        )[0]
        for m in policy.metrics
    }


def evaluate(
    *,
    pod: model.PodInfo,
    policy: model.Policy,
    inputs: cycle.Inputs,
) -> Evaluation:
    """What ``policy`` (a shadow policy) would have done with ``pod``, bound by another
    scheduler to ``pod.node_name``, on ``inputs``' cluster and metrics at its ``now``
    (its snapshot may or may not count the pod there); the policy alone decides, as if
    active, for a scheduler of its own."""
    actual = model.NodeName(pod.node_name)
    before, before_table = without_pod(inputs.snapshot, inputs.table, pod)
    asked = dataclasses.replace(
        inputs,
        snapshot=before,
        table=before_table,
        policies=[dataclasses.replace(policy, mode=model.PolicyMode.ACTIVE)],
        default_fallback=policy.fallback,
        scheduler_names=frozenset({SHADOW_SCHEDULER}),
        elsewhere=(),
    )
    decision = cycle.decide(
        dataclasses.replace(pod, node_name="", scheduler_name=SHADOW_SCHEDULER), asked
    )
    verdicts = {v.node: v for v in decision.verdicts}
    chosen = decision.node if decision.outcome is model.Outcome.BIND else None
    mine = verdicts.get(actual)
    theirs = verdicts.get(chosen) if chosen is not None else None
    if chosen is None:
        agree, gap, reason = False, 0.0, decision.message
    else:
        actual_score = mine.score if mine is not None and mine.feasible else 0.0
        best = theirs.score if theirs is not None else 0.0
        agree = chosen == actual or (mine is not None and mine.feasible and actual_score >= best)
        gap = 0.0 if agree else best - actual_score
        if agree:
            reason = ""
        elif mine is None:
            reason = f"node {actual} is not known to metricsched"
        elif not mine.feasible:
            reason = mine.reason
        else:
            reason = (
                f"{actual} scores {scoring.format_score(actual_score)}, "
                f"{chosen} {scoring.format_score(best)}"
            )
        if decision.fallback_reason:
            reason = f"fallback {policy.fallback}: {decision.fallback_reason}; {reason}".rstrip(
                "; "
            )
    return Evaluation(
        pod=pod.key,
        policy=policy.key,
        node=actual,
        policy_node=chosen,
        agree=agree,
        score_gap=gap,
        policy_values=_values(
            policy=policy, snapshot=before, node=chosen, metrics=inputs.metrics, now=inputs.now
        ),
        actual_values=_values(
            policy=policy, snapshot=before, node=actual, metrics=inputs.metrics, now=inputs.now
        ),
        reason=reason[:MAX_REASON_CHARS],
        time=inputs.now,
    )


# --- summary ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class MetricAdvantage:
    name: str
    pods: int  # evaluations with a value on both nodes
    policy_mean: float | None
    actual_mean: float | None
    advantage_percent: float | None  # None without pods or when actual_mean is 0


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    evaluated: int
    agreeing: int
    unplaceable: int
    agreement_percent: int  # rounded down; 0 when nothing was evaluated
    average_score_gap: float
    metrics: tuple[MetricAdvantage, ...]


def advantage_percent(*, policy_mean: float, actual_mean: float, goal: model.Goal) -> float | None:
    """How much better the policy's mean is than the actual one, in percent of the
    actual one, by the goal (positive: lower for Minimize, higher for Maximize)."""
    if actual_mean == 0:
        return None
    gain = actual_mean - policy_mean if goal is model.Goal.MINIMIZE else policy_mean - actual_mean
    return gain / abs(actual_mean) * 100.0


def summarize(evaluations: Sequence[Evaluation], *, policy: model.Policy) -> Summary:
    placed = [e for e in evaluations if e.policy_node is not None]
    advantages = []
    for metric in policy.metrics:
        pairs = [
            (p, a)
            for e in placed
            if (p := e.policy_values.get(metric.name)) is not None
            and (a := e.actual_values.get(metric.name)) is not None
        ]
        if not pairs:
            advantages.append(MetricAdvantage(metric.name, 0, None, None, None))
            continue
        policy_mean = sum(p for p, _ in pairs) / len(pairs)
        actual_mean = sum(a for _, a in pairs) / len(pairs)
        advantages.append(
            MetricAdvantage(
                name=metric.name,
                pods=len(pairs),
                policy_mean=policy_mean,
                actual_mean=actual_mean,
                advantage_percent=advantage_percent(
                    policy_mean=policy_mean, actual_mean=actual_mean, goal=metric.goal
                ),
            )
        )
    agreeing = sum(1 for e in evaluations if e.agree)
    return Summary(
        evaluated=len(evaluations),
        agreeing=agreeing,
        unplaceable=len(evaluations) - len(placed),
        agreement_percent=agreeing * 100 // len(evaluations) if evaluations else 0,
        average_score_gap=(sum(e.score_gap for e in placed) / len(placed) if placed else 0.0),
        metrics=tuple(advantages),
    )


# --- the status field and the table ----------------------------------------------------


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def _values_json(values: Mapping[str, float | None]) -> dict[str, float]:
    return {k: _round(v) for k, v in values.items() if v is not None}


def status_block(
    *,
    summary: Summary,
    recent: Sequence[Evaluation],
    window: int,
    dropped: int,
) -> dict[str, Any]:
    """``status.shadow`` (see the CRD): the summary, and ``recent`` newest first."""
    metrics: list[dict[str, Any]] = []
    for m in summary.metrics:
        entry: dict[str, Any] = {"name": m.name, "pods": m.pods}
        if m.policy_mean is not None and m.actual_mean is not None:
            entry["policyMean"] = _round(m.policy_mean)
            entry["actualMean"] = _round(m.actual_mean)
        if m.advantage_percent is not None:
            entry["advantagePercent"] = round(m.advantage_percent, 1)
        metrics.append(entry)
    return {
        "window": window,
        "evaluatedPods": summary.evaluated,
        "agreeingPods": summary.agreeing,
        "unplaceablePods": summary.unplaceable,
        "agreementPercent": summary.agreement_percent,
        "averageScoreGap": round(summary.average_score_gap, 1),
        "droppedPods": dropped,
        "metrics": metrics,
        "recent": [
            {
                "pod": e.pod,
                "node": e.node,
                "policyNode": e.policy_node or "",
                "agree": e.agree,
                "scoreGap": round(e.score_gap, 1),
                "policyValues": _values_json(e.policy_values),
                "actualValues": _values_json(e.actual_values),
                "reason": e.reason,
                "time": api_formats.rfc3339(e.time),
            }
            for e in recent
        ],
    }


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return scoring.format_value(float(value))
    return str(value) if value not in (None, "") else "-"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _sentence(metric: Mapping[str, Any], goal: str) -> str:
    advantage = metric.get("advantagePercent")
    if not isinstance(advantage, int | float):
        return f"{metric.get('name')}: no pod with a value on both nodes yet"
    better = advantage >= 0
    if goal == model.Goal.MINIMIZE:
        direction = "lower" if better else "higher"
    else:
        direction = "higher" if better else "lower"
    return (
        f"{metric.get('name')}: the policy would have chosen nodes with "
        f"{abs(advantage):g} % {direction} {metric.get('name')} "
        f"(mean {_fmt(metric.get('policyMean'))} vs {_fmt(metric.get('actualMean'))} "
        f"where the pods went, {metric.get('pods')} pods)"
    )


def render(
    *, policy_key: str, mode: str, block: Mapping[str, Any] | None, goals: Mapping[str, str]
) -> str:
    """The ``metricsched shadow`` output: per-pod table, then the summary."""
    lines = [f"Policy:    {policy_key} (mode {mode or model.PolicyMode.ACTIVE})"]
    if mode != model.PolicyMode.SHADOW:
        lines.append("note: the policy is not in shadow mode; set spec.mode: Shadow to trial it")
    if not block:
        lines.append("No shadow evaluation reported yet (is metricsched running and leading?)")
        return "\n".join(lines) + "\n"
    metric_names = [str(m.get("name")) for m in block.get("metrics") or ()]
    recent = list(block.get("recent") or ())
    lines.append("")
    if recent:
        header = ["POD", "PLACED ON", "POLICY WOULD CHOOSE", "AGREE", "GAP"]
        header += [f"{n.upper()} (POLICY/ACTUAL)" for n in metric_names]
        rows = [header]
        for r in recent:
            pv, av = r.get("policyValues") or {}, r.get("actualValues") or {}
            rows.append(
                [
                    str(r.get("pod", "")),
                    str(r.get("node", "")),
                    str(r.get("policyNode") or "(none)"),
                    _fmt(bool(r.get("agree"))),
                    _fmt(r.get("scoreGap")),
                    *(f"{_fmt(pv.get(n))}/{_fmt(av.get(n))}" for n in metric_names),
                ]
            )
        lines.extend(_table(rows))
        lines.append("")
    evaluated = int(block.get("evaluatedPods") or 0)
    lines.append(
        f"Agreement: {block.get('agreeingPods', 0)}/{evaluated} pods "
        f"({block.get('agreementPercent', 0)} %) placed where the policy would have placed them "
        f"(latest {evaluated} of at most {block.get('window', 0)})"
    )
    if block.get("unplaceablePods"):
        lines.append(f"Unplaceable: {block['unplaceablePods']} pods the policy found no node for")
    lines.append(f"Score gap: {_fmt(block.get('averageScoreGap', 0))} points on average")
    for m in block.get("metrics") or ():
        lines.append(_sentence(m, goals.get(str(m.get("name")), model.Goal.MINIMIZE)))
    if block.get("droppedPods"):
        lines.append(f"Dropped:   {block['droppedPods']} pods not evaluated (queue full)")
    return "\n".join(lines) + "\n"
