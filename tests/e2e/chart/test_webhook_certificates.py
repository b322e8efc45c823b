"""The webhook's TLS as the chart makes it, on a real API server: the CA in the
MutatingWebhookConfiguration signs the serving certificate in the Secret; an upgrade signs
a new serving certificate with the same CA (read back with `lookup`), so the old and the
new are both trusted while pods roll; uninstall removes the configuration."""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from tests.e2e.chart.conftest import CHART, Release, delete_namespace, helm, restricted_namespace
from tests.e2e.conftest import Cluster


def secret_data(cluster: Cluster, release: Release) -> dict[str, str]:
    secret = cluster.core.read_namespaced_secret(
        f"{release.fullname}-webhook-tls", release.namespace
    )
    return dict(secret.data)


def ca_bundle(cluster: Cluster, release: Release) -> str:
    name = f"{release.fullname}-{release.namespace}"
    return cluster.kubectl(
        "get",
        "mutatingwebhookconfiguration",
        name,
        "-o",
        "jsonpath={.webhooks[0].clientConfig.caBundle}",
    )


def verifies(tmp_path: Path, ca_b64: str, cert_b64: str) -> bool:
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(ca_b64))
    (tmp_path / "tls.crt").write_bytes(base64.b64decode(cert_b64))
    out = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
        capture_output=True,
        check=False,
    )
    return out.returncode == 0


def test_an_upgrade_signs_a_new_serving_certificate_with_the_same_ca(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = restricted_namespace(cluster, "chart-hook")
    release = Release(cluster, namespace, f"msc-{uuid.uuid4().hex[:6]}")
    # A scheduler name of its own: no namespace carries its label, so no pod is sent.
    name = f"e2e-hook-{uuid.uuid4().hex[:6]}"
    try:
        release.install(
            f"prometheus.url={cluster.prometheus_url}",
            f"schedulerNames={{{name}}}",
            "webhook.enabled=true",
        )
        first = secret_data(cluster, release)
        assert ca_bundle(cluster, release) == first["ca.crt"]
        assert verifies(tmp_path, first["ca.crt"], first["tls.crt"])

        helm(
            cluster, "upgrade", release.name, str(CHART), f"--namespace={namespace}",
            "--reuse-values", "--set=logLevel=debug",
        )  # fmt: skip
        second = secret_data(cluster, release)
        assert second["ca.crt"] == first["ca.crt"]
        assert second["ca.key"] == first["ca.key"]
        assert second["tls.crt"] != first["tls.crt"]
        assert ca_bundle(cluster, release) == first["ca.crt"]
        assert verifies(tmp_path, second["ca.crt"], second["tls.crt"])

        helm(
            cluster,
            "uninstall",
            release.name,
            f"--namespace={namespace}",
            "--wait",
            "--timeout=60s",
        )
        left = cluster.kubectl(
            "get", "mutatingwebhookconfigurations", "-o", "name",
            f"--selector=app.kubernetes.io/instance={release.name}",
        )  # fmt: skip
        assert left.strip() == ""
    finally:
        release.uninstall()
        delete_namespace(cluster, namespace)
