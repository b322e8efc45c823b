#!/usr/bin/env python3
"""Builds the operator image with podman, offline, from Debian packages and PyPI wheels.

    python hack/image.py build [--refresh-base]   # what `make image` runs
    python hack/image.py base                     # the Python base image only
    python hack/image.py containers-conf          # write podman's config; print its path

Five steps, each reported on one line, their output in ``build/image/build.log``:

1. ``containers.conf`` for podman on this host (see ``containers_conf``).
2. The Python base: Debian bookworm made by mmdebstrap (python3, pip, ca-certificates,
   passwd; no docs, man pages, locales or compiled caches), imported as
   ``localhost/metricsched-base:bookworm-<recipe hash>``. The hash covers the whole
   recipe, so a changed recipe builds a new base; a base is used only when its label
   carries that hash, and its root filesystem tarball is renamed into the cache only
   once mmdebstrap succeeded, so an interrupted build is never half-used.
3. Wheels of the dependencies at the versions of constraints.txt, fetched on the host for
   the base's Python (cp311, manylinux, binary only) with their shared objects stripped,
   plus a pip.conf that sends the image's pip to them with no index.
4. The repository's Dockerfile, built with ``podman build --pull=never --network=none``
   over that base, the wheels mounted at /mnt/wheels.
5. An ``oci-archive`` of the image (skopeo) in ``build/image/`` for inspection.

Stdlib only. Runs as root: mmdebstrap --mode=root, and podman's root storage.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "image"
LOG = OUT / "build.log"
CONTAINERS_CONF = OUT / "containers.conf"
WHEELS = OUT / "wheels"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metricsched" / "image"

BASE_REPO = "localhost/metricsched-base"
RECIPE_LABEL = "io.metricsched.base.recipe"
SUITE = "bookworm"
# The base's Python: bookworm ships 3.11. Wheels are fetched for it, not for the host's.
BASE_PYTHON = "3.11"
BASE_GLIBC = (2, 36)

# Everything that decides the base's content; its hash names the base.
MMDEBSTRAP_ARGS = [
    "--variant=essential",
    "--mode=root",
    "--format=tar",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    '--aptopt=APT::Install-Recommends "false"',
    # libstdc++6: numpy's extension modules link it (the core's node table is numpy).
    "--include=python3,python3-pip,passwd,ca-certificates,libstdc++6",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    # Licences stay: Debian's copyright files are what the image's users are owed.
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/lintian/*",
    # glibc's iconv modules (7 MB): Python's codecs are its own; nothing here calls iconv.
    "--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*",
    # Compiled caches of the standard library (27 MB): the root filesystem is read-only
    # where the image runs, so they are the only ones Python would ever read; it compiles
    # in memory instead, at a start-up cost of well under a second.
    '--customize-hook=find "$1/usr" -depth -name __pycache__ -type d -exec rm -rf {} +',
    SUITE,
]
IMPORT_CHANGES = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
]

PIP_CONF = """\
# Written by hack/image.py: the image build has no network; pip finds everything here.
[global]
no-index = true
find-links = /mnt/wheels
"""


class BuildError(RuntimeError):
    """A failed step; main() prints it with the log's last lines, not a traceback."""


class MissingToolsError(BuildError):
    """Nothing ran yet: the message says what to install."""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- prerequisites ---------------------------------------------------------------------

TOOLS = {
    "podman": "builds and runs the image",
    "runc": "the OCI runtime podman must use here",
    "skopeo": "exports the oci-archive",
    "mmdebstrap": "makes the Python base from Debian packages",
}


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def require_tools() -> None:
    if os.geteuid() != 0:
        raise MissingToolsError(
            "make image needs root: mmdebstrap makes the base in --mode=root and podman "
            "keeps the image in root's storage (run `sudo make image`; rootless podman is "
            "not supported by this script)"
        )
    missing = missing_tools()
    if missing:
        lines = "\n".join(f"  {tool:<11} {TOOLS[tool]}" for tool in missing)
        raise MissingToolsError(
            f"missing: {' '.join(missing)}\n{lines}\n"
            "install them with `make image-deps` (hack/install-image-deps.sh: "
            f"sudo apt-get install --no-install-recommends {' '.join(missing)}), "
            "or build with Docker instead: `docker build -t metricsched:<version> .` "
            '(see the README\'s "The operator image")'
        )


# --- step 1: containers.conf -----------------------------------------------------------


def ulimits() -> dict[str, tuple[int, int]]:
    """The ulimits a container may get here: this process's own, nproc capped at pid_max.

    podman gives a root container nofile=1048576 unless told otherwise, and runc must then
    raise the limit above the host's hard limit, which only works with CAP_SYS_RESOURCE
    (absent in a sandboxed VM: "error setting rlimit type 7: operation not permitted").
    nproc is capped at kernel.pid_max because no more processes can exist anyway, and
    this VM refuses any RLIMIT_NPROC above it ("rlimit type 6").
    """
    out = {}
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        cap = 1 << 20
        if name == "nproc":
            with contextlib.suppress(OSError, ValueError):
                cap = int(Path("/proc/sys/kernel/pid_max").read_text())
        hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        out[name] = (soft, hard)
    return out


def containers_conf() -> str:
    limits = ulimits()
    entries = ", ".join(f'"{name}={soft}:{hard}"' for name, (soft, hard) in limits.items())
    return (
        "# Written by hack/image.py for this host; used through CONTAINERS_CONF.\n"
        "#\n"
        "# default_ulimits: podman raises a root container's nofile to 1048576 by default,\n"
        "# above this host's hard limit; without CAP_SYS_RESOURCE runc then fails with\n"
        '# "error setting rlimit ... operation not permitted". These are the limits of the\n'
        "# shell that ran `make image` (nproc capped at kernel.pid_max).\n"
        "# runtime: runc. crun, which podman prefers when both are installed, refuses a\n"
        "# cgroup v1 host with a hybrid hierarchy like this one.\n"
        "[containers]\n"
        f"default_ulimits = [{entries}]\n"
        "\n"
        "[engine]\n"
        'runtime = "runc"\n'
    )


def write_containers_conf() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    text = containers_conf()
    if not CONTAINERS_CONF.exists() or CONTAINERS_CONF.read_text() != text:
        CONTAINERS_CONF.write_text(text)
    return CONTAINERS_CONF


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


# --- running commands ------------------------------------------------------------------


def run(
    argv: Sequence[str], *, step: str, env: dict[str, str] | None = None, capture: bool = False
) -> str:
    """Run argv with its output in the log (stdout returned if captured); BuildError if it fails."""
    with LOG.open("a") as log:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.run(
            list(argv),
            stdout=subprocess.PIPE if capture else log,
            stderr=log if capture else subprocess.STDOUT,
            text=True,
            env=env or podman_env(),
            check=False,
        )
        if capture:
            log.write(proc.stdout)
    if proc.returncode != 0:
        raise BuildError(f"{step} failed ({argv[0]} exited {proc.returncode})")
    return proc.stdout


def podman_quiet(*args: str) -> None:
    """A podman command whose failure is fine (removing what may not exist or be in use)."""
    subprocess.run(["podman", *args], capture_output=True, env=podman_env(), check=False)


def podman(*args: str, step: str, capture: bool = False) -> str:
    return run(["podman", *args], step=step, capture=capture)


# --- step 2: the base ------------------------------------------------------------------


def recipe_hash() -> str:
    text = json.dumps({"mmdebstrap": MMDEBSTRAP_ARGS, "import": IMPORT_CHANGES})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def base_tag(recipe: str) -> str:
    return f"{BASE_REPO}:{SUITE}-{recipe}"


def image_label(ref: str, label: str) -> str | None:
    """A label of a local image; None if there is no such image."""
    proc = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Labels}}", ref],
        capture_output=True,
        text=True,
        env=podman_env(),
        check=False,
    )
    if proc.returncode != 0:
        return None
    labels = json.loads(proc.stdout.strip() or "null") or {}
    return str(labels.get(label, ""))


@dataclasses.dataclass(frozen=True)
class BasePlan:
    """What step 2 does: "ready" (use the image), "import" (the cached tarball) or "build"."""

    action: str
    reason: str


def plan_base(*, recipe: str, label: str | None, tarball: Path) -> BasePlan:
    if label == recipe:
        return BasePlan("ready", "cached")
    if tarball.is_file():
        why = "not imported yet" if label is None else "stale image replaced"
        return BasePlan("import", f"{why}; from {tarball}")
    if label is None:
        return BasePlan("build", "no base for this recipe yet")
    return BasePlan("build", f"the image's recipe label is {label!r}, not {recipe!r}")


def build_base(*, refresh: bool = False, progress: str = "") -> str:
    recipe = recipe_hash()
    tag = base_tag(recipe)
    tarball = CACHE / f"base-{SUITE}-{recipe}.tar"
    if refresh:
        tarball.unlink(missing_ok=True)
        podman_quiet("rmi", "-f", tag)
    plan = plan_base(recipe=recipe, label=image_label(tag, RECIPE_LABEL), tarball=tarball)
    if plan.action == "build":
        say(f"{progress}building {tag} with mmdebstrap ({plan.reason}; about a minute)")
        CACHE.mkdir(parents=True, exist_ok=True)
        # Written beside its final name and renamed only on success: an interrupted or
        # failed mmdebstrap leaves nothing that a later build could take for a base.
        partial = tarball.with_suffix(".tar.partial")
        partial.unlink(missing_ok=True)
        try:
            run(["mmdebstrap", *MMDEBSTRAP_ARGS, str(partial)], step="mmdebstrap (the base)")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.rename(tarball)
    if plan.action in ("build", "import"):
        podman_quiet("rmi", "-f", tag)
        changes = [*IMPORT_CHANGES, f"LABEL {RECIPE_LABEL}={recipe}"]
        run(
            ["podman", "import", *(f"--change={c}" for c in changes), str(tarball), tag],
            step="podman import (the base)",
        )
        if image_label(tag, RECIPE_LABEL) != recipe:
            raise BuildError(f"the imported base {tag} does not carry its recipe label")
        forget_other_bases(keep=recipe)
    return f"{tag} ({plan.reason if plan.action != 'build' else 'built: ' + plan.reason})"


def forget_other_bases(*, keep: str) -> None:
    """Remove bases (images and tarballs) of other recipes; one in use stays."""
    out = subprocess.run(
        ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", BASE_REPO],
        capture_output=True,
        text=True,
        env=podman_env(),
        check=False,
    ).stdout.split()
    for ref in out:
        if not ref.endswith(f"-{keep}"):
            podman_quiet("rmi", ref)
    for old in CACHE.glob(f"base-{SUITE}-*.tar"):
        if old.name != f"base-{SUITE}-{keep}.tar":
            old.unlink(missing_ok=True)


# --- step 3: wheels --------------------------------------------------------------------


def requirements() -> list[str]:
    """install_requires of setup.cfg, and what building the package needs (pyproject)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    build = re.search(r"requires\s*=\s*\[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.S)
    if build:
        reqs += [r.strip().strip("\"'") for r in build.group(1).split(",") if r.strip()]
    return reqs


CONSTRAINTS = ROOT / "constraints.txt"  # the exact versions (hack/lock.py)


def wheels_key() -> str:
    text = json.dumps([requirements(), CONSTRAINTS.read_text(), BASE_PYTHON, platform_tags()])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def platform_tags() -> list[str]:
    """Every manylinux tag the base's glibc runs, newest first (pip does not expand them)."""
    arch = platform.machine()
    major, newest = BASE_GLIBC
    tags = [f"manylinux_{major}_{minor}_{arch}" for minor in range(newest, 4, -1)]
    return [*tags, f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]


def fetch_wheels() -> str:
    key = wheels_key()
    stamp = WHEELS / ".key"
    if stamp.is_file() and stamp.read_text() == key:
        return f"{len(list(WHEELS.glob('*.whl')))} wheels (cached)"
    shutil.rmtree(WHEELS, ignore_errors=True)
    partial = WHEELS.with_name("wheels.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            f"--python-version={BASE_PYTHON}",
            "--implementation=cp",
            f"--abi=cp{BASE_PYTHON.replace('.', '')}",
            *(f"--platform={tag}" for tag in platform_tags()),
            "--dest",
            str(partial),
            "--constraint",
            str(CONSTRAINTS),
            *requirements(),
        ],
        step="pip download (wheels)",
        env=dict(os.environ),
    )
    stripped = strip_wheels(partial)
    (partial / "pip.conf").write_text(PIP_CONF)
    (partial / ".key").write_text(key)
    partial.rename(WHEELS)
    note = f", {stripped / 1e6:.1f} MB of symbols stripped" if stripped else ""
    return f"{len(list(WHEELS.glob('*.whl')))} wheels{note}"


def strip_wheels(directory: Path) -> int:
    """Strip the shared objects in every wheel (RECORD rewritten); bytes saved."""
    strip = shutil.which("strip")
    if strip is None:
        say("  (no `strip` here: wheels stay unstripped; apt-get install binutils)")
        return 0
    saved = 0
    for wheel in sorted(directory.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            if not any(n.endswith(".so") or ".so." in n for n in names):
                continue
            # A wheel auditwheel repaired (numpy: numpy.libs/ with OpenBLAS) has shared
            # objects patchelf rewrote; strip breaks their layout ("ELF load command
            # address/offset not page-aligned" at import), so such wheels stay as built.
            if any(n.split("/", 1)[0].endswith(".libs") for n in names):
                continue
            entries = [(info, zf.read(info)) for info in zf.infolist()]
        out: list[tuple[zipfile.ZipInfo, bytes]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for info, data in entries:
                new = data
                if info.filename.endswith(".so") or ".so." in info.filename:
                    path = Path(tmp) / "x.so"
                    path.write_bytes(data)
                    subprocess.run([strip, "--strip-unneeded", str(path)], check=True)
                    new = path.read_bytes()
                    saved += len(data) - len(new)
                out.append((info, new))
        rewrite_wheel(wheel, out)
    return saved


def rewrite_wheel(wheel: Path, entries: list[tuple[zipfile.ZipInfo, bytes]]) -> None:
    """Write entries back into the wheel with a RECORD that matches them."""
    record_name = next(i.filename for i, _ in entries if i.filename.endswith(".dist-info/RECORD"))
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for info, data in entries:
        if info.filename == record_name:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([info.filename, f"sha256={digest}", len(data)])
    writer.writerow([record_name, "", ""])
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            body = rows.getvalue().encode() if info.filename == record_name else data
            zf.writestr(info, body, compress_type=zipfile.ZIP_DEFLATED)
    tmp.rename(wheel)


# --- step 4 and 5: the image and its archive -------------------------------------------


def version() -> str:
    text = (ROOT / "operator" / "metricsched" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "(.+)"', text, re.M)
    if not match:
        raise BuildError("no __version__ in operator/metricsched/__init__.py")
    return match.group(1)


def git(*args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else ""


def revision() -> str:
    """HEAD, with -dirty when a file the image is built from differs from it."""
    head = git("rev-parse", "HEAD") or "unknown"
    inputs = [
        "Dockerfile",
        ".dockerignore",
        "pyproject.toml",
        "setup.cfg",
        "constraints.txt",
        "README.md",
        "operator",
    ]
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", *inputs)
    return head + ("-dirty" if dirty else "")


def source() -> str:
    """Where the source is: the origin remote, else this checkout (a URL git can clone)."""
    return git("remote", "get-url", "origin") or f"file://{ROOT}"


def build_labels() -> list[str]:
    """The Dockerfile's label arguments, and the labels themselves: podman 4.3's layer cache
    ignores a changed build argument, so a cached build would keep the last revision."""
    labels = {"version": version(), "revision": revision(), "source": source()}
    return [
        *(f"--build-arg={key.upper()}={value}" for key, value in labels.items()),
        *(f"--label=org.opencontainers.image.{key}={value}" for key, value in labels.items()),
    ]


def build_image(*, image: str, base: str) -> str:
    started = time.monotonic()
    podman(
        "build",
        "--pull=never",
        "--network=none",
        "--layers",
        "--format=oci",
        f"--build-arg=PYTHON_IMAGE={base}",
        "--build-arg=PIP_CONFIG_FILE=/mnt/wheels/pip.conf",
        *build_labels(),
        f"--volume={WHEELS}:/mnt/wheels:ro",
        f"--tag={image}",
        f"--file={ROOT / 'Dockerfile'}",
        str(ROOT),
        step="podman build",
    )
    size = int(
        podman("image", "inspect", "--format={{.Size}}", image, step="inspect", capture=True)
    )
    return f"{image} {size / 1e6:.0f} MB ({time.monotonic() - started:.0f}s)"


def archive_path(image: str) -> Path:
    name, _, tag = image.rpartition("/")[2].partition(":")
    return OUT / f"{name}-{tag or 'latest'}.oci.tar"


def export_archive(image: str) -> str:
    path = archive_path(image)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    ref = image if "/" in image.partition(":")[0] else f"localhost/{image}"
    run(
        [
            "skopeo",
            "copy",
            "--quiet",
            f"containers-storage:{ref}",
            f"oci-archive:{partial}:{image.rpartition('/')[2]}",
        ],
        step="skopeo copy (oci-archive)",
    )
    partial.rename(path)
    return f"{path.relative_to(ROOT)} ({path.stat().st_size / 1e6:.0f} MB)"


# --- main ------------------------------------------------------------------------------


def cmd_build(image: str, *, refresh_base: bool, base_only: bool = False) -> None:
    require_tools()
    OUT.mkdir(parents=True, exist_ok=True)
    LOG.write_text(f"hack/image.py build {image} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n")
    say(f"image {image} (log: {LOG.relative_to(ROOT)})")
    steps = 2 if base_only else 5
    conf = write_containers_conf()
    limits = ", ".join(f"{k} {s}:{h}" for k, (s, h) in ulimits().items())
    say(f"  [1/{steps}] containers.conf  {conf.relative_to(ROOT)} (runc; {limits})")
    base = build_base(refresh=refresh_base, progress=f"  [2/{steps}] base             ")
    say(f"  [2/{steps}] base             {base}")
    if base_only:
        return
    say(f"  [3/{steps}] wheels           {fetch_wheels()}")
    say(f"  [4/{steps}] podman build     {build_image(image=image, base=base.split()[0])}")
    say(f"  [5/{steps}] oci-archive      {export_archive(image)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="base, wheels, podman build, oci-archive")
    build.add_argument("--image", default=f"metricsched:{version()}")
    build.add_argument(
        "--refresh-base",
        action="store_true",
        help="rebuild the base even if cached (newer Debian packages, security updates)",
    )
    base = sub.add_parser("base", help="the Python base image only")
    base.add_argument("--refresh-base", action="store_true")
    sub.add_parser("containers-conf", help="write build/image/containers.conf; print its path")
    args = parser.parse_args(argv)
    try:
        if args.command == "containers-conf":
            print(write_containers_conf())
        elif args.command == "base":
            cmd_build("", refresh_base=args.refresh_base, base_only=True)
        else:
            cmd_build(args.image, refresh_base=args.refresh_base)
    except BuildError as e:
        say(f"error: {e}")
        if not isinstance(e, MissingToolsError) and LOG.exists():
            tail = LOG.read_text(errors="replace").splitlines()[-15:]
            say("  " + "\n  ".join(tail))
            say(f"the whole log: {LOG}")
        return 1
    except KeyboardInterrupt:
        say(f"interrupted; the log so far: {LOG}")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
