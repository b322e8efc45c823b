"""Kubernetes resource quantities ("500m", "1.5Gi", "1e3"), parsed exactly.

Mirrors ``k8s.io/apimachinery/pkg/api/resource.ParseQuantity`` and the scheduler's use of
``Quantity.MilliValue()`` / ``Quantity.Value()``: no floats anywhere, so "0.1" cores is 100
millicores and never 99.99999. Pure functions, no I/O.

Semantics kept from Kubernetes:

- grammar ``<sign>?<digits>[.<digits>]<suffix>`` with the suffixes n, u, m, "", k, M, G, T,
  P, E (powers of ten), Ki, Mi, Gi, Ti, Pi, Ei (powers of two) and e<int> / E<int>
  (decimal exponents; a bare "E" is exa);
- a parsed value is rounded up (away from zero) to a whole nano-unit, so any non-zero
  request stays non-zero ("if you want some resources, you should get some");
- ``MilliValue`` / ``Value`` round up to the next whole milli-unit / unit;
- magnitudes are capped at 2^63-1 units, the largest value a Quantity can represent.

Deliberately stricter than Kubernetes: a number without any digit ("." or "+") is an
error here, where Go's scanner reads it as 0. The API server always re-serialises
quantities canonically, so this only affects hand-written bodies.
"""

from __future__ import annotations

import math
import re
from typing import Final

NANO: Final = 10**9  # nano-units per unit: the resolution of a parsed quantity
MAX_UNITS: Final = 2**63 - 1  # the cap Kubernetes applies to a quantity's magnitude

_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)

# Beyond these decimal exponents the value is certainly capped, or certainly below one
# nano-unit; deciding early avoids building 10**(10**9) for "1e1000000000".
_HUGE_EXPONENT: Final = 40
_TINY_EXPONENT: Final = -40


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_nano(quantity: object) -> int:
    """The exact value of ``quantity`` in nano-units, rounded up in magnitude.

    Accepts the string form the API server sends and, for hand-written bodies, ints and
    finite floats (read as their decimal text, like a JSON number). Raises
    ``QuantityError`` otherwise.
    """
    text = _as_text(quantity)
    match = _QUANTITY.fullmatch(text)
    if match is None:  # pragma: no cover - the pattern matches every string
        raise QuantityError(f"{text!r} is not a quantity")
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        raise QuantityError(f"{text!r} is not a quantity: it has no digits")
    digits = int(whole + fraction or "0")
    negative = sign == "-"
    binary = suffix in _BINARY_SUFFIXES
    if binary:
        exponent = 0
    elif suffix in _DECIMAL_SUFFIXES:
        exponent = _DECIMAL_SUFFIXES[suffix]
    else:
        exp_match = _EXPONENT.fullmatch(suffix)
        if exp_match is None:
            raise QuantityError(f"{text!r} is not a quantity: unknown suffix {suffix!r}")
        exponent = int(exp_match.group(1))
    if digits == 0:
        return 0

    if binary:
        # digits * 2**power / 10**len(fraction) units, in nanos; ceil via negated floor division.
        numerator = digits * (2 ** _BINARY_SUFFIXES[suffix]) * NANO
        nanos = -(-numerator // 10 ** len(fraction))
        return _capped(nanos, negative=negative)

    # value = digits * 10**shift units; in nanos: digits * 10**(shift + 9)
    shift = exponent - len(fraction) + 9
    magnitude = len(str(digits)) - 1 + shift  # floor(log10(nanos))
    if magnitude > _HUGE_EXPONENT:
        return _capped(MAX_UNITS * NANO + 1, negative=negative)
    if magnitude < _TINY_EXPONENT:
        return -1 if negative else 1
    nanos = digits * 10**shift if shift >= 0 else -(-digits // 10**-shift)
    return _capped(nanos, negative=negative)


def parse_milli(quantity: object) -> int:
    """``quantity`` in milli-units, rounded up like ``Quantity.MilliValue()`` (cpu)."""
    return nano_to_milli(parse_nano(quantity))


def parse_int(quantity: object) -> int:
    """``quantity`` in whole units, rounded up like ``Quantity.Value()`` (bytes, counts)."""
    return nano_to_int(parse_nano(quantity))


def nano_to_milli(nanos: int) -> int:
    """Milli-units of an exact nano amount, rounded up in magnitude (``MilliValue``)."""
    return _round_up(nanos, 10**6)


def nano_to_int(nanos: int) -> int:
    """Whole units of an exact nano amount, rounded up in magnitude (``Value``)."""
    return _round_up(nanos, NANO)


def format_milli(milli: int) -> str:
    """A quantity string for ``milli`` milli-units: "2" when whole, else "1500m"."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def format_int(units: int) -> str:
    """A quantity string for ``units``, with the largest binary suffix that is exact."""
    if units == 0:
        return "0"
    for suffix, power in reversed(_BINARY_SUFFIXES.items()):
        step = 2**power
        if units % step == 0:
            return f"{units // step}{suffix}"
    return str(units)


def _as_text(quantity: object) -> str:
    # bool is an int subclass but never a quantity; it is almost certainly a YAML slip.
    if isinstance(quantity, bool):
        raise QuantityError(f"{quantity!r} is not a quantity")
    if isinstance(quantity, int):
        return str(quantity)
    if isinstance(quantity, float):
        if not math.isfinite(quantity):
            raise QuantityError(f"{quantity!r} is not a quantity")
        return repr(quantity)
    if isinstance(quantity, str):
        # The API server's JSON decoder trims surrounding whitespace; so do we.
        return quantity.strip()
    raise QuantityError(f"{quantity!r} is not a quantity (expected a string)")


def _capped(nanos: int, *, negative: bool) -> int:
    nanos = min(nanos, MAX_UNITS * NANO)
    return -nanos if negative else nanos


def _round_up(nanos: int, per: int) -> int:
    whole = -(-abs(nanos) // per)
    whole = min(whole, MAX_UNITS)
    return -whole if nanos < 0 else whole
