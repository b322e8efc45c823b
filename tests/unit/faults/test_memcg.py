"""Memory cgroups for replicas: created with the limit on v2 or v1 layouts, a wrapped
process is inside from its first instruction, and over the limit the kernel kills it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.faults import memcg

MiB = 1024 * 1024


def _v2_tree(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def _v1_tree(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return root


def test_a_v2_tree_gets_memory_max_and_the_controller_delegated(tmp_path: Path) -> None:
    root = _v2_tree(tmp_path)
    cg = memcg.MemoryCgroup.create("r0", 512 * MiB, root=root)
    assert cg is not None and cg.v2
    assert cg.path == root / "metricsched-faults-r0"
    assert (cg.path / "memory.max").read_text() == str(512 * MiB)
    assert "+memory" in (root / "cgroup.subtree_control").read_text()
    (cg.path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    assert cg.oom_kills() == 2
    (cg.path / "memory.peak").write_text(f"{300 * MiB}\n")
    assert cg.peak_bytes() == 300 * MiB


def test_a_v1_tree_gets_limit_in_bytes_under_the_memory_hierarchy(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path)
    cg = memcg.MemoryCgroup.create("r1", 512 * MiB, root=root)
    assert cg is not None and not cg.v2
    assert cg.path == root / "memory" / "metricsched-faults-r1"
    assert cg.limit() == 512 * MiB
    (cg.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert cg.oom_kills() == 1


def test_without_a_memory_controller_there_is_no_cgroup(tmp_path: Path) -> None:
    assert memcg.MemoryCgroup.create("r0", 512 * MiB, root=tmp_path) is None


def test_a_wrapped_process_writes_its_own_pid_before_running_the_command(
    tmp_path: Path,
) -> None:
    cg = memcg.MemoryCgroup.create("r0", 512 * MiB, root=_v2_tree(tmp_path / "cg"))
    assert cg is not None
    out = subprocess.run(
        cg.wrap([sys.executable, "-c", "import os; print(os.getpid())"]),
        capture_output=True,
        check=True,
        text=True,
    )
    assert (cg.path / "cgroup.procs").read_text().strip() == out.stdout.strip()


def test_peak_rss_of_a_process_is_read_from_proc() -> None:
    hwm = memcg.vm_hwm_bytes(os.getpid())
    assert hwm is not None and 1 * MiB < hwm < 16 * 1024 * MiB
    assert memcg.vm_hwm_bytes(2**22 + 12345) is None  # no such pid


def test_the_kernel_kills_a_process_over_the_limit() -> None:
    cg = memcg.MemoryCgroup.create(f"unit-{uuid.uuid4().hex[:6]}", 64 * MiB)
    if cg is None:
        pytest.skip("no usable memory cgroup on this machine (not root, or none mounted)")
    try:
        grow = "b = bytearray(256 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"
        code = subprocess.run(cg.wrap([sys.executable, "-c", grow]), check=False).returncode
        fits = subprocess.run(cg.wrap([sys.executable, "-c", "pass"]), check=False).returncode
        kills = cg.oom_kills()
    finally:
        cg.remove()
    assert code == -9
    assert kills == 1
    assert fits == 0
    assert not cg.path.exists()
