"""docs/architecture.md's map is true: every path it names exists, and its rooms name
every module of core, runtime and edges and nothing that is not there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
PACKAGE = ROOT / "operator" / "metricsched"
DOC = ROOT / "docs" / "architecture.md"
ROOMS = ("core", "runtime", "edges")
TICKED = re.compile(r"`([^`\n]+)`")
ROOM = re.compile(r"^- \*\*`(core|runtime|edges)/`.*?(?=^- |^$|\Z)", re.MULTILINE | re.DOTALL)
NAME = re.compile(r"[a-z_][a-z0-9_]*")


def prose() -> str:
    return re.sub(r"```.*?```", "", DOC.read_text(), flags=re.DOTALL)  # not the diagram


def rooms() -> dict[str, str]:
    return {m.group(1): m.group(0) for m in ROOM.finditer(prose())}


def modules(room: str) -> set[str]:
    folder = PACKAGE / room
    found = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    return found | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}


def top_level_names(room: str) -> set[str]:
    """Functions, classes and constants defined at the top of the room's modules."""
    names: set[str] = set()
    for path in (PACKAGE / room).rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def exists(path: str, *bases: Path) -> bool:
    return any((base / p).exists() for base in bases for p in (path, path + ".py"))


def test_every_path_the_map_names_exists():
    bases = (ROOT, PACKAGE)
    missing = sorted(
        token
        for token in TICKED.findall(prose())
        if " " not in token
        and ("/" in token or token.endswith((".py", ".md")))
        and not exists(token, *bases, *(PACKAGE / room for room in ROOMS))
    )
    assert missing == []


def test_the_map_has_a_room_for_each_package():
    assert set(rooms()) == set(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_names_every_module_it_holds(room):
    named = set(TICKED.findall(rooms()[room]))
    paths = {token.split("/")[0] for token in named if "/" in token}
    assert sorted(modules(room) - named - paths) == []


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_names_no_module_that_is_not_there(room):
    text = rooms()[room]
    bare = {token for token in TICKED.findall(text) if NAME.fullmatch(token)}
    unknown = bare - modules(room) - top_level_names(room) - set(ROOMS)  # "imports `runtime`"
    paths = [token for token in TICKED.findall(text) if "/" in token and token != f"{room}/"]
    assert sorted(unknown) == []
    assert [p for p in paths if not exists(p, PACKAGE / room)] == []
