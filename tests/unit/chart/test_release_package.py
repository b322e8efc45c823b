"""What `make release` publishes, without the image: the packaged chart installs as the
checkout's chart does, the index serves it, the CRD is crds/'s (hack/release.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import chart_helpers as ch
import pytest
import yaml

import metricsched


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "dist"
    proc = subprocess.run(
        [sys.executable, str(ch.ROOT / "hack" / "release.py"), "--no-image", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def chart_version() -> str:
    return str(yaml.safe_load((ch.CHART / "Chart.yaml").read_text())["version"])


def packaged(release_dir: Path) -> Path:
    return release_dir / f"metricsched-{chart_version()}.tgz"


def test_the_packaged_chart_renders_what_the_checkout_renders(release_dir: Path) -> None:
    args = ["template", "metricsched", str(packaged(release_dir))]
    args += ["--namespace", "metricsched", "--kube-version", ch.K8S_VERSION]
    from_package = ch.helm(*args).stdout
    assert from_package == ch.render_text()
    assert ch.container(ch.render())["image"] == f"metricsched:{metricsched.__version__}"


def test_the_packaged_chart_with_the_webhook_passes_kubeconform(
    release_dir: Path, kubeconform: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    args = ["template", "metricsched", str(packaged(release_dir))]
    args += ["--namespace", "metricsched", "--kube-version", ch.K8S_VERSION]
    args += ["--set", "webhook.enabled=true", "--include-crds"]
    out = kubeconform(ch.helm(*args).stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Invalid: 0, Errors: 0" in out.stdout


def test_the_package_leaves_the_ci_value_sets_out_and_carries_the_crd(release_dir: Path) -> None:
    with tarfile.open(packaged(release_dir)) as tar:
        names = tar.getnames()
        crd = tar.extractfile("metricsched/crds/schedulingpolicy.yaml")
        assert crd is not None
        assert crd.read() == (ch.ROOT / "crds" / "schedulingpolicy.yaml").read_bytes()
    assert "metricsched/values.schema.json" in names
    assert not [n for n in names if n.startswith("metricsched/ci/")]


def test_the_index_serves_the_packaged_chart_by_its_digest(release_dir: Path) -> None:
    index = yaml.safe_load((release_dir / "index.yaml").read_text())
    (entry,) = index["entries"]["metricsched"]
    assert entry["version"] == chart_version()
    assert entry["appVersion"] == metricsched.__version__
    assert entry["urls"] == [packaged(release_dir).name]
    assert entry["digest"] == hashlib.sha256(packaged(release_dir).read_bytes()).hexdigest()


def test_the_crd_file_is_the_one_source_and_every_file_is_summed(release_dir: Path) -> None:
    crds = release_dir / f"metricsched-{metricsched.__version__}-crds.yaml"
    assert crds.read_text() == (ch.ROOT / "crds" / "schedulingpolicy.yaml").read_text()
    lines = (release_dir / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split("  ") for line in lines)}
    assert sorted(sums) == sorted(["index.yaml", packaged(release_dir).name, crds.name])
    for name, digest in sums.items():
        assert hashlib.sha256((release_dir / name).read_bytes()).hexdigest() == digest


def release_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_release", ch.ROOT / "hack" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_chart_whose_app_version_is_not_the_package_version_is_not_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = release_py()
    monkeypatch.setattr(release, "version", lambda: "9.9.9")
    with pytest.raises(release.ReleaseError, match="is not the package's 9\\.9\\.9"):
        release.release(tmp_path / "dist", image=None, chart_url=None)
    assert not (tmp_path / "dist").exists()
