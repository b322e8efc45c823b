"""Fixtures for scheduling e2e tests: the CRD installed, the operator running as a process.

Each test uses its own namespace and its own metric names on the exporter, so tests do not
see each other's policies or values.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import ROOT, STATE, Cluster, wait_for
from tests.e2e.scheduling.pools import Pool

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
REFRESH_S = 2.0
NODES = [f"node-{i}" for i in range(1, 7)]
SCHEDULABLE = ["node-1", "node-2", "node-3", "node-4"]  # node-5 tainted, node-6 cordoned
# spec.kubeScores of a policy scored by its metrics alone (no kube-scheduler terms blended):
# for tests whose expected scores and winners are worked out from the metrics only.
METRICS_ONLY = dict.fromkeys(
    [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    0,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    """`metricsched run` against the local cluster, as users run it (the one operator
    process of the e2e tests: the chart's tests run it with the chart's ServiceAccount,
    the webhook's with its server on)."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        extra_args: Sequence[str] = (),
        kubeconfig: Path | str | None = None,
        log: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.extra_args = list(extra_args)
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_port = _free_port()
        self.health_port = _free_port()
        self.log = log or STATE / "logs" / "operator-e2e.log"

    def start(self) -> None:
        exe = Path(sys.executable).parent / "metricsched"
        logf = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                str(exe),
                "run",
                f"--kubeconfig={self.kubeconfig}",
                f"--prometheus-url={self.cluster.prometheus_url}",
                f"--refresh-interval={REFRESH_S:g}s",
                "--query-timeout=2s",
                f"--metrics-port={self.metrics_port}",
                f"--health-port={self.health_port}",
                "--bind-address=127.0.0.1",
                "--log-format=json",
                "--log-level=info",
                *self.extra_args,
            ],
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        wait_for("operator /readyz", self.ready, timeout=60)

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log_text()[-2000:]
            raise AssertionError(f"operator exited ({self.proc.returncode}); {self.log}: {tail}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
            return bool(r.status == 200)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics_text(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2
        ) as r:
            return str(r.read().decode())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class KubeScheduler:
    """The pinned kube-scheduler binary, serving one schedulerName: a test's own, or
    ``default-scheduler`` (the local control plane runs no kube-scheduler of its own)."""

    def __init__(self, cluster: Cluster, workdir: Path, *, name: str | None = None) -> None:
        self.name = name or f"e2e-kube-{uuid.uuid4().hex[:6]}"
        config = workdir / "kube-scheduler.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": cluster.kubeconfig},
                    "leaderElection": {"leaderElect": False},
                    "profiles": [{"schedulerName": self.name}],
                }
            )
        )
        self.log = STATE / "logs" / f"{self.name}.log"
        self.proc = subprocess.Popen(
            [
                str(cluster.bin / "kube-scheduler"),
                f"--config={config}",
                f"--secure-port={_free_port()}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={workdir / 'certs'}",
                f"--authentication-kubeconfig={cluster.kubeconfig}",
                f"--authorization-kubeconfig={cluster.kubeconfig}",
                "--v=1",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def kube_scheduler(cluster: Cluster, tmp_path: Path) -> Iterator[KubeScheduler]:
    scheduler = KubeScheduler(cluster, tmp_path)
    yield scheduler
    scheduler.stop()


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    wait_for(
        "CRD established",
        lambda: (
            "True"
            in cluster.kubectl(
                "get",
                "crd",
                f"{PLURAL}.{GROUP}",
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Established')].status}",
            )
        ),
    )


# The Measured estimate's per-pod query over the test bed's rate window: its recording
# rules rate over [30s], not [5m] (hack/prometheus-rules.yml says why), and the two windows
# are kept equal as the docs tell users to; its pods ramp in seconds, so a sibling counts
# in its workload's estimate once bound 20 s.
POD_USAGE_WINDOW = "30s"
POD_USAGE_FLAGS = (
    "--pod-usage-cpu-query=sum by (namespace, pod) (max by (namespace, pod, container) "
    '(rate(container_cpu_usage_seconds_total{container!="", image!=""}'
    f"[{POD_USAGE_WINDOW}])))",
    "--pod-usage-memory-query=",
    "--pod-usage-settle-time=20s",
)
# Set to run the e2e tests against an operator from before issue 27 (PYTHONPATH pointing
# at its checkout), which has none of these flags (tests/e2e/scheduling/test_default_estimate.py).
BEFORE_ISSUE_27 = os.environ.get("METRICSCHED_E2E_BEFORE_ISSUE_27") == "1"


@pytest.fixture(scope="session")
def operator(cluster: Cluster, crd: None) -> Iterator[OperatorProcess]:
    # The one operator of the scheduler name "metricsched" in the session: a second one
    # started beside it would decide the same pods.
    op = OperatorProcess(cluster, extra_args=() if BEFORE_ISSUE_27 else POD_USAGE_FLAGS)
    op.start()
    yield op
    op.stop()


@pytest.fixture
def metric(cluster: Cluster) -> Iterator[str]:
    """A metric name of this test's own on the exporter (removed afterwards)."""
    name = f"e2e_{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(Exception):
        cluster.delete_metric(name)


def set_and_wait(cluster: Cluster, metric: str, values: dict[str, float]) -> None:
    """Set values on the exporter and wait until Prometheus returns them."""
    cluster.set_metric(metric, values)
    cluster.wait_for_promql(
        metric, lambda got: all(got.get(n) == v for n, v in values.items()), timeout=30
    )


def apply_policy(cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> None:
    cluster.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SchedulingPolicy",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


def get_policy(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        cluster.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    )


def condition(policy: dict[str, Any], ctype: str) -> dict[str, Any]:
    for c in (policy.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return {}


def prom_metric(metric: str, *, label: str = "node") -> dict[str, Any]:
    return {
        "name": "m",
        "prometheus": {"query": f"max by ({label}) ({metric})", "nodeLabel": label},
        "weight": 1,
        "goal": "Minimize",
    }


def wait_policy_refreshed(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """Wait until the operator has refreshed the policy's metrics (Ready is not Unknown)."""
    return wait_for(
        f"policy {name} refreshed",
        lambda: (
            (p := get_policy(cluster, namespace, name))
            and condition(p, "Ready").get("status") in ("True", "False")
            and p
        ),
        timeout=30,
    )


def wait_bound(cluster: Cluster, namespace: str, pod: str, timeout: float = 30) -> str:
    return str(
        wait_for(
            f"pod {pod} bound",
            lambda: cluster.pod(namespace, pod)["spec"].get("nodeName"),
            timeout=timeout,
        )
    )


def event_messages(cluster: Cluster, namespace: str, pod: str, reason: str) -> list[str]:
    return [e["message"] for e in cluster.events_for(namespace, pod) if e["reason"] == reason]


def wait_event(
    cluster: Cluster, namespace: str, pod: str, reason: str, timeout: float = 30
) -> list[str]:
    return list(
        wait_for(
            f"{reason} event on {pod}",
            lambda: event_messages(cluster, namespace, pod, reason),
            timeout=timeout,
        )
    )


def api_error(fn: Any) -> kubernetes.client.exceptions.ApiException:
    try:
        fn()
    except kubernetes.client.exceptions.ApiException as e:
        return e
    raise AssertionError("the API server accepted it")


@pytest.fixture
def one_node(cluster: Cluster, namespace: str) -> Iterator[Pool]:
    """A pool of one 16-cpu node for the test alone."""
    pool = Pool(cluster, size=1)
    pool.create()
    yield pool
    # The test's pods first: none may stay bound to a node that no longer exists.
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    pool.delete()
