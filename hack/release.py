#!/usr/bin/env python3
"""Builds what a release publishes, under dist/ (git-ignored), with the pinned helm.

    python hack/release.py --image metricsched:<version>   # what `make release` runs
    python hack/release.py --no-image --out <dir>          # the chart, its index, the CRD

What it writes, each reported on one line:

- ``metricsched-<chart version>.tgz``: the chart, ``helm package`` (its ``.helmignore``
  leaves ``ci/`` out);
- ``index.yaml``: a chart repository index of that directory (``helm repo index``;
  ``--chart-url`` makes the chart's URL absolute, else it is relative to the index);
- ``metricsched-<version>.oci.tar``: the image ``make image`` built (``hack/image.py``
  exports it with skopeo), copied, and beside it ``metricsched-<version>.oci.tar.digest``:
  the digest of its manifest, the one a registry serves it under once
  ``skopeo copy oci-archive:... docker://...`` pushed it unchanged;
- ``metricsched-<version>-crds.yaml``: the CRD (``crds/``), for installs that manage CRDs
  apart from Helm;
- ``SHA256SUMS`` of the files above.

The chart's appVersion must be the package's version (the image tag it defaults to); the
release refuses otherwise. Stdlib only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "manifests" / "chart" / "metricsched"
IMAGE_OUT = ROOT / "build" / "image"


class ReleaseError(RuntimeError):
    """A failed step; main() prints it, not a traceback."""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def version() -> str:
    text = (ROOT / "operator" / "metricsched" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "(.+)"', text, re.M)
    if not match:
        raise ReleaseError("no __version__ in operator/metricsched/__init__.py")
    return match.group(1)


def chart_field(name: str) -> str:
    """A top-level scalar of Chart.yaml (stdlib: no YAML parser needed for these)."""
    text = (CHART / "Chart.yaml").read_text()
    match = re.search(rf'^{name}:\s*"?([^"\s]+)"?\s*$', text, re.M)
    if not match:
        raise ReleaseError(f"no {name} in {CHART / 'Chart.yaml'}")
    return match.group(1)


def helm_binary() -> Path:
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    helm = Path(out.stdout.strip().splitlines()[-1]) / "helm"
    if not helm.exists():
        raise ReleaseError(f"{helm} is missing: run `make tools`")
    return helm


def helm(*args: str) -> str:
    proc = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ReleaseError(f"helm {' '.join(args)} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def package_chart(out: Path) -> Path:
    helm("package", str(CHART), "--destination", str(out))
    path = out / f"metricsched-{chart_field('version')}.tgz"
    if not path.exists():
        raise ReleaseError(f"helm package wrote no {path.name}")
    return path


def index_charts(out: Path, *, url: str | None) -> Path:
    helm("repo", "index", str(out), *(["--url", url] if url else []))
    return out / "index.yaml"


def write_crds(out: Path, *, release: str) -> Path:
    path = out / f"metricsched-{release}-crds.yaml"
    docs = [p.read_text().strip() + "\n" for p in sorted((ROOT / "crds").glob("*.yaml"))]
    path.write_text("---\n".join(docs))
    return path


def manifest_digest(archive: Path) -> str:
    """The digest of the archive's one image manifest (its index.json's only entry)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ReleaseError(f"{archive} has no index.json: not an OCI archive")
        index = json.load(member)
    manifests = index.get("manifests", [])
    if len(manifests) != 1:
        raise ReleaseError(f"{archive} holds {len(manifests)} manifests, expected one")
    return str(manifests[0]["digest"])


def copy_image(out: Path, *, image: str) -> tuple[Path, Path]:
    name, _, tag = image.rpartition("/")[2].partition(":")
    built = IMAGE_OUT / f"{name}-{tag or 'latest'}.oci.tar"
    if not built.exists():
        raise ReleaseError(f"{built} is missing: run `make image IMG={image}` first")
    path = out / built.name
    shutil.copyfile(built, path)
    digest = out / f"{built.name}.digest"
    digest.write_text(manifest_digest(path) + "\n")
    return path, digest


def release(out: Path, *, image: str | None, chart_url: str | None) -> list[Path]:
    app = version()
    if chart_field("appVersion") != app:
        raise ReleaseError(
            f"Chart.yaml's appVersion {chart_field('appVersion')} is not the package's {app}"
        )
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    chart = package_chart(out)
    say(f"  chart      {chart.relative_to(out.parent)} ({size(chart)})")
    index = index_charts(out, url=chart_url)
    say(f"  index      {index.relative_to(out.parent)} ({chart_url or 'relative URLs'})")
    crds = write_crds(out, release=app)
    say(f"  crds       {crds.relative_to(out.parent)} ({size(crds)})")
    files = [chart, index, crds]
    if image:
        archive, digest = copy_image(out, image=image)
        say(f"  image      {archive.relative_to(out.parent)} ({size(archive)})")
        say(f"  digest     {digest.relative_to(out.parent)} ({digest.read_text().strip()})")
        files += [archive, digest]
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{sha256(p)}  {p.name}\n" for p in sorted(files)))
    return [*files, sums]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--image", help="the image make image built, e.g. metricsched:0.2.0")
    what.add_argument("--no-image", action="store_true", help="the chart, index and CRD only")
    parser.add_argument("--chart-url", help="where index.yaml will be served (absolute URLs)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    say(f"release {version()} into {args.out}")
    try:
        files = release(args.out.resolve(), image=args.image, chart_url=args.chart_url)
    except ReleaseError as e:
        say(f"error: {e}")
        return 1
    say(f"{len(files)} files ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
