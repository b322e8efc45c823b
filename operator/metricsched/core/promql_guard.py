"""What a namespaced policy may ask Prometheus: the cluster admin's query rules.

The operator queries Prometheus with its own credentials on behalf of whoever may create
a SchedulingPolicy. These rules, set by the cluster admin (``--query-allowed-metric``,
``--query-required-matcher``), restrict what a policy's PromQL may select. The query is
PARSED here (``promql-parser``, the Prometheus 2.45 grammar) and every series selector in
it is checked; a query that does not parse, or selects what the rules do not allow, is
refused with a message for the policy author and is never sent.

The cost of a check is bounded whatever the query: the text is first scanned once
(linear) and a query with more than ``MAX_STRUCTURE`` operators and brackets, or more
than ``MAX_QUERY_CHARS`` characters, is refused before it is parsed (the parser and its
``walk`` are superlinear in nesting depth: 500 nested unary minus signs took seconds).
What parses is read with an explicit stack, each node once, under a node budget.
``Guard`` keeps the verdicts of a fixed set of rules, so an unchanged query is checked
once, not every refresh round.

The rules also bound what a query may cost Prometheus, not only what it selects: a range
(``[5m]``) or subquery window longer than ``MAX_RANGE_S``, or subqueries that evaluate
their inner query more than ``MAX_SUBQUERY_STEPS`` times (range / step, multiplied when
nested: ``[30d:1s]`` is 2,592,000), are refused. Without them one tenant's policy can keep
Prometheus's query slots busy for every other tenant.

Pure: no I/O, no clocks, no module-level state. It never sends or logs a query; a
``Guard`` keeps verdicts by a digest of the query, never the text.
"""

from __future__ import annotations

import collections
import dataclasses
import fnmatch
import hashlib
import re
import threading
from collections.abc import Iterator

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

# The budget of one check. A query's AST is no deeper and has hardly more inner nodes
# than it has operators and opening brackets, so counting those in one linear scan bounds
# what parsing and reading it cost. Legitimate queries use a few dozen (a ratio of two
# rates, aggregated: about 12); 128 nested levels parse in about 10 ms.
MAX_QUERY_CHARS = 4096  # the CRD's maxLength for a query
MAX_STRUCTURE = 128  # operators plus opening brackets
MAX_NODES = 1024  # AST nodes read after parsing (leaves included)
# What one query may cost Prometheus (with rules on). A subquery with no step runs at
# Prometheus's global evaluation interval, 1m unless its configuration says otherwise.
MAX_RANGE_S = 24 * 3600  # a range selector's or a subquery's window
MAX_SUBQUERY_STEPS = 1000  # evaluations of a subquery's inner query, nested ones multiplied
DEFAULT_SUBQUERY_STEP_S = 60.0
_WORD_OPERATORS = frozenset({"and", "or", "unless", "atan2"})
_ARITHMETIC = frozenset("+-*/%^")
_COMPARISON = frozenset("=!<>")


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
    or that calls a function reading series no selector names (``info``);
    or that is too large to check within the budget (``MAX_QUERY_CHARS``,
    ``MAX_STRUCTURE``, ``MAX_NODES``), refused before it is parsed where the text shows it.
    """
    if not rules.enabled:
        return None
    too_large = _over_budget(query)
    if too_large is not None:
        return too_large
    try:
        expr = promql_parser.parse(query)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a Rust panic is a BaseException: fail closed
        return f"the query is not valid PromQL ({_short(str(e))})"
    for count, node in enumerate(nodes(expr), start=1):
        if count > MAX_NODES:
            return (
                f"the query is too large to check: more than {MAX_NODES} parts"
                " (simplify it, or split it into several metrics)"
            )
        if not isinstance(node, _KNOWN_NODES):
            return f"the query uses {type(node).__name__}, which cannot be checked"
        if isinstance(node, promql_parser.Call) and node.func.name in _IMPLICIT_SELECT_FUNCTIONS:
            return f"{node.func.name}() reads series that no selector names"
        if isinstance(node, promql_parser.VectorSelector):
            problem = _check_selector(node, namespace=namespace, rules=rules)
            if problem is not None:
                return problem
    return cost_problem(expr)


def cost_problem(expr: promql_parser.Expr) -> str | None:
    """Why ``expr`` would cost Prometheus too much (``MAX_RANGE_S``,
    ``MAX_SUBQUERY_STEPS``); None if it is within the bounds. Each node is read once."""
    stack: list[tuple[object, float]] = [(expr, 1.0)]
    while stack:
        node, evaluations = stack.pop()
        if isinstance(node, promql_parser.MatrixSelector | promql_parser.SubqueryExpr):
            window = node.range.total_seconds() if node.range is not None else 0.0
            if window > MAX_RANGE_S:
                return (
                    f"the range [{_duration(window)}] is longer than the"
                    f" {_duration(MAX_RANGE_S)} the cluster's query rules allow"
                )
        if isinstance(node, promql_parser.SubqueryExpr):
            window = node.range.total_seconds() if node.range is not None else 0.0
            step = node.step.total_seconds() if node.step else DEFAULT_SUBQUERY_STEP_S
            evaluations *= max(1.0, window / max(step, 0.001))
            if evaluations > MAX_SUBQUERY_STEPS:
                shown = _duration(step) if node.step else ""
                default = "" if node.step else f" at a {_duration(step)} step"
                return (
                    f"the subquery [{_duration(window)}:{shown}] evaluates its inner query"
                    f" {evaluations:.0f} times{default} (the limit is {MAX_SUBQUERY_STEPS},"
                    " nested subqueries multiplied): use a larger step or a shorter range"
                )
        stack.extend((child, evaluations) for child in _children(node))
    return None


def nodes(expr: promql_parser.Expr) -> Iterator[object]:
    """Every node of ``expr``, parents first (left to right), each read once.

    An explicit stack, not ``promql_parser.walk``: that one re-reads subtrees (roughly
    cubic in depth). A child of a type the check does not know is yielded but not opened
    (``check`` refuses it).
    """
    stack: list[object] = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(_children(node)))


def _children(node: object) -> list[object]:
    """The sub-expressions of a node the check knows (none for any other)."""
    if isinstance(node, promql_parser.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, promql_parser.AggregateExpr):
        return [node.expr] if node.param is None else [node.param, node.expr]
    if isinstance(node, promql_parser.Call):
        return list(node.args)
    if isinstance(
        node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)
    ):
        return [node.expr]
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    return []


def structure(query: str) -> int:
    """Operators and opening brackets of ``query`` outside strings and comments: a bound
    on the depth and inner size of its AST, counted in one pass without parsing.

    Brackets count everywhere; operators outside label matchers (``{...}``, where ``=``,
    ``!=``, ``=~`` and ``or`` are matcher syntax). It may overcount (an exponent's sign),
    never undercount what the parser nests.
    """
    count = 0
    braces = 0
    i = 0
    end = len(query)
    while i < end:
        c = query[i]
        if c in "\"'`":
            i = _string_end(query, i)
            continue
        if c == "#":
            newline = query.find("\n", i)
            i = end if newline < 0 else newline
            continue
        if c in "([":
            count += 1
        elif c == "{":
            braces += 1
        elif c == "}":
            braces = max(braces - 1, 0)
        elif braces:
            pass
        elif c in _ARITHMETIC:
            count += 1
        elif c in _COMPARISON:
            while i + 1 < end and query[i + 1] in _COMPARISON:
                i += 1
            count += 1
        elif c.isalpha() or c == "_":
            start = i
            while i + 1 < end and (query[i + 1].isalnum() or query[i + 1] in "_:"):
                i += 1
            if query[start : i + 1] in _WORD_OPERATORS:
                count += 1
        i += 1
    return count


class Guard:
    """``check`` under fixed rules, remembering verdicts: a query is parsed once per
    namespace its verdict depends on, not at every refresh round.

    Bounded (least recently used first out past ``max_entries``); keyed by a digest of
    the query, so a long query text is not kept. Thread-safe: the refresher asks on the
    event loop and the query thread asks again before sending.
    """

    def __init__(self, rules: Rules, *, max_entries: int = 16384) -> None:
        self.rules = rules
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._verdicts: collections.OrderedDict[tuple[bytes, str], str | None] = (
            collections.OrderedDict()
        )
        # Only a required matcher with the placeholder makes a verdict depend on the
        # namespace; otherwise one verdict serves every namespace.
        self._per_namespace = any(NAMESPACE_PLACEHOLDER in m.value for m in rules.required_matchers)

    def check(self, query: str, *, namespace: str) -> str | None:
        """``check(query, namespace=namespace, rules=self.rules)``, remembered."""
        if not self.rules.enabled:
            return None
        key = (
            hashlib.sha256(query.encode("utf-8", "surrogatepass")).digest(),
            namespace if self._per_namespace else "",
        )
        with self._lock:
            if key in self._verdicts:
                self._verdicts.move_to_end(key)
                return self._verdicts[key]
        verdict = check(query, namespace=namespace, rules=self.rules)
        with self._lock:
            self._verdicts[key] = verdict
            while len(self._verdicts) > self._max_entries:
                self._verdicts.popitem(last=False)
        return verdict


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


def _over_budget(query: str) -> str | None:
    if len(query) > MAX_QUERY_CHARS:
        return (
            f"the query is too long to check ({len(query)} characters;"
            f" the limit is {MAX_QUERY_CHARS})"
        )
    size = structure(query)
    if size > MAX_STRUCTURE:
        return (
            f"the query is too complex to check: {size} operators and brackets (the limit is"
            f" {MAX_STRUCTURE}); simplify it, or split it into several metrics"
        )
    return None


def _duration(seconds: float) -> str:
    """Seconds as PromQL writes a duration (``30d``, ``90s``)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds * 1000)}ms"


def _string_end(query: str, start: int) -> int:
    """The index after the string literal opening at ``start`` (the end if unterminated)."""
    quote = query[start]
    i = start + 1
    while i < len(query):
        c = query[i]
        if c == "\\" and quote != "`":
            i += 2
            continue
        if c == quote:
            return i + 1
        i += 1
    return len(query)


def _is_equal(matcher: promql_parser.Matcher) -> bool:
    return bool(matcher.op == promql_parser.MatchOp.Equal)


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."
