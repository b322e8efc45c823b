"""The report names every scenario the suite runs, in order, with what it does."""

from __future__ import annotations

import re
from pathlib import Path

from tests.faults import report

FAULTS = Path(__file__).resolve().parents[2] / "faults"


def _scenario_keys() -> set[str]:
    # Each scenario is made by ``scenario("<key>", "<title>")`` in a tests/faults/test_*.py.
    keys: set[str] = set()
    for path in FAULTS.glob("test_*.py"):
        keys.update(re.findall(r'\bscenario\(\s*"([a-z0-9-]+)"', path.read_text()))
    return keys


def test_every_scenario_has_a_place_in_the_order_and_a_description() -> None:
    keys = _scenario_keys()
    assert {"watch-stall", "lease-deleted", "poison-annotation"} <= keys
    assert keys - set(report.ORDER) == set()
    assert keys - set(report.WHAT) == set()
