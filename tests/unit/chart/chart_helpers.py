"""Rendering the Helm chart with the pinned helm (no cluster needed), and reading the result.

The binaries come from hack/build-tools.sh (``make tools``); without them the chart tests
are skipped with that hint, which ``make test`` never hits because it builds the tools
first.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "manifests" / "chart" / "metricsched"
VALUE_SETS = sorted((CHART / "ci").glob("*-values.yaml"))
K8S_VERSION = "1.35.4"

Manifest = dict[str, Any]


@functools.cache
def tools_bin() -> Path:
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def tool(name: str) -> Path:
    path = tools_bin() / name
    if not path.exists():
        pytest.fail(f"{name} is not built yet: run `make tools`")
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(tool("helm")), *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{out.stderr}")
    return out


def template_args(values_files: Sequence[Path], sets: Sequence[str]) -> list[str]:
    args = ["template", "metricsched", str(CHART), "--namespace", "metricsched"]
    args += ["--kube-version", K8S_VERSION]
    for f in values_files:
        args += ["-f", str(f)]
    for s in sets:
        args += ["--set", s]
    return args


@functools.cache
def _render_text(values_files: tuple[Path, ...], sets: tuple[str, ...]) -> str:
    return helm(*template_args(values_files, sets)).stdout


def render_text(*sets: str, values: Sequence[Path] = ()) -> str:
    return _render_text(tuple(values), tuple(sets))


def render(*sets: str, values: Sequence[Path] = ()) -> list[Manifest]:
    """The chart's objects for these --set values (and values files), parsed."""
    docs = yaml.safe_load_all(render_text(*sets, values=values))
    return [d for d in docs if d]


def render_error(*sets: str) -> str:
    """helm template's error message for values the chart must refuse."""
    out = helm(*template_args((), sets), check=False)
    assert out.returncode != 0, f"helm accepted {sets}"
    return out.stderr


def one(manifests: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    found = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def kinds(manifests: list[Manifest]) -> list[str]:
    return sorted(m["kind"] for m in manifests)


def container(manifests: list[Manifest]) -> Manifest:
    (c,) = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def env(manifests: list[Manifest]) -> dict[str, Any]:
    """The container's env: name -> value (or the valueFrom mapping)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(manifests)["env"]}
