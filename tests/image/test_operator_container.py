"""The operator container schedules a pod on the local control plane, as the chart runs it.

The chart is installed (its ServiceAccount, RBAC and Deployment); podman then runs the
image the way that Deployment's pod would run: the container's arguments and environment
rendered by the chart, the ServiceAccount's token from a TokenRequest mounted where the
kubelet mounts it (in-cluster configuration), the chart's security context, on the host
network because the API server listens on loopback. The chart's own pods are never
started: nothing here runs a kubelet.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.chart.conftest import Release, delete_namespace, helm, restricted_namespace
from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import wait_bound, wait_event
from tests.image.conftest import AS_THE_CHART_RUNS_IT, TEST_LABEL, labelled_containers, podman

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Nothing listens on it, and a server may bind it (as servers do, with SO_REUSEADDR)."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class OperatorContainer:
    """The chart's operator container, started by podman from the rendered Deployment."""

    def __init__(self, cluster: Cluster, release: Release, workdir: Path) -> None:
        self.cluster = cluster
        self.release = release
        self.workdir = workdir
        self.name = f"metricsched-test-{uuid.uuid4().hex[:6]}"
        self.scheduler_name = f"metricsched-image-{uuid.uuid4().hex[:6]}"
        self.metrics_port = free_port()
        self.health_port = free_port()

    def install(self) -> None:
        self.release.install(
            f"schedulerNames={{{self.scheduler_name}}}",
            f"prometheus.url={self.cluster.prometheus_url}",
            f"metrics.port={self.metrics_port}",
            f"health.port={self.health_port}",
            "refreshInterval=2s",
        )

    def deployment(self) -> dict[str, Any]:
        manifest = helm(
            self.cluster, "get", "manifest", self.release.name, "-n", self.release.namespace
        ).stdout
        (deployment,) = [d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "Deployment"]
        return dict(deployment)

    def service_account_dir(self) -> Path:
        """token, ca.crt and namespace, as the kubelet projects them into the pod."""
        directory = self.workdir / "serviceaccount"
        directory.mkdir()
        token = self.cluster.kubectl(
            "create",
            "token",
            self.release.service_account,
            f"--namespace={self.release.namespace}",
            "--duration=1h",
        ).strip()
        admin = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())
        ca = base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"])
        (directory / "token").write_text(token)
        (directory / "ca.crt").write_bytes(ca)
        (directory / "namespace").write_text(self.release.namespace)
        directory.chmod(0o755)
        for f in directory.iterdir():
            f.chmod(0o644)  # the container's uid 65532 reads them (the kubelet uses fsGroup)
        return directory

    def podman_args(self, pod: dict[str, Any]) -> list[str]:
        (container,) = pod["spec"]["containers"]
        server = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())["clusters"][0]
        host, _, port = server["cluster"]["server"].removeprefix("https://").rpartition(":")
        env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
        # What the kubelet fills in from the downward API; this container has no pod object.
        downward = {
            "metadata.name": self.name,
            "metadata.namespace": self.release.namespace,
            "metadata.uid": str(uuid.uuid4()),
        }
        for var in container["env"]:
            if "value" in var:
                env[var["name"]] = var["value"]
            else:
                field = var["valueFrom"]["fieldRef"]["fieldPath"]
                assert field in downward, f"the chart sets {var['name']} from {field}"
                env[var["name"]] = downward[field]
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
        assert security["allowPrivilegeEscalation"] is False
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}
        assert security["runAsUser"] == 65532
        return [
            "run",
            "--detach",
            f"--name={self.name}",
            f"--label={TEST_LABEL}=operator",
            "--network=host",
            *AS_THE_CHART_RUNS_IT,
            f"--volume={self.service_account_dir()}:{SA_DIR}:ro",
            *(f"--env={k}={v}" for k, v in env.items()),
            container["image"].removeprefix("docker.io/"),
            *container["args"],
        ]

    def start(self) -> None:
        podman(*self.podman_args(self.deployment()["spec"]["template"]))

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def http(self, path: str) -> int:
        url = f"http://127.0.0.1:{self.health_port}{path}"
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)

    def running(self) -> bool:
        out = podman("inspect", "--format={{.State.Running}}", self.name, check=False)
        if out.stdout.strip() != "true":
            raise AssertionError(f"the operator container stopped:\n{self.logs()}")
        return True

    def remove(self) -> None:
        podman("rm", "--force", "--time=10", self.name, check=False)


@pytest.fixture
def operator_container(cluster: Cluster, image: str, tmp_path: Path) -> Iterator[OperatorContainer]:
    namespace = restricted_namespace(cluster, "image")
    release = Release(cluster, namespace, f"img-{uuid.uuid4().hex[:6]}")
    op = OperatorContainer(cluster, release, tmp_path)
    try:
        op.install()
        yield op
    finally:
        op.remove()
        release.uninstall()
        delete_namespace(cluster, namespace)


def scrape(port: int, token: str | None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # self-signed: metrics.certSecret is not set
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_operator_container_schedules_a_pod_and_leaves_nothing_behind(
    cluster: Cluster, operator_container: OperatorContainer, namespace: str
) -> None:
    op = operator_container
    op.start()
    wait_for("/healthz of the container", lambda: op.running() and op.http("/healthz") == 200)
    wait_for(
        "/readyz of the container", lambda: op.running() and op.http("/readyz") == 200, timeout=60
    )

    cluster.create_pod(namespace, "web", scheduler=op.scheduler_name)
    node = wait_bound(cluster, namespace, "web")
    (message,) = wait_event(cluster, namespace, "web", "Scheduled")
    assert message.startswith(f"Successfully assigned {namespace}/web to {node}")
    (event,) = [e for e in cluster.events_for(namespace, "web") if e["reason"] == "Scheduled"]
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component")
    assert source == op.scheduler_name
    print(f"{event['type']} {event['reason']} from {source}: {message}")  # shown with -rP

    # /metrics is HTTPS, for the chart's metrics readers only (the chart's default).
    assert scrape(op.metrics_port, None) == 401
    reader = f"{op.release.fullname}-metrics-reader"
    cluster.kubectl("create", "serviceaccount", "scraper", f"--namespace={namespace}")
    binding = f"{namespace}-scraper"
    cluster.kubectl(
        "create", "clusterrolebinding", binding, f"--clusterrole={reader}",
        f"--serviceaccount={namespace}:scraper",
    )  # fmt: skip
    try:
        token = cluster.kubectl("create", "token", "scraper", f"--namespace={namespace}").strip()
        assert scrape(op.metrics_port, token) == 200
    finally:
        cluster.kubectl("delete", "clusterrolebinding", binding)

    logs = op.logs()
    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any(r.get("pod") == f"{namespace}/web" and r.get("node") == node for r in records)
    # The chart's RBAC covered every call (another test's namespace being deleted can
    # refuse an event with a 403 too: that one names no user).
    assert re.findall(r'forbidden: User \\?"[^"\\]+\\?" cannot [^"]*', logs) == []

    op.remove()
    assert [c for c in labelled_containers() if op.name in c.get("Names", [])] == []
    wait_for("the container's ports freed", lambda: all(
        port_free(p) for p in (op.metrics_port, op.health_port)
    ))  # fmt: skip
