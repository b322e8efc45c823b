"""The plain-text explanation of a decision, as ``metricsched explain`` prints it.

A few header lines (pod, policy, outcome, fallback, the event message), then one row per
node: the winner first and marked ``*``, the other feasible nodes by score, then the
infeasible ones by name with kube-scheduler's reasons. Each metric gets a ``value→score``
column. Column widths follow the content; nothing but the standard library is used.

No I/O here: the caller prints the returned string.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from metricsched.core import model, scoring

MAX_REASON_WIDTH: Final = 72
"""Longer reasons are cut with "..." so that the table stays readable in a terminal."""

_GAP: Final = "  "
_NONE: Final = "-"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _metric_cell(verdict: model.NodeVerdict, metric: str) -> str:
    for found in verdict.metrics:
        if found.metric == metric:
            value = "missing" if found.value is None else scoring.format_value(found.value)
            if not verdict.feasible:  # ruled out: its score means nothing
                return _NONE if found.value is None else value
            return f"{value}→{scoring.format_score(found.score)}"
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
    header = ["", "NODE", "FEASIBLE", "REASON", *(name.upper() for name in policy_metrics)]
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
                str(verdict.burst_count),
                scoring.format_score(verdict.score) if verdict.feasible else _NONE,
            ]
        )
    lines.extend(_table(rows))
    hidden = len(ordered) - len(shown)
    if hidden:
        lines.append(f"... {hidden} more node(s) not shown")
    return "\n".join(lines) + "\n"
