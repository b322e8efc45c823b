#!/usr/bin/env python3
"""Writes constraints.txt: the exact versions of everything the operator image installs.

    .venv/bin/python hack/lock.py          # rewrite constraints.txt from .venv
    .venv/bin/python hack/lock.py --check  # exit 1 if constraints.txt differs

setup.cfg keeps compatible ranges (what the package supports); constraints.txt pins the
one set the image is built from, so that two builds of a commit install the same code.
It is the closure of metricsched's ``install_requires`` as resolved in ``.venv`` (what
``make install`` installed and the tests ran), for the image's Python (3.11, Linux),
plus the build backend of pyproject.toml. The Dockerfile and ``hack/image.py`` build
with it (pip's ``--constraint``). After changing a range in setup.cfg: ``make install``,
then this script, then review the diff.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
# pyproject.toml's build-system requires, at the versions the image builds the package with.
BUILD = {"setuptools": "84.2.1", "wheel": "0.48.0"}
HEADER = """\
# Exact versions of what the operator image installs: the closure of setup.cfg's
# install_requires as resolved by `make install`, and the build backend. Written by
# hack/lock.py (do not edit by hand); the Dockerfile and hack/image.py build with it.
"""


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "metricsched") -> dict[str, str]:
    """Every distribution ``root`` needs at run time (no extras), name -> version."""
    found: dict[str, str] = {}
    todo = [(root, frozenset[str]())]
    while todo:
        name, extras = todo.pop()
        dist = importlib.metadata.distribution(name)
        key = _key(dist.metadata["Name"])
        if key in found and not extras:
            continue
        found[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in (extras or {""})
            ):
                todo.append((req.name, frozenset(req.extras)))
    found.pop(_key(root), None)
    return found


def render() -> str:
    pins = {**closure(), **BUILD}
    return HEADER + "".join(f"{name}=={pins[name]}\n" for name in sorted(pins))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if constraints.txt differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if CONSTRAINTS.read_text() != text:
            print("constraints.txt is out of date: run hack/lock.py", file=sys.stderr)
            return 1
        return 0
    CONSTRAINTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
