"""Each package's docstring is a true map of its modules: a newcomer reads it first."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3] / "operator" / "metricsched"
PACKAGES = sorted(path.parent for path in ROOT.rglob("__init__.py"))
LISTED = re.compile(r"^- ``([a-z_]+)``", re.MULTILINE)


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def members(package: Path) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return modules | packages


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_the_package_docstring_names_every_module_it_holds(package):
    text = docstring(package)
    missing = sorted(
        name
        for name in members(package)
        if f"``{name}``" not in text and f".{name}``" not in text  # or ``metricsched.core``
    )
    assert missing == [], f"{package.name}/__init__.py does not name {missing}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_the_package_docstring_lists_no_module_that_is_not_there(package):
    listed = set(LISTED.findall(docstring(package)))
    assert sorted(listed - members(package)) == []


def test_the_maps_are_checked_for_every_package():
    assert {p.name for p in PACKAGES} >= {"metricsched", "core", "runtime", "edges", "plugins"}
