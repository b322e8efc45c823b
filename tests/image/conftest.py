"""Fixtures for tests of the operator image that `make image` builds (podman, runc).

Every test here is marked ``image``; `make image-test` and `make test` build the image
first. A missing podman or image fails these tests instead of skipping them: `make test`
installs podman, so its absence is a broken setup, not a reason to test less. Containers
started here carry the label ``io.metricsched.test`` and are removed by the fixture that
started them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, cluster, namespace  # noqa: F401  (fixtures)

OUT = ROOT / "build" / "image"
CONTAINERS_CONF = OUT / "containers.conf"
TEST_LABEL = "io.metricsched.test"
# How the chart runs the container (values.yaml: securityContext, podSecurityContext).
AS_THE_CHART_RUNS_IT = (
    "--read-only",
    "--tmpfs=/tmp:rw,size=64m",
    "--user=65532:65532",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/image/" in str(item.fspath):
            item.add_marker(pytest.mark.image)


def version() -> str:
    text = (ROOT / "operator" / "metricsched" / "__init__.py").read_text()
    (found,) = re.findall(r'^__version__ = "(.+)"', text, re.M)
    return found


IMAGE = f"localhost/metricsched:{version()}"
ARCHIVE = OUT / f"metricsched-{version()}.oci.tar"


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)},
        timeout=timeout,
        check=False,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return out


def run_image(
    *args: str, options: Sequence[str] = AS_THE_CHART_RUNS_IT, entrypoint: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`podman run --rm` the image as the chart runs it; the result, whatever its exit code."""
    extra = [f"--entrypoint={entrypoint}"] if entrypoint else []
    return podman(
        "run", "--rm", f"--label={TEST_LABEL}=run", *options, *extra, IMAGE, *args, check=False
    )


def labelled_containers() -> list[dict[str, Any]]:
    out = podman("ps", "--all", "--format=json", f"--filter=label={TEST_LABEL}")
    return list(json.loads(out.stdout or "[]"))


@pytest.fixture(scope="session")
def image() -> str:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run `make image` (it installs podman, runc, ...)")
    if not CONTAINERS_CONF.is_file() or podman("image", "exists", IMAGE, check=False).returncode:
        pytest.fail(f"no image {IMAGE}: run `make image` (or `make image-test`) first")
    return IMAGE


@pytest.fixture(scope="session")
def archive(image: str) -> Path:
    if not ARCHIVE.is_file():
        pytest.fail(f"no {ARCHIVE.relative_to(ROOT)}: run `make image` first")
    return ARCHIVE
