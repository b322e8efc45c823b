"""The plain-text explanation of a decision, as ``metricsched explain`` prints it.

A few header lines (pod, policy, outcome, fallback, the event message), then one row per
node: the winner first and marked ``*``, the other feasible nodes by score, then the
infeasible ones by name with kube-scheduler's reasons. Each metric gets a ``value→score``
column, and each kube-scheduler score blended into the decision (spec.kubeScores) a
``score x weight`` column named as in events (LeastAllocated, TaintToleration, ...).
Column widths follow the content; nothing but the standard library is used.

``scope`` chooses whose policies explain a pod: those of the install its
``spec.schedulerName`` names, and it lists the policies that select the pod but that
another install serves.

For a bound pod, ``render_recorded`` shows the decision its ``metricsched.io/decision``
annotation kept, and ``render_changes`` what the policy would decide now and what changed
(metric values, whether the pod still fits, what its node holds).

``rebalanced_note`` says, for a pod that replaces one rebalancing evicted, which pod that
was and why it was moved (from the ``Rebalanced`` event naming the pod's controller).

``render_held`` lists, per node, the room the deciding policy's rebalancing holds for the
replacements of the pods it evicted (its ``status.rebalance.held``, written by the leader:
explain's own cache holds none, so a target's held room shows here, not in the table).

No I/O here: the caller prints the returned string.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Final

from metricsched.core import (
    api_formats,
    decision_record,
    estimate,
    model,
    policy_selection,
    scoring,
)
from metricsched.core.plugins import kube_scores

MAX_REASON_WIDTH: Final = 72
"""Longer reasons are cut with "..." so that the table stays readable in a terminal."""

_GAP: Final = "  "
_NONE: Final = "-"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _metric_cell(verdict: model.NodeVerdict, metric: str) -> str:
    for found in verdict.metrics:
        if found.metric == metric:
            value = scoring.format_sample(found)
            if not verdict.feasible:  # ruled out: its score means nothing
                return _NONE if found.value is None else value
            return f"{value}→{scoring.format_score(found.score)}"
    return _NONE


def _kube_plugins(verdicts: Sequence[model.NodeVerdict]) -> list[str]:
    present = {term.plugin for verdict in verdicts for term in verdict.kube}
    return [name for name in kube_scores.PLUGINS if name in present]


def _kube_cell(verdict: model.NodeVerdict, plugin: str) -> str:
    for term in verdict.kube:
        if term.plugin == plugin:
            return kube_scores.term_text(term, named=False)
    return _NONE


def _order(decision: model.Decision) -> list[model.NodeVerdict]:
    def key(verdict: model.NodeVerdict) -> tuple[int, float, int, str]:
        if verdict.node == decision.node:
            return (0, 0.0, 0, verdict.node)
        if verdict.feasible:
            return (1, -verdict.score, verdict.burst_count, verdict.node)
        return (2, 0.0, 0, verdict.node)

    return sorted(decision.verdicts, key=key)


def _header(decision: model.Decision) -> list[str]:
    outcome = str(decision.outcome)
    if decision.node is not None:
        outcome += f" → {decision.node}"
    fields = [
        ("Pod", str(decision.pod)),
        ("Policy", decision.policy if decision.policy is not None else "default policy"),
        ("Outcome", outcome),
    ]
    if decision.fallback_reason:
        fields.append(("Fallback", decision.fallback_reason))
    fields.append(("Message", decision.message))
    width = max(len(label) for label, _ in fields) + 1
    return [f"{label + ':':<{width}} {value}" for label, value in fields]


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        _GAP.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def render_counted(metric: str, counted: Sequence[estimate.Counted], *, now: float) -> str:
    """The pods a metric's Measured estimate still adds to their nodes' samples: per
    node, each pod, what it adds, what that rests on, and when it stops counting at the
    latest (sooner once its usage shows in a sample)."""
    if not counted:
        return f"Estimate of {metric}: no pod counted (every sample shows its pods).\n"
    lines = [f"Estimate of {metric}: pods the samples do not show yet, still counted:"]
    rows = [["NODE", "POD", "ADDS", "AT MOST UNTIL", "BECAUSE"]]
    for c in counted:
        left = max(0.0, c.until - now)
        rows.append(
            [
                c.node,
                decision_record.printable(c.pod),
                f"{'+' if c.share >= 0 else '-'}{scoring.format_value(abs(c.share))}",
                f"{left:.0f}s",
                c.basis,
            ]
        )
    lines.extend(_table(rows))
    return "\n".join(lines) + "\n"


def render(
    decision: model.Decision,
    *,
    policy_metrics: Sequence[str],
    max_rows: int | None = None,  # None: every node
) -> str:
    """A table of ``decision``'s verdicts a person reads at a glance, with header lines.

    ``policy_metrics`` are the policy's metric names, in the order of their columns.
    """
    lines = _header(decision)
    lines.append("")
    if not decision.verdicts:
        lines.append("(no node was evaluated)")
        return "\n".join(lines) + "\n"
    plugins = _kube_plugins(decision.verdicts)
    header = ["", "NODE", "FEASIBLE", "REASON", *(name.upper() for name in policy_metrics)]
    header += [kube_scores.SHORT_NAMES.get(name, name).upper() for name in plugins]
    header += ["BURST", "SCORE"]
    rows: list[list[str]] = [header]
    ordered = _order(decision)
    shown = ordered if max_rows is None else ordered[:max_rows]
    for verdict in shown:
        rows.append(
            [
                "*" if verdict.node == decision.node else "",
                verdict.node,
                "yes" if verdict.feasible else "no",
                _cut(verdict.reason, MAX_REASON_WIDTH),
                *(_metric_cell(verdict, name) for name in policy_metrics),
                *(_kube_cell(verdict, name) for name in plugins),
                str(verdict.burst_count),
                scoring.format_score(verdict.score) if verdict.feasible else _NONE,
            ]
        )
    lines.extend(_table(rows))
    hidden = len(ordered) - len(shown)
    if hidden:
        lines.append(f"... {hidden} more node(s) not shown")
    return "\n".join(lines) + "\n"


# --- a bound pod: the decision recorded at bind time, and what changed since -----------


def _values_text(
    metrics: Mapping[str, float | None],
    kube: Mapping[str, float] | None = None,
    estimates: Mapping[str, float] | None = None,
) -> str:
    if not metrics and not kube:
        return ""
    cells = [
        f"{name} "
        + scoring.format_sample(
            model.MetricScore(name, value, 0.0, (estimates or {}).get(name, 0.0))
        )
        for name, value in metrics.items()
    ]
    text = ", ".join(cells)
    if kube:
        text += "; kube: " + ", ".join(
            f"{kube_scores.SHORT_NAMES.get(name, name)} {scoring.format_score(score)}"
            for name, score in kube.items()
        )
    return f"[{text.lstrip('; ')}]"


def render_recorded(record: decision_record.DecisionRecord, *, bound_to: str) -> str:
    """The decision the pod's ``metricsched.io/decision`` annotation recorded."""
    when = datetime.datetime.fromtimestamp(record.time, datetime.UTC)
    # Whoever may edit the pod may have written it: say so (decode escaped its texts).
    lines = [
        f"Decision at bind time ({when:%Y-%m-%dT%H:%M:%SZ}, as recorded on the pod,"
        " which its author can edit):"
    ]
    fields = [("Policy", record.policy or "default policy")]
    winner = record.winner
    fields.append(
        (
            "Placed on",
            f"{winner.node}  score {scoring.format_score(winner.score)}  "
            f"{_values_text(winner.metrics, winner.kube, winner.estimates)}".rstrip(),
        )
    )
    if record.runner_up is not None:
        runner = record.runner_up
        fields.append(
            (
                "Runner-up",
                f"{runner.node}  score {scoring.format_score(runner.score)}  "
                f"{_values_text(runner.metrics, runner.kube, runner.estimates)}".rstrip(),
            )
        )
    if record.fallback_strategy:
        fields.append(
            ("Fallback", f"{record.fallback_strategy} because {record.fallback_reason or '-'}")
        )
    for metric, why in record.basis.items():
        fields.append(("Estimate", f"{metric}: this pod counted as {why}"))
    width = max(len(label) for label, _ in fields) + 1
    lines += [f"  {label + ':':<{width}} {value}" for label, value in fields]
    if bound_to and bound_to != winner.node:
        lines.append(f"  note: the pod is bound to {bound_to}, not to the recorded node")
    return "\n".join(lines) + "\n"


def capacity_text(state: model.NodeState) -> str:
    """What is requested on a node against its allocatable: cpu, memory, pods."""
    requested, allocatable = state.requested, state.node.allocatable
    mib = 1024 * 1024
    return (
        f"cpu {requested.milli_cpu}m/{allocatable.milli_cpu}m, "
        f"memory {requested.memory // mib}Mi/{allocatable.memory // mib}Mi, "
        f"pods {requested.pods}/{allocatable.pods}"
    )


def render_changes(
    *,
    record: decision_record.DecisionRecord,
    now: model.Decision,
    now_values: Mapping[str, Mapping[str, float | None]],
    capacity: Mapping[str, str],
) -> str:
    """Then and now, side by side, for the recorded winner and runner-up and today's winner.

    ``now_values`` holds the policy's metric values now, by node; ``capacity`` the
    ``capacity_text`` of each node now.
    """
    then_node = record.winner.node
    if now.outcome is model.Outcome.BIND and now.node is not None:
        if now.node == then_node:
            headline = f"The policy would still place the pod on {then_node}."
        else:
            headline = f"The policy would now place the pod on {now.node}, not {then_node}."
    else:
        headline = f"The policy would not place the pod now ({now.outcome}): {now.message}"
    lines = ["What changed since the bind:", f"  {headline}"]
    roles: dict[str, list[str]] = {}
    roles.setdefault(then_node, []).append("placed then")
    if record.runner_up is not None:
        roles.setdefault(record.runner_up.node, []).append("runner-up then")
    if now.node is not None:
        roles.setdefault(now.node, []).append("winner now")
    then_values: dict[str, Mapping[str, float | None]] = {then_node: record.winner.metrics}
    if record.runner_up is not None:
        then_values[record.runner_up.node] = record.runner_up.metrics
    verdicts = {v.node: v for v in now.verdicts}
    metric_names = list(
        dict.fromkeys(
            [name for values in then_values.values() for name in values]
            + [name for values in now_values.values() for name in values]
        )
    )
    header = ["NODE", "ROLE", *(f"{n.upper()} THEN→NOW" for n in metric_names)]
    header += ["SCORE NOW", "FITS NOW", "REQUESTED NOW"]
    rows = [header]
    for node, role in roles.items():
        verdict = verdicts.get(model.NodeName(node))
        then = then_values.get(node, {})
        current = now_values.get(node, {})
        cells = []
        for name in metric_names:
            before = then.get(name)
            after = current.get(name)
            before_text = "-" if name not in then else _cell(before)
            cells.append(f"{before_text}→{_cell(after)}")
        if verdict is None:
            fits, score = "unknown node", "-"
        elif verdict.feasible:
            fits, score = "yes", scoring.format_score(verdict.score)
        else:
            fits, score = f"no: {_cut(verdict.reason, 48)}", "-"
        rows.append([node, ", ".join(role), *cells, score, fits, capacity.get(node, "-")])
    lines.extend("  " + line for line in _table(rows))
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "missing" if value is None else scoring.format_value(value)


# --- which install's policies explain a pod --------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """Whose policies explain a pod: the scheduler names of the install that decides it,
    and the policies of the pod's namespace that select it but another install serves."""

    scheduler_names: frozenset[str]
    elsewhere: tuple[model.Policy, ...]


def scope(
    pod: model.PodInfo,
    namespace_policies: Sequence[model.Policy],
    *,
    override: frozenset[str] | None = None,
) -> Scope:
    """The install that decides ``pod``: its own ``spec.schedulerName`` (or ``override``,
    the ``--scheduler-name`` given to explain). A pod of another scheduler that a shadow
    policy evaluates is explained as that policy's install would (as shadow mode does)."""
    if override:
        names = override
    else:
        names = frozenset({pod.scheduler_name})
        trial = policy_selection.shadow_policy_for(pod, namespace_policies)
        if trial is not None and trial.scheduler_name != pod.scheduler_name:
            names = frozenset({trial.scheduler_name})
    elsewhere = tuple(
        p
        for p in namespace_policies
        if p.scheduler_name not in names
        and p.namespace == pod.namespace
        and policy_selection.select_policy(pod, [p]).policy is not None
    )
    return Scope(scheduler_names=names, elsewhere=elsewhere)


def elsewhere_notes(pod: model.PodInfo, policies: Sequence[model.Policy]) -> list[str]:
    """One line per policy that selects ``pod`` but that another install serves."""
    return [
        f"note: policy {p.key} selects this pod but is served by another install (its"
        f" spec.schedulerName is {p.scheduler_name}, the pod's is {pod.scheduler_name}),"
        " so it does not place it"
        for p in sorted(policies, key=lambda p: p.key)
    ]


REPLACEMENT_WINDOW_S: Final = 120.0
"""A controller makes a replacement within seconds of an eviction; an event this long
before the pod's creation (or 5 s after, for clock skew) can be its predecessor's."""


def _event_time(event: model.RawBody) -> float:
    for field in ("lastTimestamp", "eventTime", "firstTimestamp"):
        raw = event.get(field)
        if isinstance(raw, str) and raw:
            try:
                moment = datetime.datetime.fromisoformat(raw)
            except ValueError:
                continue
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
    return 0.0


def rebalanced_note(pod: model.PodInfo, events: Sequence[model.RawBody]) -> str | None:
    """ "Replaces ..." for a pod whose controller made it after rebalancing evicted one of
    its pods: the latest ``Rebalanced`` event of the namespace that names the pod's
    controller, from up to ``REPLACEMENT_WINDOW_S`` before the pod was created; None when
    there is none (or the pod has no controller)."""
    if not pod.owner or not pod.creation_timestamp:
        return None
    marker = f" of {pod.owner} from "
    found: tuple[float, str] | None = None
    for event in events:
        message = event.get("message")
        if event.get("reason") != "Rebalanced" or not isinstance(message, str):
            continue
        at = _event_time(event)
        if marker not in message or not (
            pod.creation_timestamp - REPLACEMENT_WINDOW_S <= at <= pod.creation_timestamp + 5
        ):
            continue
        if found is None or at > found[0]:
            found = (at, message)
    if found is None:
        return None
    stamp = api_formats.rfc3339(found[0])
    return f"note: {pod.key} replaces a pod that rebalancing moved at {stamp}: {found[1]}"


MAX_HELD_ROWS: Final = 20
"""status.rebalance.held holds at most this many; more in an edited status are cut."""


def _held_time(raw: object) -> float | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        moment = datetime.datetime.fromisoformat(raw)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def render_held(policy: str, held: object, *, now: float) -> str | None:
    """The room ``policy``'s rebalancing holds for replacements (``status.rebalance.held``),
    per node: whose replacement may take it, how much, and how long it lasts at most.
    None when it holds none; an entry without a node is left out."""
    entries = [e for e in held if isinstance(e, Mapping)] if isinstance(held, list) else []
    rows: list[tuple[str, float, list[str]]] = []
    for entry in entries:
        node = entry.get("node")
        if not isinstance(node, str) or not node:
            continue
        amount = entry.get("amount")
        amount = amount if isinstance(amount, Mapping) else {}
        until = _held_time(entry.get("until"))
        left = _NONE if until is None else f"{max(0.0, until - now):.0f}s"
        cells = [
            decision_record.printable(node),
            decision_record.printable(entry.get("owner") or _NONE),
            decision_record.printable(amount.get("cpu") or _NONE),
            decision_record.printable(amount.get("memory") or _NONE),
            left,
        ]
        rows.append((node, until if until is not None else float("inf"), cells))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    lines = [
        f"Room held for replacements of pods rebalancing moved "
        f"(status.rebalance.held of {decision_record.printable(policy)}):"
    ]
    table = [["NODE", "FOR", "CPU", "MEMORY", "AT MOST"]]
    table += [cells for _, _, cells in rows[:MAX_HELD_ROWS]]
    lines.extend(_table(table))
    return "\n".join(lines) + "\n"
