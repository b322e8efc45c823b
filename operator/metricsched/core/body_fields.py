"""Readers of a raw Kubernetes body's fields (camelCase JSON dicts) that turn a value of
the wrong type into a ``ParseError`` naming the field's JSON path, and ``boundary``, the
parsing boundary of one kind: whatever an untrusted body holds ends as a ``ParseError``
for that one object.

Shared by ``core.parse`` (the bodies) and ``core.pod_resources`` (a pod's requests).
Purely computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import datetime
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from metricsched.core import model, quantity


class ParseError(ValueError):
    """A raw body has a field the scheduler cannot read; ``field`` is its JSON path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


_Parsed = TypeVar("_Parsed")


_Args = ParamSpec("_Args")


def boundary(read: Callable[_Args, _Parsed]) -> Callable[_Args, _Parsed]:
    """The parsing boundary of one kind: a body from the API is untrusted input (any pod
    author writes it), so whatever it holds ends as a ``ParseError`` for that one object,
    never as another exception that would end the watch or informer reading every object
    of its kind (a ``RecursionError`` from deep nesting, a ``TypeError`` from a field of
    an unexpected type that a reader missed)."""

    @functools.wraps(read)
    def bounded(*args: _Args.args, **kwargs: _Args.kwargs) -> _Parsed:
        try:
            return read(*args, **kwargs)
        except ParseError:
            raise
        except (
            RecursionError,
            ArithmeticError,
            AttributeError,
            LookupError,
            TypeError,
            ValueError,
        ) as e:
            kind = read.__name__.removesuffix("_from_body")
            raise ParseError(f"<{kind}>", f"unreadable ({type(e).__name__}: {str(e)[:200]})") from e

    return bounded


Requests = dict[str, int]  # resource name -> exact amount in nano-units


def quantity_map(parent: Mapping[str, Any], key: str, field: str) -> Requests:
    raw = mapping(parent, key, field)
    found: Requests = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise ParseError(field, "resource names must be strings")
        try:
            nanos = quantity.parse_nano(value)
        except quantity.QuantityError as error:
            raise ParseError(f"{field}.{name}", str(error)) from None
        if nanos < 0:
            raise ParseError(f"{field}.{name}", f"{value!r} must not be negative")
        found[name] = nanos
    return found


def containers(spec: Mapping[str, Any], key: str) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for index, item in enumerate(list_of(spec, key, f"spec.{key}")):
        path = f"spec.{key}[{index}]"
        if not isinstance(item, Mapping):
            raise ParseError(path, "must be an object")
        found.append((path, item))
    return found


def mapping(parent: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(field, "must be an object")
    return value


def list_of(parent: Mapping[str, Any], key: str, field: str) -> Sequence[Any]:
    value = parent.get(key)
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ParseError(field, "must be a list")
    return value


def string(parent: Mapping[str, Any], key: str, field: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ParseError(field, "must be a string")
    return value


def string_list(parent: Mapping[str, Any], key: str, field: str) -> tuple[str, ...]:
    items = list_of(parent, key, field)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise ParseError(f"{field}[{index}]", "must be a string")
    return tuple(interned(item) for item in items)


def integer(parent: Mapping[str, Any], key: str, field: str) -> int:
    value = parent.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(field, "must be an integer")
    return value


def string_map(
    parent: Mapping[str, Any], key: str, field: str, *, shared: bool = False
) -> dict[str, str]:
    """``shared``: keys and values as ``interned`` strings (labels and selectors, which
    repeat across the pods of a template and the nodes of a pool)."""
    raw = mapping(parent, key, field)
    found: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ParseError(field, "must map strings to strings")
        if shared:
            found[interned(name)] = interned(value)
        else:
            found[name] = value
    return found


def interned(text: str) -> str:
    """``text`` as the one string object of its value (``sys.intern``), for strings kept
    in parsed objects that many objects have equal (namespaces, scheduler and node names,
    labels, tolerations): one copy instead of one per pod, and the body it was read from
    is not pinned in memory by it. Interned strings go when nothing refers to them."""
    return sys.intern(text) if type(text) is str else text


def raw_list(parent: Mapping[str, Any], key: str, field: str) -> tuple[model.RawBody, ...]:
    items: list[model.RawBody] = []
    for index, item in enumerate(list_of(parent, key, field)):
        if not isinstance(item, Mapping):
            raise ParseError(f"{field}[{index}]", "must be an object")
        # A plain deep copy: kopf hands out live views of its bodies.
        items.append(_plain(item))
    return tuple(items)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def timestamp(parent: Mapping[str, Any], key: str, field: str) -> float:
    text = string(parent, key, field)
    if not text:
        return 0.0
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ParseError(field, f"{text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        # metav1.Time is always UTC on the wire; a zone-less value is read as UTC too.
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()
