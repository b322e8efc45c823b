"""helm install, upgrade and uninstall of the chart against the real API server.

The namespace enforces the PodSecurity ``restricted`` profile, so the API server itself
judges the pod the chart renders. No kube-scheduler runs here and kwok runs no containers:
"admitted" means the ReplicaSet could create the pod.
"""

from __future__ import annotations

import json
import uuid

import kubernetes
import pytest

from tests.e2e.chart.conftest import (
    CHART,
    CRD_NAME,
    Release,
    delete_namespace,
    helm,
    release_pods,
    restricted_namespace,
)
from tests.e2e.conftest import Cluster, pod_body, wait_for

NAMESPACED_KINDS = [
    "deployments.apps",
    "replicasets.apps",
    "pods",
    "services",
    "serviceaccounts",
    "configmaps",
    "secrets",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "poddisruptionbudgets.policy",
]
CLUSTER_KINDS = [
    "clusterroles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
]


def names(
    cluster: Cluster, kind: str, *, namespace: str | None = None, selector: str = ""
) -> list[str]:
    args = ["get", kind, "-o", "name"]
    args += [f"--namespace={namespace}"] if namespace else []
    args += [f"--selector={selector}"] if selector else []
    return cluster.kubectl(*args).split()


def env_of(cluster: Cluster, release: Release) -> dict[str, str]:
    deployment = cluster.apps.read_namespaced_deployment(release.fullname, release.namespace)
    (container,) = deployment.spec.template.spec.containers
    return {e.name: e.value for e in container.env if e.value is not None}


def test_the_namespace_really_enforces_the_restricted_profile(cluster: Cluster) -> None:
    """The control for the test below: a privileged pod is refused in such a namespace."""
    namespace = restricted_namespace(cluster, "chart-psa")
    try:
        body = pod_body("privileged", scheduler="nobody")
        body["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
            cluster.core.create_namespaced_pod(namespace, body, dry_run="All")
        assert refused.value.status == 403
        message = json.loads(refused.value.body)["message"]
        assert 'violates PodSecurity "restricted:latest"' in message
    finally:
        delete_namespace(cluster, namespace)


def test_install_upgrade_and_uninstall_leave_only_the_crd(cluster: Cluster) -> None:
    namespace = restricted_namespace(cluster, "chart-life")
    release = Release(cluster, namespace, f"msc-{uuid.uuid4().hex[:6]}")
    selector = f"app.kubernetes.io/instance={release.name}"
    try:
        # Install: the API server validates every object server-side and admits the pod.
        notes = release.install(f"prometheus.url={cluster.prometheus_url}")
        assert "schedulerName: metricsched" in notes
        first = wait_for(
            "the Deployment's pod created",
            lambda: release_pods(cluster, namespace, release.name),
            timeout=30,
        )
        pod = first[0]
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        assert pod["spec"]["priority"] == 2000000000
        assert pod["spec"]["serviceAccountName"] == release.service_account
        # Only the pod mounts a token: the projected volume of the TokenRequest API.
        assert any(v["name"].startswith("kube-api-access-") for v in pod["spec"].get("volumes", []))
        failed = [
            e["message"]
            for e in cluster.core.list_namespaced_event(namespace).to_dict()["items"]
            if e["reason"] == "FailedCreate"
        ]
        assert failed == []
        assert env_of(cluster, release)["METRICSCHED_LOG_LEVEL"] == "info"

        # Upgrade with a changed value: a new revision, a new pod template, a new pod.
        helm(
            cluster,
            "upgrade",
            release.name,
            str(CHART),
            f"--namespace={namespace}",
            "--reuse-values",
            "--set=logLevel=debug",
        )
        status = helm(cluster, "status", release.name, f"--namespace={namespace}", "-o", "json")
        assert '"version":2' in status.stdout.replace(" ", "")
        assert env_of(cluster, release)["METRICSCHED_LOG_LEVEL"] == "debug"
        old_hash = first[0]["metadata"]["labels"]["pod-template-hash"]
        wait_for(
            "a pod of the upgraded template",
            lambda: any(
                p["metadata"]["labels"]["pod-template-hash"] != old_hash
                for p in release_pods(cluster, namespace, release.name)
            ),
            timeout=30,
        )

        # Uninstall: everything the release made is gone, the CRD stays.
        helm(
            cluster,
            "uninstall",
            release.name,
            f"--namespace={namespace}",
            "--wait",
            "--timeout=60s",
        )
        remaining = [
            *(
                n
                for k in NAMESPACED_KINDS
                for n in names(cluster, k, namespace=namespace, selector=selector)
            ),
            *(n for k in CLUSTER_KINDS for n in names(cluster, k, selector=selector)),
        ]
        assert remaining == []
        pods = wait_for(
            "the release's pods deleted",
            lambda: release_pods(cluster, namespace, release.name) == [] or None,
            timeout=30,
        )
        assert pods is True
        assert names(cluster, "serviceaccounts", namespace=namespace) == ["serviceaccount/default"]
        assert names(cluster, "crd", selector="app.kubernetes.io/part-of=metricsched") == [
            f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME}"
        ]
        assert helm(cluster, "list", f"--namespace={namespace}", "-q").stdout.strip() == ""
    finally:
        release.uninstall()
        delete_namespace(cluster, namespace)
