"""hack/image.py, the `make image` driver: what it does without podman, when it reuses
or rebuilds the base, the podman configuration it writes, and the wheels it repacks.

The build itself (mmdebstrap, podman, skopeo) runs in `make image`; tests/image test what
it produced.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import resource
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def image_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_image", ROOT / "hack" / "image.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# --- without podman --------------------------------------------------------------------


def test_without_podman_it_says_what_to_install_and_how(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git",):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    out = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "image.py"), "build"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bin_dir)},
        check=False,
    )
    assert out.returncode == 1
    assert "missing: podman runc skopeo mmdebstrap" in out.stderr
    assert "make image-deps" in out.stderr
    assert "apt-get install --no-install-recommends podman runc skopeo mmdebstrap" in out.stderr
    assert "docker build" in out.stderr
    assert "Traceback" not in out.stderr


# --- the base: reused, imported or rebuilt ---------------------------------------------


def test_a_base_labelled_with_the_recipe_is_used_as_it_is(
    image_py: ModuleType, tmp_path: Path
) -> None:
    plan = image_py.plan_base(recipe="abc", label="abc", tarball=tmp_path / "none.tar")
    assert plan.action == "ready"


def test_a_cached_tarball_is_imported_when_the_image_is_gone(
    image_py: ModuleType, tmp_path: Path
) -> None:
    tarball = tmp_path / "base.tar"
    tarball.write_bytes(b"rootfs")
    assert image_py.plan_base(recipe="abc", label=None, tarball=tarball).action == "import"


def test_a_stale_base_is_rebuilt_never_used(image_py: ModuleType, tmp_path: Path) -> None:
    plan = image_py.plan_base(recipe="new", label="old", tarball=tmp_path / "none.tar")
    assert plan.action == "build"
    assert "'old'" in plan.reason


def test_an_interrupted_build_leaves_nothing_that_counts_as_a_base(
    image_py: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "base.tar.partial").write_bytes(b"half a rootfs")
    plan = image_py.plan_base(recipe="abc", label=None, tarball=tmp_path / "base.tar")
    assert plan.action == "build"


def test_any_change_to_the_recipe_names_a_new_base(
    image_py: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = image_py.recipe_hash()
    monkeypatch.setattr(
        image_py, "MMDEBSTRAP_ARGS", [*image_py.MMDEBSTRAP_ARGS[:-1], "--include=curl", "bookworm"]
    )
    assert image_py.recipe_hash() != before
    assert image_py.base_tag(image_py.recipe_hash()).endswith(image_py.recipe_hash())


# --- podman's configuration ------------------------------------------------------------


def test_the_ulimits_given_to_containers_never_exceed_this_hosts_hard_limits(
    image_py: ModuleType,
) -> None:
    limits = image_py.ulimits()
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = limits[name]
        host_hard = resource.getrlimit(which)[1]
        assert soft <= hard
        assert host_hard == resource.RLIM_INFINITY or hard <= host_hard
    conf = image_py.containers_conf()
    assert 'runtime = "runc"' in conf
    assert f'"nofile={limits["nofile"][0]}:{limits["nofile"][1]}"' in conf


# --- wheels ----------------------------------------------------------------------------


def test_a_repacked_wheel_has_a_record_that_matches_its_files(
    image_py: ModuleType, tmp_path: Path
) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    entries = [
        (zipfile.ZipInfo("demo/__init__.py"), b"x = 1\n"),
        (zipfile.ZipInfo("demo/_fast.so"), b"\x7fELF stripped"),
        (zipfile.ZipInfo("demo-1.0.dist-info/RECORD"), b"stale"),
    ]
    image_py.rewrite_wheel(wheel, entries)
    with zipfile.ZipFile(wheel) as zf:
        rows = list(csv.reader(io.StringIO(zf.read("demo-1.0.dist-info/RECORD").decode())))
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == f"sha256={expected.decode()}"
            assert int(size) == len(data)
    assert len(rows) == 3


def test_wheels_are_fetched_for_the_bases_python_not_the_hosts(image_py: ModuleType) -> None:
    tags = image_py.platform_tags()
    assert tags[0].startswith("manylinux_2_36_")  # bookworm's glibc
    assert any(t.startswith("manylinux2014_") for t in tags)
    assert image_py.BASE_PYTHON == "3.11"
    assert "kopf>=1.45.2,<1.46" in image_py.requirements()
    assert any(r.startswith("setuptools") for r in image_py.requirements())


def test_wheels_are_fetched_at_the_versions_of_the_constraints_file(
    image_py: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commands: list[list[str]] = []
    monkeypatch.setattr(image_py, "WHEELS", tmp_path / "wheels")
    monkeypatch.setattr(image_py, "run", lambda cmd, **_: commands.append(list(cmd)))
    monkeypatch.setattr(image_py, "strip_wheels", lambda _: 0)
    image_py.fetch_wheels()
    (download,) = commands
    assert download[download.index("--constraint") + 1] == str(image_py.ROOT / "constraints.txt")
