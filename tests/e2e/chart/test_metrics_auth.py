"""Secure /metrics against the real API server: HTTPS, TokenReview, SubjectAccessReview.

The operator runs with the chart's ServiceAccount token only (so the chart's RBAC must let
it review tokens and access), serves /metrics as the chart configures it, and answers each
scraper by what the API server says about its token: no token, a token whose account may
not get /metrics, and one bound to the chart's metrics-reader ClusterRole.
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.e2e.chart.conftest import Release, ServiceAccountOperator
from tests.e2e.conftest import Cluster


@pytest.fixture
def secure_operator(
    cluster: Cluster, ha_release: Release, tmp_path: Path
) -> Iterator[ServiceAccountOperator]:
    kubeconfig = ha_release.token_kubeconfig(tmp_path / "sa.kubeconfig")
    op = ServiceAccountOperator(
        cluster, ha_release, kubeconfig, tmp_path / "operator.log", ("--metrics-secure",)
    )
    op.start()
    yield op
    op.stop()


def scrape(port: int, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the operator's certificate is self-signed here
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()


def account_token(cluster: Cluster, namespace: str, name: str) -> str:
    cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    return cluster.kubectl("create", "token", name, f"--namespace={namespace}").strip()


@contextlib.contextmanager
def bound_to(cluster: Cluster, role: str, namespace: str, account: str) -> Iterator[None]:
    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.api_client)
    name = f"e2e-metrics-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )
    try:
        yield
    finally:
        rbac.delete_cluster_role_binding(name)


def test_a_scrape_without_a_token_is_unauthorized(secure_operator: ServiceAccountOperator) -> None:
    status, body = scrape(secure_operator.metrics_port)
    assert status == 401, body


def test_a_token_the_api_server_does_not_know_is_unauthorized(
    secure_operator: ServiceAccountOperator,
) -> None:
    status, body = scrape(secure_operator.metrics_port, "not-a-token")
    assert status == 401, body


def test_an_account_without_the_reader_role_is_forbidden(
    cluster: Cluster, secure_operator: ServiceAccountOperator, namespace: str
) -> None:
    token = account_token(cluster, namespace, "stranger")
    status, body = scrape(secure_operator.metrics_port, token)
    assert status == 403, body
    assert f"system:serviceaccount:{namespace}:stranger" in body


def test_an_account_bound_to_the_reader_role_reads_the_metrics(
    cluster: Cluster, secure_operator: ServiceAccountOperator, namespace: str
) -> None:
    token = account_token(cluster, namespace, "prometheus")
    reader = f"{secure_operator.release.fullname}-metrics-reader"
    with bound_to(cluster, reader, namespace, "prometheus"):
        status, body = scrape(secure_operator.metrics_port, token)
    assert status == 200, body
    assert "metricsched_schedule_attempts_total" in body


def test_metrics_are_not_served_over_plain_http_and_the_probes_are(
    secure_operator: ServiceAccountOperator,
) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(
            f"http://127.0.0.1:{secure_operator.metrics_port}/metrics", timeout=5
        )
    with urllib.request.urlopen(
        f"http://127.0.0.1:{secure_operator.health_port}/healthz", timeout=5
    ) as r:
        assert r.status == 200
