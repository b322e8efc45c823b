"""A memory cgroup per replica: the Helm chart's memory limit, enforced by the kernel.

``MemoryCgroup.create(name, limit_bytes)`` makes a cgroup with that limit (and no swap
beyond it) under the memory controller, cgroup v2 (``memory.max``) or v1
(``memory.limit_in_bytes``), or returns None where none is usable (not root, no memory
controller, read-only ``/sys/fs/cgroup``): the caller then runs unconfined and says so.

A process is put in the cgroup before it runs any of its own code: ``wrap(argv)`` is a
``sh`` that writes its own pid to ``cgroup.procs`` and then ``exec``s ``argv`` (same pid,
no race with the first allocations, no ``preexec_fn`` in a threaded harness). A process
over the limit is OOM-killed as a container's would be: it exits with -9, which the
harness's supervisor records, and ``oom_kills()`` counts it.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "metricsched-faults-"


class MemoryCgroup:
    def __init__(self, path: Path, *, v2: bool, limit_bytes: int) -> None:
        self.path = path
        self.v2 = v2
        self.limit_bytes = limit_bytes

    @classmethod
    def create(cls, name: str, limit_bytes: int, *, root: Path = ROOT) -> MemoryCgroup | None:
        """A new cgroup ``metricsched-faults-<name>`` limited to ``limit_bytes``, or None."""
        if "memory" in _read(root / "cgroup.controllers").split():
            with contextlib.suppress(OSError):
                # Children of the root get the controller only when it is delegated.
                if "memory" not in _read(root / "cgroup.subtree_control").split():
                    (root / "cgroup.subtree_control").write_text("+memory")
            path, v2 = root / (PREFIX + name), True
        elif (root / "memory" / "memory.limit_in_bytes").exists():
            path, v2 = root / "memory" / (PREFIX + name), False
        else:
            return None
        try:
            path.mkdir(exist_ok=True)
            if v2:
                (path / "memory.max").write_text(str(limit_bytes))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if (path / "memory.memsw.limit_in_bytes").exists():  # memory + swap
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        cg = cls(path, v2=v2, limit_bytes=limit_bytes)
        if cg.limit() != limit_bytes:  # the kernel did not take it: not enforced
            cg.remove()
            return None
        return cg

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this cgroup from its first instruction."""
        procs = str(self.path / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]

    def limit(self) -> int | None:
        text = _read(self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes"))
        return int(text) if text.isdigit() else None

    def oom_kills(self) -> int:
        """Processes of this cgroup the kernel killed for going over the limit."""
        text = _read(self.path / ("memory.events" if self.v2 else "memory.oom_control"))
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def peak_bytes(self) -> int | None:
        """The cgroup's highest charge (page cache included), where the kernel keeps it."""
        text = _read(self.path / ("memory.peak" if self.v2 else "memory.max_usage_in_bytes"))
        return int(text) if text.isdigit() else None

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (they are, after Replica.stop)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # still busy: a killed process is being reaped
                time.sleep(0.1)


def vm_hwm_bytes(pid: int) -> int | None:
    """A process's peak resident set (``VmHWM``), or None if it is gone."""
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
