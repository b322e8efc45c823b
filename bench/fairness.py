"""The CPU share each scheduler under test gets: the same for every system, stated.

Three modes (``python -m bench run --cpu-share``):

- ``pin`` (the default): the scheduler under test runs on one CPU of its own
  (``taskset -c``, the last CPU the harness may use, or ``--scheduler-cpu``); the control
  plane (API server, etcd, kwok, controller manager, Prometheus, exporter), the harness and
  the watcher run on the others. kube-scheduler then sees one CPU (GOMAXPROCS 1), as the
  Python schedulers' one thread does: the ratios compare work per CPU, not what the kernel
  happened to give each process on a busy box. Processes this harness did not start (other
  users of the machine) are not moved: they may still run on the scheduler's CPU.
- ``quota``: no pinning; the scheduler runs in a CPU cgroup limited to ``--cpu-quota``
  cores (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``; root only). A cap, not a
  guarantee: on a saturated box a process may get less than its quota.
- ``none``: the opt-out, as before issue 30: every process shares every CPU.

``Placement.describe()`` is stored in the results file and printed in the report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any

MODES = ("pin", "quota", "none")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAME = "metricsched-bench"
PERIOD_US = 100_000


@dataclasses.dataclass(frozen=True)
class Placement:
    mode: str
    scheduler_cpus: tuple[int, ...] = ()  # pin: the scheduler's CPU(s)
    other_cpus: tuple[int, ...] = ()  # pin: everything else the harness starts
    quota_cores: float | None = None  # quota
    cgroup: Path | None = None  # quota: the cgroup the scheduler is put in
    cgroup_version: int | None = None
    note: str = ""

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run with this placement (same pid: taskset and sh ``exec``)."""
        if self.mode == "pin" and self.scheduler_cpus:
            cpus = ",".join(str(c) for c in self.scheduler_cpus)
            return ["taskset", "-c", cpus, *argv]
        if self.mode == "quota" and self.cgroup is not None:
            procs = self.cgroup / "cgroup.procs"
            return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]
        return argv

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "scheduler_cpus": list(self.scheduler_cpus),
            "other_cpus": list(self.other_cpus),
            "quota_cores": self.quota_cores,
            "cgroup": str(self.cgroup) if self.cgroup else None,
            "cgroup_version": self.cgroup_version,
            "note": self.note,
        }


UNPINNED = Placement("none", note="no pinning, no quota")


def choose(mode: str, *, scheduler_cpu: int | None = None, quota_cores: float = 1.0) -> Placement:
    """The placement for ``mode``, or ``none`` with a note saying why it cannot be had."""
    if mode == "pin":
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return Placement("none", note=f"pin asked, but only CPU {cpus} is available")
        mine = scheduler_cpu if scheduler_cpu is not None else cpus[-1]
        if mine not in cpus:
            return Placement("none", note=f"pin asked, but CPU {mine} is not in {cpus}")
        others = tuple(c for c in cpus if c != mine)
        return Placement(
            "pin",
            scheduler_cpus=(mine,),
            other_cpus=others,
            note=f"scheduler on CPU {mine}; control plane, harness and watcher on {others}",
        )
    if mode == "quota":
        found = make_cgroup(quota_cores)
        if found is None:
            return Placement("none", note="quota asked, but no writable CPU cgroup (root?)")
        path, version = found
        return Placement(
            "quota",
            quota_cores=quota_cores,
            cgroup=path,
            cgroup_version=version,
            note=f"scheduler capped at {quota_cores} cores (cgroup v{version} {path})",
        )
    return Placement("none", note="opted out (--cpu-share none): no pinning, no quota")


def make_cgroup(cores: float, *, root: Path = CGROUP_ROOT) -> tuple[Path, int] | None:
    """A CPU cgroup limited to ``cores``: v2 ``cpu.max`` where the unified hierarchy has
    the cpu controller, else v1 ``cpu.cfs_quota_us``; None when neither can be written."""
    quota = int(cores * PERIOD_US)
    name = f"{CGROUP_NAME}-{os.getpid()}"
    for base, version in ((root, 2), (root / "unified", 2), (root / "cpu", 1)):
        if version == 2 and "cpu" not in _read(base / "cgroup.controllers").split():
            continue
        if version == 1 and not (base / "cpu.cfs_quota_us").exists():
            continue
        path = base / name
        try:
            if version == 2 and "cpu" not in _read(base / "cgroup.subtree_control").split():
                (base / "cgroup.subtree_control").write_text("+cpu")
            path.mkdir(exist_ok=True)
            if version == 2:
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        return path, version
    return None


def remove(placement: Placement) -> None:
    """Remove the quota cgroup (empty once its processes have exited)."""
    if placement.cgroup is not None:
        with contextlib.suppress(OSError):
            placement.cgroup.rmdir()


def pin_harness(placement: Placement) -> None:
    """Move the calling thread (the harness, before it starts threads or children) to the
    control plane's CPUs: what it starts afterwards inherits them."""
    if placement.mode == "pin":
        os.sched_setaffinity(0, placement.other_cpus)


def pin_processes(placement: Placement, pids: list[int]) -> int:
    """Move every thread of ``pids`` (a cluster started before, e.g. kept between runs) to
    the control plane's CPUs; return how many threads moved."""
    if placement.mode != "pin":
        return 0
    moved = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(int(task.name), placement.other_cpus)
                moved += 1
    return moved


def cluster_pids(state: Path) -> list[int]:
    """The pids hack/cluster.py recorded for the benchmark cluster (``pids/*.pid``)."""
    pids = []
    for path in sorted((state / "pids").glob("*.pid")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(path.read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                pids.append(pid)
    return pids


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
