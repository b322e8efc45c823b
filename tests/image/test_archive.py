"""The exported oci-archive: the configuration the chart relies on, labels, and layers that
carry no secrets, no repository history and nothing of the build's scaffolding."""

from __future__ import annotations

import configparser
import gzip
import io
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import metricsched
from tests.image.conftest import ROOT

PRIVATE_KEY = b"PRIVATE KEY-----"
# Paths no layer may hold: repository history and state, build scaffolding, credentials.
FORBIDDEN_PARTS = {".git", ".cluster", ".venv", "hack", ".kube", ".ssh", ".netrc"}
FORBIDDEN_SUFFIXES = (".whl", ".pyc", "pip.conf", "kubeconfig")


class Archive:
    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        index = self.json("index.json")
        (entry,) = index["manifests"]
        self.ref_name = entry["annotations"]["org.opencontainers.image.ref.name"]
        self.manifest = self.blob_json(entry["digest"])
        self.config = self.blob_json(self.manifest["config"]["digest"])

    def json(self, name: str) -> Any:
        member = self.tar.extractfile(name)
        assert member is not None
        return json.load(member)

    def blob(self, digest: str) -> bytes:
        member = self.tar.extractfile("blobs/" + digest.replace(":", "/"))
        assert member is not None
        return member.read()

    def blob_json(self, digest: str) -> Any:
        return json.loads(self.blob(digest))

    def layers(self) -> Iterator[tarfile.TarFile]:
        for layer in self.manifest["layers"]:
            data = self.blob(layer["digest"])
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                yield tar


@pytest.fixture(scope="module")
def oci(archive: Path) -> Iterator[Archive]:
    with tarfile.open(archive) as tar:
        yield Archive(tar)


def test_the_archive_names_the_image_the_chart_installs(oci: Archive) -> None:
    assert oci.ref_name == f"metricsched:{metricsched.__version__}"


def test_the_configuration_runs_metricsched_run_as_uid_65532(oci: Archive) -> None:
    config = oci.config["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["metricsched"]
    assert config["Cmd"] == ["run"]
    assert config["WorkingDir"] == "/tmp"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PATH"].startswith("/opt/metricsched/bin:")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_the_labels_say_what_was_built_from_where(oci: Archive) -> None:
    labels = oci.config["config"]["Labels"]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert labels["org.opencontainers.image.version"] == metricsched.__version__
    assert labels["org.opencontainers.image.revision"].removesuffix("-dirty") == head
    assert labels["org.opencontainers.image.licenses"] == cfg["metadata"]["license"]
    assert labels["org.opencontainers.image.source"]


def test_no_layer_holds_secrets_history_or_build_scaffolding(oci: Archive) -> None:
    found = []
    walked = set()
    for layer in oci.layers():
        for member in layer:
            walked.add(member.name.removeprefix("./"))
            parts = set(Path(member.name).parts)
            if parts & FORBIDDEN_PARTS or member.name.endswith(FORBIDDEN_SUFFIXES):
                found.append(member.name)
            # "tests" only under site-packages: the build prunes the dependencies' tests.
            if "tests" in parts and "site-packages" in parts:
                found.append(member.name)
            if member.isfile() and member.size < 1_000_000:
                f = layer.extractfile(member)
                if f is not None and PRIVATE_KEY in f.read():
                    found.append(member.name)
    assert "opt/metricsched/bin/metricsched" in walked  # the walk saw the image's files
    assert found == []


def test_the_image_is_under_200_mb(oci: Archive) -> None:
    size = 0
    for layer in oci.layers():
        size += sum(m.size for m in layer if m.isfile())
    assert size < 200_000_000, f"{size / 1e6:.0f} MB"
