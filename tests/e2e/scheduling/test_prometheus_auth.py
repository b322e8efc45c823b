"""Prometheus behind basic auth over TLS (issue 20, deliverable 4), and behind mTLS.

A second Prometheus (Debian's binary, as hack/cluster.py runs it) scrapes the test bed's
exporter and serves only HTTPS with basic auth (``--web.config.file``: a certificate from
a CA made here with openssl, a bcrypt hash of the password). The operator, started with
--prometheus-url https://..., --prometheus-username, --prometheus-password-file and
--prometheus-ca-file in place of the session's operator, refreshes a policy's metric
through it and places a pod by it; with a wrong password in the same file (read for every
query) the policy says MetricQueryFailed in words a person can act on, and the password
shows up in no message, status or log line. With ``client_auth_type:
RequireAndVerifyClientCert`` instead, the operator's --prometheus-cert-file and
--prometheus-key-file are what let it in (an API key header read from its file rides
along, and shows up nowhere either).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from tests.e2e.conftest import STATE, Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    METRICS_ONLY,
    OperatorProcess,
    apply_policy,
    condition,
    event_messages,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
)
from tests.e2e.scheduling.pools import Pool

USER = "metricsched"
PASSWORD = "s3cret-e2e-Zq9vLm"
WRONG = "wrong-e2e-password-7Hq"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_tls(workdir: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 it signs: (ca.crt, tls.crt, tls.key)."""
    ca_key, ca, key, csr, crt = (
        workdir / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt")
    )
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ca_key))
    _openssl(
        "req", "-x509", "-new", "-key", str(ca_key), "-days", "1",
        "-subj", "/CN=metricsched-e2e-prometheus-ca", "-out", str(ca),
    )  # fmt: skip
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    _openssl("req", "-new", "-key", str(key), "-subj", "/CN=prometheus", "-out", str(csr))
    ext = workdir / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(crt),
    )  # fmt: skip
    return ca, crt, key


def make_client_cert(workdir: Path) -> tuple[Path, Path]:
    """A client certificate signed by make_tls's CA (in ``workdir``): (client.crt, client.key)."""
    ca_key, ca = workdir / "ca.key", workdir / "ca.crt"
    key, csr, crt = (workdir / n for n in ("client.key", "client.csr", "client.crt"))
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    _openssl("req", "-new", "-key", str(key), "-subj", "/CN=metricsched", "-out", str(csr))
    ext = workdir / "client.ext"
    ext.write_text("extendedKeyUsage=clientAuth\n")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(crt),
    )  # fmt: skip
    return crt, key


class SecurePrometheus:
    """Prometheus serving HTTPS with basic auth, or with mTLS (``mtls``: a client
    certificate signed by its CA required, no password), scraping the test bed's exporter."""

    def __init__(self, cluster: Cluster, workdir: Path, *, mtls: bool = False) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca, crt, key = make_tls(workdir)
        self.client = make_client_cert(workdir) if mtls else None
        web = workdir / "web.yml"
        if mtls:
            web.write_text(
                f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {self.ca}\n"
            )
        else:
            hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
            web.write_text(
                f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                f"basic_auth_users:\n  {USER}: '{hashed}'\n"
            )
        exporter = cluster.exporter_url.removeprefix("http://").rstrip("/")
        config = workdir / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 2s, evaluation_interval: 2s}\n"
            "scrape_configs:\n"
            "  - job_name: node-exporter-sim\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['{exporter}']}}]\n"
        )
        self.log = STATE / "logs" / "prometheus-auth-e2e.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                shutil.which("prometheus") or "/usr/bin/prometheus",  # Debian's, as the bed's
                f"--config.file={config}",
                f"--web.config.file={web}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def get(self, path: str, *, password: str | None = PASSWORD, cert: bool = True) -> int:
        context = ssl.create_default_context(cafile=str(self.ca))
        if self.client is not None and cert:
            context.load_cert_chain(*self.client)
        request = urllib.request.Request(self.url + path)
        if password is not None and self.client is None:
            token = base64.b64encode(f"{USER}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as r:
                r.read()
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def secure_prometheus(cluster: Cluster, tmp_path: Path) -> Iterator[SecurePrometheus]:
    prometheus = SecurePrometheus(cluster, tmp_path)
    try:
        wait_for("the secure Prometheus ready", lambda: prometheus.get("/-/ready") == 200)
        yield prometheus
    finally:
        prometheus.stop()


@pytest.fixture
def auth_operator(
    cluster: Cluster,
    operator: OperatorProcess,
    secure_prometheus: SecurePrometheus,
    tmp_path: Path,
) -> Iterator[tuple[OperatorProcess, Path, int]]:
    """The operator querying the secure Prometheus, in place of the session's operator
    (two would both write the policies' status); its password file; where its log starts."""
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    operator.stop()
    secured = OperatorProcess(
        cluster,
        extra_args=[
            f"--prometheus-url={secure_prometheus.url}",
            f"--prometheus-username={USER}",
            f"--prometheus-password-file={password_file}",
            f"--prometheus-ca-file={secure_prometheus.ca}",
        ],
    )
    log_start = secured.log.stat().st_size if secured.log.exists() else 0
    try:
        secured.start()
        yield secured, password_file, log_start
    finally:
        secured.stop()
        operator.start()


def test_the_secure_prometheus_refuses_a_query_without_the_password(
    secure_prometheus: SecurePrometheus,
) -> None:
    assert secure_prometheus.get("/api/v1/query?query=up", password=None) == 401
    assert secure_prometheus.get("/api/v1/query?query=up", password=WRONG) == 401
    assert secure_prometheus.get("/api/v1/query?query=up") == 200


def test_basic_auth_over_tls_refreshes_the_metric_and_a_wrong_password_is_a_clear_failure(
    cluster: Cluster,
    auth_operator: tuple[OperatorProcess, Path, int],
    secure_prometheus: SecurePrometheus,
    namespace: str,
    metric: str,
) -> None:
    op, password_file, log_start = auth_operator
    pool = Pool(cluster, size=3)
    pool.create()
    try:
        values = dict(zip(pool.names, [0.5, 0.1, 0.9], strict=True))
        set_and_wait(cluster, metric, values)  # in the test bed's Prometheus
        wait_for(
            "the secure Prometheus to scrape the metric",
            lambda: (
                secure_prometheus.get(f"/api/v1/query?query={metric}") == 200
                and _has_series(secure_prometheus, metric)
            ),
            timeout=30,
        )
        apply_policy(
            cluster,
            namespace,
            "secured",
            {"metrics": [prom_metric(metric)], "kubeScores": METRICS_ONLY, "burstPenalty": 0},
        )
        policy = wait_for(
            "MetricsAvailable through basic auth",
            lambda: (
                (p := get_policy(cluster, namespace, "secured"))
                and condition(p, "MetricsAvailable").get("status") == "True"
                and p
            ),
            timeout=30,
        )
        assert policy["status"]["metrics"][0]["nodesReporting"] >= 3
        cluster.create_pod(namespace, "by-metric", spec=pool.pod_spec())
        assert wait_bound(cluster, namespace, "by-metric") == pool.names[1]

        # The password file is read for every query: a wrong one fails the next refresh.
        password_file.write_text(WRONG + "\n")
        failed = wait_for(
            "MetricQueryFailed with the wrong password",
            lambda: (
                (p := get_policy(cluster, namespace, "secured"))
                and condition(p, "MetricsAvailable").get("status") == "False"
                and p
            ),
            timeout=30,
        )
        available = condition(failed, "MetricsAvailable")
        assert available["reason"] == "Unreachable"
        assert "refused access (HTTP 401)" in available["message"]
        assert "check the credentials" in available["message"]
        events = wait_for(
            "a MetricQueryFailed event",
            lambda: event_messages(cluster, namespace, "secured", "MetricQueryFailed"),
            timeout=30,
        )
        assert any("refused access (HTTP 401)" in m for m in events)

        # Never the password, right or wrong, in any message, status or log line.
        seen = [str(failed), *events, *_all_event_messages(cluster, namespace)]
        seen.append(op.log.read_text(errors="replace")[log_start:])
        for text in seen:
            assert PASSWORD not in text
            assert WRONG not in text
    finally:
        with contextlib.suppress(Exception):
            cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        pool.delete()


def _has_series(prometheus: SecurePrometheus, metric: str) -> bool:
    context = ssl.create_default_context(cafile=str(prometheus.ca))
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    request = urllib.request.Request(f"{prometheus.url}/api/v1/query?query={metric}")
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=5, context=context) as r:
        return b'"result":[{' in r.read()


def _all_event_messages(cluster: Cluster, namespace: str) -> list[str]:
    return [str(e.message) for e in cluster.core.list_namespaced_event(namespace).items]


@pytest.fixture
def mtls_prometheus(cluster: Cluster, tmp_path: Path) -> Iterator[SecurePrometheus]:
    prometheus = SecurePrometheus(cluster, tmp_path, mtls=True)
    try:
        wait_for("the mTLS Prometheus ready", lambda: prometheus.get("/-/ready") == 200)
        yield prometheus
    finally:
        prometheus.stop()


API_KEY = "api-key-e2e-Wf4pX2"


def test_mtls_lets_in_the_operators_client_certificate_and_nothing_without_one(
    cluster: Cluster,
    operator: OperatorProcess,
    mtls_prometheus: SecurePrometheus,
    namespace: str,
    metric: str,
) -> None:
    # Without a client certificate the TLS handshake itself is refused.
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        mtls_prometheus.get("/api/v1/query?query=up", cert=False)
    assert mtls_prometheus.get("/api/v1/query?query=up") == 200
    assert mtls_prometheus.client is not None
    client_crt, client_key = mtls_prometheus.client
    key_file = mtls_prometheus.workdir / "api-key"
    key_file.write_text(API_KEY + "\n")
    operator.stop()
    secured = OperatorProcess(
        cluster,
        extra_args=[
            f"--prometheus-url={mtls_prometheus.url}",
            f"--prometheus-ca-file={mtls_prometheus.ca}",
            f"--prometheus-cert-file={client_crt}",
            f"--prometheus-key-file={client_key}",
            f"--prometheus-header-file=X-Api-Key={key_file}",
        ],
    )
    log_start = secured.log.stat().st_size if secured.log.exists() else 0
    pool = Pool(cluster, size=3)
    try:
        secured.start()
        pool.create()
        values = dict(zip(pool.names, [0.5, 0.1, 0.9], strict=True))
        set_and_wait(cluster, metric, values)  # in the test bed's Prometheus
        wait_for(
            "the mTLS Prometheus to scrape the metric",
            lambda: mtls_prometheus.get(f"/api/v1/query?query={metric}") == 200,
            timeout=30,
        )
        apply_policy(
            cluster,
            namespace,
            "mtls",
            {"metrics": [prom_metric(metric)], "kubeScores": METRICS_ONLY, "burstPenalty": 0},
        )
        policy = wait_for(
            "MetricsAvailable through mTLS",
            lambda: (
                (p := get_policy(cluster, namespace, "mtls"))
                and condition(p, "MetricsAvailable").get("status") == "True"
                and p["status"]["metrics"][0].get("nodesReporting", 0) >= 3
                and p
            ),
            timeout=45,
        )
        assert policy
        cluster.create_pod(namespace, "by-metric", spec=pool.pod_spec())
        assert wait_bound(cluster, namespace, "by-metric") == pool.names[1]
        assert API_KEY not in secured.log.read_text(errors="replace")[log_start:]
        assert all(API_KEY not in m for m in _all_event_messages(cluster, namespace))
    finally:
        with contextlib.suppress(Exception):
            cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        pool.delete()
        secured.stop()
        operator.start()
