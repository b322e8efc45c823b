"""Fixtures for end-to-end tests against the local control plane (hack/cluster.py).

The session brings the cluster up once, or reuses a running healthy one; a cluster this
session started is stopped at the end unless METRICSCHED_KEEP_CLUSTER=1. Every test in
tests/e2e is marked ``e2e``. Prometheus scrapes the load model every LOADMODEL_SCRAPE in
tests (METRICSCHED_LOADMODEL_SCRAPE overrides it; a reused cluster is reloaded to match).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "hack" / "cluster.py"
STATE = Path(os.environ.get("METRICSCHED_CLUSTER_DIR", ROOT / ".cluster"))

T = TypeVar("T")

# How often Prometheus scrapes hack/loadmodel.py in tests (hack/cluster.py's default: 15s).
LOADMODEL_SCRAPE = os.environ.get("METRICSCHED_LOADMODEL_SCRAPE") or "5s"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


def wait_for(
    what: str, fn: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.2
) -> T:
    """Poll fn until it returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def _env() -> dict[str, str]:
    env = {}
    for line in (STATE / "env").read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export ") :].split("=", 1)
            env[k] = v.strip('"')
    return env


class Cluster:
    """Handles to the running local control plane, plus helpers tests share."""

    def __init__(self) -> None:
        env = _env()
        self.kubeconfig = env["KUBECONFIG"]
        self.prometheus_url = env["PROMETHEUS_URL"]
        self.exporter_url = env["METRICSCHED_EXPORTER_URL"]
        self.loadmodel_url = env["METRICSCHED_LOADMODEL_URL"]
        self.loadmodel_record = Path(env["METRICSCHED_LOADMODEL_RECORD"])
        self.bin = Path(env["METRICSCHED_TOOLS_BIN"])
        self.api_client = kubernetes.config.new_client_from_config(config_file=self.kubeconfig)
        self.core = kubernetes.client.CoreV1Api(self.api_client)
        self.apps = kubernetes.client.AppsV1Api(self.api_client)
        self.custom = kubernetes.client.CustomObjectsApi(self.api_client)
        self.coordination = kubernetes.client.CoordinationV1Api(self.api_client)
        self._minor: int | None = None

    @property
    def minor(self) -> int:
        """The API server's minor version (37 for v1.37.2): kube-scheduler's texts and
        scores that changed between the pinned versions are asserted by it."""
        if self._minor is None:
            code = kubernetes.client.VersionApi(self.api_client).get_code()
            self._minor = int(str(code.minor).rstrip("+"))
        return self._minor

    # --- processes -----------------------------------------------------------------------

    def component(self, verb: str, name: str) -> None:
        subprocess.run([sys.executable, str(CLUSTER), verb, name], check=True)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        out = subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=input,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out.stdout + out.stderr if not check else out.stdout

    # --- metrics -------------------------------------------------------------------------

    def _exporter(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.exporter_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def set_metric(self, metric: str, values: dict[str, float]) -> None:
        self._exporter("POST", "/values", {"metric": metric, "values": values})

    def delete_metric(self, metric: str, node: str | None = None) -> None:
        q = {"metric": metric} | ({"node": node} if node else {})
        self._exporter("DELETE", "/values?" + urllib.parse.urlencode(q))

    def metric_values(self) -> dict[str, dict[str, float]]:
        result: dict[str, dict[str, float]] = self._exporter("GET", "/values")
        return result

    def promql(self, query: str) -> list[dict[str, Any]]:
        url = self.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_for_promql(
        self, query: str, predicate: Callable[[dict[str, float]], bool], *, timeout: float = 30
    ) -> dict[str, float]:
        """Wait until {node: value} of an instant query satisfies predicate."""

        def check() -> dict[str, float] | None:
            got = {s["metric"].get("node", ""): float(s["value"][1]) for s in self.promql(query)}
            return got if predicate(got) else None

        return wait_for(f"PromQL {query!r} to match", check, timeout=timeout)

    # --- objects -------------------------------------------------------------------------

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        self.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        # The KCM's serviceaccount controller creates "default"; pods need it (admission).
        wait_for(
            f"default ServiceAccount in {name}",
            lambda: self.core.read_namespaced_service_account("default", name),
            timeout=30,
        )
        return name

    def create_pod(
        self,
        namespace: str,
        name: str,
        *,
        scheduler: str = "metricsched",
        cpu: str = "100m",
        memory: str = "64Mi",
        labels: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = pod_body(name, scheduler=scheduler, cpu=cpu, memory=memory, labels=labels, spec=spec)
        created = self.api_client.sanitize_for_serialization(
            self.core.create_namespaced_pod(namespace, body)
        )
        return dict(created)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(
            self.api_client.sanitize_for_serialization(
                self.core.read_namespaced_pod(name, namespace)
            )
        )

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        lst = self.core.list_namespaced_pod(namespace, label_selector=selector)
        return [dict(self.api_client.sanitize_for_serialization(p)) for p in lst.items]

    def events_for(self, namespace: str, name: str) -> list[dict[str, Any]]:
        lst = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        return [dict(self.api_client.sanitize_for_serialization(e)) for e in lst.items]

    def post_binding(self, namespace: str, pod: str, node: str, uid: str | None = None) -> int:
        """POST pods/binding directly (the Python client's model bug avoided); returns status."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, **({"uid": uid} if uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            resp = self.core.create_namespaced_pod_binding(
                pod, namespace, body, _preload_content=False
            )
        except kubernetes.client.exceptions.ApiException as e:
            return int(e.status)
        status = int(resp.status)
        resp.release_conn()
        return status


def pod_body(
    name: str,
    *,
    scheduler: str = "metricsched",
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **(spec or {}),
        },
    }


def _healthy() -> bool:
    return (
        subprocess.run(
            [sys.executable, str(CLUSTER), "status"], capture_output=True, check=False
        ).returncode
        == 0
    )


def _loadmodel_scraped_as_tests_want() -> bool:
    try:
        config = (STATE / "prometheus.yml").read_text()
    except OSError:
        return False
    # The kubelet job too: a cluster started before it existed gets its Prometheus reloaded.
    return (
        f"job_name: loadmodel\n    honor_labels: true\n    scrape_interval: {LOADMODEL_SCRAPE}\n"
        in config
        and "job_name: kubelet\n" in config
    )


def _runs_the_wanted_version() -> bool:
    """Whether the running cluster is of METRICSCHED_KUBE_VERSION (unset: the default
    version); ``up`` restarts one of another. A cluster that recorded none predates the
    choice and runs the default."""
    try:
        running = (STATE / "kube-version").read_text().strip()
    except OSError:
        return True
    wanted = os.environ.get("METRICSCHED_KUBE_VERSION") or pinned_kube_versions()[0]
    return running == wanted


def pinned_kube_versions() -> list[str]:
    """hack/build-tools.sh --versions: the pinned Kubernetes versions, the default first."""
    script = ROOT / "hack" / "build-tools.sh"
    out = subprocess.run([str(script), "--versions"], check=True, capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    started = False
    env = {**os.environ, "METRICSCHED_LOADMODEL_SCRAPE": LOADMODEL_SCRAPE}
    if not _healthy():
        subprocess.run([sys.executable, str(CLUSTER), "up"], check=True, env=env)
        started = True
    elif not _loadmodel_scraped_as_tests_want() or not _runs_the_wanted_version():
        subprocess.run([sys.executable, str(CLUSTER), "up"], check=True, env=env)
    yield Cluster()
    if started and os.environ.get("METRICSCHED_KEEP_CLUSTER") != "1":
        subprocess.run([sys.executable, str(CLUSTER), "down"], check=False)


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    base = request.node.name.lower().replace("_", "-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(name)
    yield name
    with contextlib.suppress(kubernetes.client.exceptions.ApiException):
        cluster.core.delete_namespace(name)
