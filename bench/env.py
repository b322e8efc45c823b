"""The benchmark's own control plane: ports, state directory, credentials and machine facts.

The benchmark never touches the default development cluster (``.cluster``, ports 42xxx):
it drives ``hack/cluster.py`` with its own ``METRICSCHED_PORT_BASE`` and
``METRICSCHED_CLUSTER_DIR`` so that end-to-end tests can run beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PORT_BASE = int(os.environ.get("BENCH_PORT_BASE", "24000"))
STATE = Path(os.environ.get("BENCH_CLUSTER_DIR", str(ROOT / ".cluster-bench")))

# Ports of the processes the benchmark itself starts (the cluster's are hack/cluster.py's).
OPERATOR_METRICS_PORT = PORT_BASE + 801
OPERATOR_HEALTH_PORT = PORT_BASE + 802
KUBE_SCHEDULER_PORT = PORT_BASE + 259


@dataclasses.dataclass(frozen=True)
class ClusterEnv:
    """How to reach the benchmark cluster."""

    server: str
    token: str
    ca_file: Path
    kubeconfig: Path
    prometheus_url: str
    tools_bin: Path


def cluster_env() -> dict[str, str]:
    """The environment that points hack/cluster.py at the benchmark's cluster."""
    return {
        **os.environ,
        "METRICSCHED_PORT_BASE": str(PORT_BASE),
        "METRICSCHED_CLUSTER_DIR": str(STATE),
    }


def cluster_cmd(*args: str) -> None:
    """Run ``hack/cluster.py ARGS`` against the benchmark cluster; raise on failure."""
    cmd = [sys.executable, str(ROOT / "hack" / "cluster.py"), *args]
    subprocess.run(cmd, check=True, env=cluster_env())


def install_crd(cluster: ClusterEnv) -> None:
    """Apply this tree's SchedulingPolicy CRD and wait until it is Established."""
    kubectl = [str(cluster.tools_bin / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    subprocess.run([*kubectl, "apply", "-f", str(ROOT / "crds")], check=True)
    wait = [
        *kubectl,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/schedulingpolicies.metricsched.io",
    ]
    # Right after the create, the CRD may have no status.conditions yet, and kubectl wait
    # then fails at once ("accessor error: <nil>") instead of waiting: ask again.
    for _ in range(9):
        if subprocess.run(wait, check=False).returncode == 0:
            return
        time.sleep(1.0)
    subprocess.run(wait, check=True)


def load() -> ClusterEnv:
    """Read the benchmark cluster's env file (written by ``hack/cluster.py up``)."""
    values: dict[str, str] = {}
    for line in (STATE / "env").read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            values[key] = value.strip('"')
    return ClusterEnv(
        server=f"https://127.0.0.1:{PORT_BASE + 443}",
        token=(STATE / "pki" / "token").read_text().strip(),
        ca_file=STATE / "pki" / "ca.crt",
        kubeconfig=Path(values["KUBECONFIG"]),
        prometheus_url=values["PROMETHEUS_URL"],
        tools_bin=Path(values["METRICSCHED_TOOLS_BIN"]),
    )


def code_fingerprint(operator_dir: Path | None = None) -> dict[str, str]:
    """git HEAD and a hash of the operator sources a trial ran (the tree moves under us)."""
    root = operator_dir or ROOT / "operator"
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {"git_head": head, "operator_sha1": digest.hexdigest()[:12], "operator_dir": str(root)}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else platform.processor()


def _mem_total_gib() -> float:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return 0.0
    found = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return round(int(found.group(1)) / 2**20, 1) if found else 0.0


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout or out.stderr).strip().splitlines()[0] if out.stdout or out.stderr else ""


def tools_bin() -> Path:
    """The pinned control-plane binaries (built and cached by hack/build-tools.sh)."""
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def machine() -> dict[str, Any]:
    """The facts a reader needs to weigh the numbers: CPUs, memory, load, versions."""
    import kopf  # noqa: PLC0415 (only for its version)
    import kubernetes  # noqa: PLC0415

    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "mem_total_gib": _mem_total_gib(),
        "python": platform.python_version(),
        "kopf": kopf.__version__ if hasattr(kopf, "__version__") else "unknown",
        "kubernetes_client": kubernetes.__version__,
        "load_average": load_average(),
        "prometheus": _version([shutil.which("prometheus") or "prometheus", "--version"]),
    }
    info["kube_scheduler"] = _version([str(tools_bin() / "kube-scheduler"), "--version"])
    return info
