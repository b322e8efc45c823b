"""Two replicas with leader election: one schedules, the other takes over when it dies."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import STATE, Cluster, wait_for
from tests.e2e.scheduling.conftest import OperatorProcess, _free_port, wait_bound


def _replica(
    cluster: Cluster, namespace: str, scheduler: str, log: Path
) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).parent / "metricsched"
    return subprocess.Popen(
        [
            str(exe),
            "run",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--prometheus-url={cluster.prometheus_url}",
            f"--scheduler-name={scheduler}",
            "--leader-elect",
            f"--leader-election-namespace={namespace}",
            f"--metrics-port={_free_port()}",
            f"--health-port={_free_port()}",
            "--bind-address=127.0.0.1",
            "--log-format=json",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def test_standby_takes_over_when_the_leader_dies(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    scheduler = f"metricsched-ha-{namespace[-5:]}"
    log = STATE / "logs" / "operator-ha.log"
    first = _replica(cluster, namespace, scheduler, log)
    second: subprocess.Popen[bytes] | None = None
    try:
        lease = wait_for(
            "a Lease with a holder",
            lambda: (
                cluster.coordination.read_namespaced_lease(
                    "metricsched", namespace
                ).spec.holder_identity
            ),
            timeout=40,
        )
        second = _replica(cluster, namespace, scheduler, log)
        cluster.create_pod(namespace, "one", scheduler=scheduler)
        wait_bound(cluster, namespace, "one", timeout=40)
        assert (
            cluster.coordination.read_namespaced_lease(
                "metricsched", namespace
            ).spec.holder_identity
            == lease
        )

        first.send_signal(signal.SIGKILL)
        first.wait()
        cluster.create_pod(namespace, "two", scheduler=scheduler)
        wait_bound(cluster, namespace, "two", timeout=60)
        holder = cluster.coordination.read_namespaced_lease(
            "metricsched", namespace
        ).spec.holder_identity
        assert holder and holder != lease
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
