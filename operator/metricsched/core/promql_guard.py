"""What a namespaced policy may ask Prometheus: the cluster admin's query rules.

The operator queries Prometheus with its own credentials on behalf of whoever may create
a SchedulingPolicy. These rules, set by the cluster admin (``--query-allowed-metric``,
``--query-required-matcher``), restrict what a policy's PromQL may select. The query is
PARSED here (``promql-parser``, the Prometheus 2.45 grammar) and every series selector in
it is checked; a query that does not parse, or selects what the rules do not allow, is
refused with a message for the policy author and is never sent.

Pure: no I/O, no clocks, no module-level state. It never sends, logs or caches a query.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re

import promql_parser

NAMESPACE_PLACEHOLDER = "{namespace}"

# Functions that read series no selector in the query names (``info`` joins
# ``target_info`` implicitly): refused whenever rules are set.
_IMPLICIT_SELECT_FUNCTIONS = frozenset({"info"})

# Every node type the check knows how to read; anything else is refused (fail closed),
# so a newer parser with a new node type cannot slip past the rules.
_KNOWN_NODES = (
    promql_parser.AggregateExpr,
    promql_parser.BinaryExpr,
    promql_parser.Call,
    promql_parser.MatrixSelector,
    promql_parser.NumberLiteral,
    promql_parser.ParenExpr,
    promql_parser.StringLiteral,
    promql_parser.SubqueryExpr,
    promql_parser.UnaryExpr,
    promql_parser.VectorSelector,
)

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class RuleError(ValueError):
    """A rule the operator cannot start with (a flag value)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RequiredMatcher:
    """``label="value"`` every selector must carry; ``{namespace}`` in ``value`` stands for
    the policy's namespace."""

    label: str
    value: str

    def expected(self, namespace: str) -> str:
        return self.value.replace(NAMESPACE_PLACEHOLDER, namespace)


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """The admin's rules. Empty rules (the default) allow any query, unparsed."""

    allowed_metrics: tuple[str, ...] = ()  # shell-style patterns (fnmatch); () = any name
    required_matchers: tuple[RequiredMatcher, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.allowed_metrics or self.required_matchers)


def parse_required_matcher(text: str) -> RequiredMatcher:
    """``namespace={namespace}`` or ``cluster=prod`` (quotes around the value optional)."""
    label, sep, value = text.strip().partition("=")
    label = label.strip()
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if not sep or not _LABEL_NAME.match(label) or label == "__name__":
        raise RuleError(
            f"required matcher {text!r}: expected LABEL=VALUE with a label name"
            " (not __name__; use the metric allow-list for names)"
        )
    if not value:
        raise RuleError(f"required matcher {text!r}: the value is empty")
    return RequiredMatcher(label=label, value=value)


def check(query: str, *, namespace: str, rules: Rules) -> str | None:
    """Why ``query`` of a policy in ``namespace`` must not be sent; None if it may be.

    With no rules nothing is parsed: Prometheus, whose grammar may be newer than the
    parser's, stays the judge of syntax. With rules, a query that does not parse is
    refused (fail closed), and so is one with a selector that
    - names no metric exactly (``=`` on the name) while an allow-list is set, or names a
      metric outside it;
    - lacks a required matcher as an ``=`` matcher with the expected value (in every
      ``or`` alternative of the selector);
    or that calls a function reading series no selector names (``info``).
    """
    if not rules.enabled:
        return None
    try:
        expr = promql_parser.parse(query)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a Rust panic is a BaseException: fail closed
        return f"the query is not valid PromQL ({_short(str(e))})"
    problems: list[str] = []

    def visit(node: promql_parser.Expr) -> bool:
        if not isinstance(node, _KNOWN_NODES):
            problems.append(f"the query uses {type(node).__name__}, which cannot be checked")
            return False
        if isinstance(node, promql_parser.Call) and node.func.name in _IMPLICIT_SELECT_FUNCTIONS:
            problems.append(f"{node.func.name}() reads series that no selector names")
            return False
        if isinstance(node, promql_parser.VectorSelector):
            problem = _check_selector(node, namespace=namespace, rules=rules)
            if problem is not None:
                problems.append(problem)
                return False
        return True

    promql_parser.walk(expr, visit)
    if problems:
        return problems[0]
    return None


def describe(rules: Rules) -> str:
    """The rules in one line, for the operator's start-up log and refusal messages."""
    if not rules.enabled:
        return "any query"
    parts = []
    if rules.allowed_metrics:
        parts.append("metrics " + ", ".join(rules.allowed_metrics))
    if rules.required_matchers:
        parts.append(
            "matchers " + ", ".join(f'{m.label}="{m.value}"' for m in rules.required_matchers)
        )
    return "; ".join(parts)


def _check_selector(
    selector: promql_parser.VectorSelector, *, namespace: str, rules: Rules
) -> str | None:
    matchers = list(selector.matchers.matchers)
    alternatives = [list(group) for group in selector.matchers.or_matchers or []]
    groups = [matchers + group for group in alternatives] if alternatives else [matchers]
    shown = selector.name or "a selector without a metric name"
    for group in groups:
        names = {m.value for m in group if m.name == "__name__" and _is_equal(m)}
        if selector.name:
            names.add(selector.name)
        if rules.allowed_metrics:
            if len(names) != 1:
                return f"{shown}: the metric name must be given exactly (not by a regex)"
            (name,) = names
            if not any(fnmatch.fnmatchcase(name, p) for p in rules.allowed_metrics):
                return (
                    f"metric {name} is not in the cluster's allow-list"
                    f" ({', '.join(rules.allowed_metrics)})"
                )
        for required in rules.required_matchers:
            expected = required.expected(namespace)
            if not any(
                m.name == required.label and _is_equal(m) and m.value == expected for m in group
            ):
                return f'{shown}: every selector must carry {required.label}="{expected}"'
    return None


def _is_equal(matcher: promql_parser.Matcher) -> bool:
    return bool(matcher.op == promql_parser.MatchOp.Equal)


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."
