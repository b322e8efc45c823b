"""Namespace opt-in on the real control plane: kube-apiserver calls the operator's kopf
webhook over loopback (HTTPS, a CA this test makes with openssl), through the
MutatingWebhookConfiguration the chart renders (its selectors and failurePolicy as
shipped; only the clientConfig points at 127.0.0.1 instead of the Service).

The local control plane runs no kube-scheduler, so these tests start the pinned one
serving ``default-scheduler``: pods the webhook leaves alone are really placed by it.
The operator serves a scheduler name of this module's own, so that it never competes
with another test's operator.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster, wait_for
from tests.e2e.scheduling.conftest import KubeScheduler, OperatorProcess, _free_port

NAME = f"e2e-optin-{uuid.uuid4().hex[:6]}"
LABEL = "metricsched.io/scheduler"
OPT_OUT = "metricsched.io/opt-out"
RELEASE_NAMESPACE = "metricsched-e2e"
REPLICAS = 3


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving certificate for 127.0.0.1, as the API server checks it."""
    d = tmp_path_factory.mktemp("webhook-tls")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(d / "ca.key"))
    openssl(
        "req", "-x509", "-new", "-key", str(d / "ca.key"), "-days", "1",
        "-subj", "/CN=e2e-webhook-ca", "-out", str(d / "ca.crt"),
    )  # fmt: skip
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(d / "tls.key"))
    openssl(
        "req", "-new", "-key", str(d / "tls.key"), "-subj", "/CN=127.0.0.1",
        "-out", str(d / "tls.csr"),
    )  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl(
        "x509", "-req", "-in", str(d / "tls.csr"), "-CA", str(d / "ca.crt"),
        "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
        "-extfile", str(d / "san.ext"), "-out", str(d / "tls.crt"),
    )  # fmt: skip
    return d


def chart_webhook(cluster: Cluster) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration for this module's scheduler name."""
    out = subprocess.run(
        [
            str(cluster.bin / "helm"), "template", "metricsched",
            str(ROOT / "manifests" / "chart" / "metricsched"),
            "--namespace", RELEASE_NAMESPACE,
            "--set", "webhook.enabled=true", "--set", f"schedulerNames={{{NAME}}}",
            "--show-only", "templates/webhook.yaml",
        ],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    (mwc,) = [
        d for d in yaml.safe_load_all(out) if d and d["kind"] == "MutatingWebhookConfiguration"
    ]
    return dict(mwc)


class OptInOperator(OperatorProcess):
    def __init__(
        self,
        cluster: Cluster,
        tls: Path,
        *,
        webhook_port: int | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.webhook_port = webhook_port or _free_port()
        super().__init__(
            cluster,
            extra_args=[
                f"--scheduler-name={NAME}",
                "--webhook",
                "--webhook-bind-address=127.0.0.1",
                f"--webhook-port={self.webhook_port}",
                f"--webhook-cert-file={tls / 'tls.crt'}",
                f"--webhook-key-file={tls / 'tls.key'}",
                *extra_args,
            ],
        )

    def start(self) -> None:
        super().start()
        # /readyz says the caches are synced; kopf's server starts right after.
        wait_for("the webhook port", self.listening, timeout=30)

    def listening(self) -> bool:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.webhook_port), timeout=1),
        ):
            return True
        return False

    def admissions(self, result: str) -> float:
        prefix = f'metricsched_webhook_admissions_total{{result="{result}"}} '
        for line in self.metrics_text().splitlines():
            if line.startswith(prefix):
                return float(line[len(prefix) :])
        return 0.0


@pytest.fixture(scope="module")
def opt_in_operator(cluster: Cluster, crd: None, tls: Path) -> Iterator[OptInOperator]:
    op = OptInOperator(cluster, tls)
    op.start()
    mwc = chart_webhook(cluster)
    mwc["metadata"]["name"] = NAME
    (hook,) = mwc["webhooks"]
    # The chart's clientConfig names its Service; here the API server dials the process.
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{op.webhook_port}/scheduler-name",
        "caBundle": base64.b64encode((tls / "ca.crt").read_bytes()).decode(),
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(mwc))
    yield op
    op.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", NAME, "--ignore-not-found")


@pytest.fixture(scope="module")
def default_scheduler(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeScheduler]:
    scheduler = KubeScheduler(
        cluster, tmp_path_factory.mktemp("kube-scheduler"), name="default-scheduler"
    )
    yield scheduler
    scheduler.stop()


@pytest.fixture
def namespaces(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """An opted-in namespace and one that is not."""
    suffix = uuid.uuid4().hex[:5]
    opted = cluster.create_namespace(f"optin-{suffix}", labels={LABEL: NAME})
    other = cluster.create_namespace(f"other-{suffix}")
    yield opted, other
    for ns in (opted, other):
        with contextlib.suppress(kubernetes.client.exceptions.ApiException):
            # Deployments first, or their ReplicaSets re-create the pods being deleted.
            cluster.apps.delete_collection_namespaced_deployment(ns)
            cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            cluster.core.delete_namespace(ns)


def deployment(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Deployment that names no scheduler (the API server defaults default-scheduler)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **(labels or {})}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.invalid/app:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }


def bound_pods(cluster: Cluster, namespace: str, app: str) -> list[dict[str, Any]]:
    def check() -> list[dict[str, Any]] | None:
        pods = cluster.pods(namespace, f"app={app}")
        if len(pods) == REPLICAS and all(p["spec"].get("nodeName") for p in pods):
            return pods
        return None

    return wait_for(f"{REPLICAS} pods of {namespace}/{app} bound", check, timeout=60)


def scheduled_by(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> str:
    """Who posted the pod's Scheduled event (core/v1 source or events/v1 reporter)."""
    name = pod["metadata"]["name"]

    def check() -> str | None:
        for e in cluster.events_for(namespace, name):
            if e["reason"] == "Scheduled":
                return str(
                    (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
                )
        return None

    return wait_for(f"Scheduled event of {name}", check, timeout=30)


def test_a_deployment_in_an_opted_in_namespace_is_placed_by_metricsched_another_by_default(
    cluster: Cluster,
    opt_in_operator: OptInOperator,
    default_scheduler: KubeScheduler,
    namespaces: tuple[str, str],
) -> None:
    opted, other = namespaces
    cluster.apps.create_namespaced_deployment(opted, deployment("web"))
    cluster.apps.create_namespaced_deployment(other, deployment("web"))

    for pod in bound_pods(cluster, opted, "web"):
        assert pod["spec"]["schedulerName"] == NAME
        assert scheduled_by(cluster, opted, pod) == NAME
    # The Deployment itself was not edited: only its pods were.
    template = cluster.apps.read_namespaced_deployment("web", opted).spec.template.spec
    assert template.scheduler_name == "default-scheduler"

    for pod in bound_pods(cluster, other, "web"):
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert scheduled_by(cluster, other, pod) == "default-scheduler"
    assert opt_in_operator.admissions("Assigned") >= REPLICAS


def test_with_the_operator_stopped_pods_are_still_created_and_go_to_default_scheduler(
    cluster: Cluster,
    opt_in_operator: OptInOperator,
    default_scheduler: KubeScheduler,
    namespaces: tuple[str, str],
) -> None:
    opted, _ = namespaces
    opt_in_operator.stop()
    try:
        started = time.monotonic()
        cluster.apps.create_namespaced_deployment(opted, deployment("batch"))
        pods = bound_pods(cluster, opted, "batch")
        # failurePolicy Ignore: a refused connection costs no timeout, let alone a failure.
        assert time.monotonic() - started < 30
        for pod in pods:
            assert pod["spec"]["schedulerName"] == "default-scheduler"
            assert scheduled_by(cluster, opted, pod) == "default-scheduler"
    finally:
        opt_in_operator.start()


def test_a_pod_naming_its_own_scheduler_or_opting_out_is_never_changed(
    cluster: Cluster,
    opt_in_operator: OptInOperator,
    namespaces: tuple[str, str],
) -> None:
    opted, _ = namespaces
    before = opt_in_operator.admissions("NamesAScheduler")
    own = cluster.create_pod(opted, "own", scheduler="my-scheduler")
    assert own["spec"]["schedulerName"] == "my-scheduler"
    # Sent to the webhook (its objectSelector does not look at schedulerName), left alone.
    assert opt_in_operator.admissions("NamesAScheduler") == before + 1

    opted_out = cluster.create_pod(
        opted, "opted-out", scheduler="default-scheduler", labels={OPT_OUT: "true"}
    )
    assert opted_out["spec"]["schedulerName"] == "default-scheduler"
    ours = cluster.create_pod(opted, "plain", scheduler="default-scheduler")
    assert ours["spec"]["schedulerName"] == NAME


def test_kube_system_is_never_sent_even_when_labelled(
    cluster: Cluster, opt_in_operator: OptInOperator
) -> None:
    name = f"optin-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("label", "namespace", "kube-system", f"{LABEL}={NAME}", "--overwrite")
    try:
        pod = cluster.create_pod("kube-system", name, scheduler="default-scheduler")
        assert pod["spec"]["schedulerName"] == "default-scheduler"
    finally:
        cluster.kubectl("label", "namespace", "kube-system", f"{LABEL}-")
        with contextlib.suppress(kubernetes.client.exceptions.ApiException):
            cluster.core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)


def test_a_standby_replica_serves_the_webhook_too(
    cluster: Cluster,
    opt_in_operator: OptInOperator,
    tls: Path,
    namespaces: tuple[str, str],
) -> None:
    """Admission cannot wait for an election: a replica that does not hold the Lease
    (another holder renewed it, for an hour) answers the API server all the same."""
    opted, _ = namespaces
    lease = f"{NAME}-held"
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": lease, "namespace": "default"},
                "spec": {
                    "holderIdentity": "another-replica",
                    "leaseDurationSeconds": 3600,
                    "acquireTime": now,
                    "renewTime": now,
                },
            }
        ),
    )
    opt_in_operator.stop()
    standby = OptInOperator(
        cluster,
        tls,
        webhook_port=opt_in_operator.webhook_port,
        extra_args=(
            "--leader-elect",
            "--leader-election-namespace=default",
            f"--leader-election-id={lease}",
        ),
    )
    try:
        standby.start()
        assert "metricsched_leader 0.0" in standby.metrics_text()
        pod = cluster.create_pod(opted, "while-standing-by", scheduler="default-scheduler")
        assert pod["spec"]["schedulerName"] == NAME
        assert standby.admissions("Assigned") == 1
    finally:
        standby.stop()
        cluster.kubectl("delete", "lease", lease, "--namespace=default", "--ignore-not-found")
        opt_in_operator.start()
