"""A policy body's field readers: each reads one value and, when it is wrong, adds a
sentence a person can act on to ``Problems`` instead of raising, so one ``PolicyError``
lists every problem found.

Durations (Go-style, ms to h), integers and numbers within bounds, enum values, objects
and label selectors. No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from metricsched.core import model

_DURATION = re.compile(r"([0-9]+(\.[0-9]+)?(ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_SECONDS: Final[Mapping[str, float]] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_E = TypeVar("_E", bound=enum.StrEnum)


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration limited to ms, s, m, h: ``"1m30s"`` → 90.0.

    Raises ``ValueError`` for anything else (signs, spaces, ``ns``/``us``, empty).
    """
    if not _DURATION.fullmatch(text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


class Problems:
    """Collects problems while parsing goes on, so one error lists them all."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")


def integer(
    raw: object,
    *,
    path: str,
    problems: Problems,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        value = int(raw)
    if value is None or (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            wanted = f"an integer from {low} to {high}"
        else:
            wanted = "an integer"
        problems.add(path, f"must be {wanted}, got {raw!r}")
        return None
    return value


def number(raw: object, *, path: str, problems: Problems) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
        if math.isfinite(value):
            return value
    problems.add(path, f"must be a finite number, got {raw!r}")
    return None


def enum_member(raw: object, *, kind: type[_E], path: str, problems: Problems) -> _E | None:
    for member in kind:
        if raw == member.value:
            return member
    allowed = ", ".join(member.value for member in kind)
    problems.add(path, f"must be one of {allowed}, got {raw!r}")
    return None


def duration(
    raw: object, *, path: str, problems: Problems, low_exclusive: bool, high: float
) -> float | None:
    try:
        if not isinstance(raw, str):
            raise ValueError(raw)
        seconds = parse_duration(raw)
    except ValueError:
        problems.add(path, f"must be a duration such as 2m, 60s or 1m30s, got {raw!r}")
        return None
    if (low_exclusive and seconds <= 0) or seconds > high:
        floor = "more than 0s" if low_exclusive else "at least 0s"
        problems.add(path, f"must be {floor} and at most {_format_seconds(high)}, got {raw!r}")
        return None
    return seconds


def _format_seconds(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def mapping(raw: object, *, path: str, problems: Problems) -> Mapping[str, Any] | None:
    if isinstance(raw, Mapping):
        return raw
    problems.add(path, f"must be an object, got {raw!r}")
    return None


def label_selector(raw: object, *, path: str, problems: Problems) -> model.LabelSelector:
    selector = mapping(raw, path=path, problems=problems) or {}
    labels: dict[str, str] = {}
    raw_labels = selector.get("matchLabels") or {}
    if isinstance(raw_labels, Mapping):
        for key, value in raw_labels.items():
            if isinstance(key, str) and isinstance(value, str):
                labels[key] = value
            else:
                problems.add(f"{path}.matchLabels", f"{key!r}: keys and values must be strings")
    else:
        problems.add(f"{path}.matchLabels", f"must be an object, got {raw_labels!r}")

    expressions: list[tuple[str, str, tuple[str, ...]]] = []
    raw_expressions = selector.get("matchExpressions") or []
    if not isinstance(raw_expressions, list):
        problems.add(f"{path}.matchExpressions", f"must be a list, got {raw_expressions!r}")
        raw_expressions = []
    for index, raw_expression in enumerate(raw_expressions):
        where = f"{path}.matchExpressions[{index}]"
        expression = mapping(raw_expression, path=where, problems=problems)
        if expression is None:
            continue
        key, operator, values = (
            expression.get("key"),
            expression.get("operator"),
            expression.get("values") or [],
        )
        if not isinstance(key, str) or not key:
            problems.add(f"{where}.key", "must be a non-empty string")
            continue
        if operator not in _SELECTOR_OPERATORS:
            allowed = ", ".join(sorted(_SELECTOR_OPERATORS))
            problems.add(f"{where}.operator", f"must be one of {allowed}, got {operator!r}")
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.add(f"{where}.values", "must be a list of strings")
            continue
        if operator in ("In", "NotIn") and not values:
            problems.add(f"{where}.values", f"operator {operator} needs at least one value")
            continue
        if operator in ("Exists", "DoesNotExist") and values:
            problems.add(f"{where}.values", f"operator {operator} takes no values")
            continue
        expressions.append((key, str(operator), tuple(values)))
    return model.LabelSelector(match_labels=labels, match_expressions=tuple(expressions))
