"""Fixtures for the Helm chart against the local control plane: releases in namespaces that
enforce the PodSecurity ``restricted`` profile, and the operator run as the chart's
ServiceAccount (a TokenRequest token, no admin rights).

Release and scheduler names are random, so these tests neither collide with each other nor
compete with an operator that serves ``metricsched`` on the same cluster. The CRD is shared:
``helm install`` creates it if missing and no test ever deletes it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster
from tests.e2e.scheduling.conftest import OperatorProcess

CHART = ROOT / "manifests" / "chart" / "metricsched"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
CRD_NAME = "schedulingpolicies.metricsched.io"


def helm(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(cluster.bin / "helm"), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


def restricted_namespace(cluster: Cluster, prefix: str) -> str:
    return cluster.create_namespace(f"{prefix}-{uuid.uuid4().hex[:6]}", labels=RESTRICTED)


def delete_namespace(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(kubernetes.client.exceptions.ApiException):
        cluster.core.delete_namespace(name)


def release_pods(cluster: Cluster, namespace: str, release: str) -> list[dict[str, Any]]:
    return cluster.pods(namespace, f"app.kubernetes.io/instance={release}")


class Release:
    """A chart release: its name, namespace, and the names of what it created."""

    def __init__(self, cluster: Cluster, namespace: str, name: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = name
        # Release names without "metricsched" get the chart name appended (_helpers.tpl).
        self.fullname = name if "metricsched" in name else f"{name}-metricsched"
        self.service_account = self.fullname

    def install(self, *sets: str) -> str:
        args = ["install", self.name, str(CHART), "--namespace", self.namespace]
        for s in sets:
            args += ["--set", s]
        return helm(self.cluster, *args).stdout

    def uninstall(self) -> None:
        helm(self.cluster, "uninstall", self.name, "--namespace", self.namespace, check=False)

    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def can_i(self, verb: str, resource: str, *, namespace: str | None = None) -> bool:
        """`kubectl auth can-i` as the release's ServiceAccount (admin impersonating it).

        resource: `pods`, `pods:binding` (a subresource) or `leases.coordination.k8s.io/NAME`.
        """
        resource, _, subresource = resource.partition(":")
        args = ["auth", "can-i", verb, resource, f"--as={self.subject()}"]
        args += [f"--subresource={subresource}"] if subresource else []
        args += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
        answer = self.cluster.kubectl(*args, check=False).strip().splitlines()
        assert answer and answer[0] in ("yes", "no"), f"kubectl auth can-i said {answer}"
        return answer[0] == "yes"

    def token_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig holding a TokenRequest token of the ServiceAccount, nothing else."""
        token = self.cluster.kubectl(
            "create",
            "token",
            self.service_account,
            f"--namespace={self.namespace}",
            "--duration=1h",
        ).strip()
        admin = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())
        server = admin["clusters"][0]["cluster"]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": server["server"],
                        "certificate-authority-data": server["certificate-authority-data"],
                    },
                }
            ],
            "users": [{"name": self.service_account, "user": {"token": token}}],
            "contexts": [
                {
                    "name": "sa",
                    "context": {
                        "cluster": "local",
                        "user": self.service_account,
                        "namespace": self.namespace,
                    },
                }
            ],
            "current-context": "sa",
        }
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path


class ServiceAccountOperator(OperatorProcess):
    """`metricsched run` as the chart's ServiceAccount would run it in the cluster: its
    token, a scheduler name of its own, and the leader election the chart sets for more
    than one replica (the Role's Lease)."""

    def __init__(
        self,
        cluster: Cluster,
        release: Release,
        kubeconfig: Path,
        log: Path,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.release = release
        self.scheduler_name = f"metricsched-rbac-{uuid.uuid4().hex[:6]}"
        super().__init__(
            cluster,
            kubeconfig=kubeconfig,
            log=log,
            extra_args=[
                f"--scheduler-name={self.scheduler_name}",
                "--leader-elect",
                f"--leader-election-namespace={release.namespace}",
                f"--leader-election-id={release.fullname}",
                *extra_args,
            ],
        )


@pytest.fixture
def metric(cluster: Cluster) -> Iterator[str]:
    """A metric name of this test's own on the exporter (removed afterwards)."""
    name = f"e2e_chart_{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(Exception):
        cluster.delete_metric(name)


@pytest.fixture(scope="module")
def ha_release(cluster: Cluster) -> Iterator[Release]:
    """The chart installed with two replicas (leader election: the Lease Role too)."""
    namespace = restricted_namespace(cluster, "chart-rbac")
    release = Release(cluster, namespace, f"msc-{uuid.uuid4().hex[:6]}")
    try:
        release.install("replicaCount=2", f"prometheus.url={cluster.prometheus_url}")
        yield release
    finally:
        release.uninstall()
        delete_namespace(cluster, namespace)


@pytest.fixture
def sa_operator(
    cluster: Cluster, ha_release: Release, tmp_path: Path
) -> Iterator[ServiceAccountOperator]:
    kubeconfig = ha_release.token_kubeconfig(tmp_path / "sa.kubeconfig")
    op = ServiceAccountOperator(cluster, ha_release, kubeconfig, tmp_path / "operator.log")
    op.start()
    yield op
    op.stop()
