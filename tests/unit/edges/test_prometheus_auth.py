"""Credentials beyond the bearer token reach Prometheus: extra headers (a Mimir or Cortex
tenant's ``X-Scope-OrgID``), basic auth with a password read from its file for every query,
and a client certificate (mTLS). Checked against loopback servers; the TLS one is real and
requires a certificate signed by the test's own CA (made by openssl)."""

from __future__ import annotations

import base64
import http.server
import json
import pathlib
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator

import edges_fakes as fakes
import pytest

from metricsched.core import model
from metricsched.edges import prometheus

NODES = [fakes.node("node-a", "10.0.0.1")]
PASSWORD = "pa55-w0rd-value"
Kind = model.QueryErrorKind


def make_source(url: str, **overrides: object) -> prometheus.PrometheusClient:
    settings: dict[str, object] = {"timeout_s": 2.0, "retries": 0, **overrides}
    return prometheus.PrometheusClient(prometheus.PrometheusConfig(url=url, **settings))  # type: ignore[arg-type]


def query(source: prometheus.PrometheusClient) -> prometheus.QueryReport:
    return source.query_nodes_report(
        "up", node_label="node", nodes=NODES, now=1.0, namespace="shop"
    )


def ok(_: fakes.Request) -> tuple[int, object]:
    return 200, fakes.vector(({"node": "node-a"}, "1"))


def test_extra_headers_such_as_a_tenant_go_with_every_query(
    fake_prometheus: fakes.FakeServer,
) -> None:
    fake_prometheus.responder = ok
    source = make_source(
        fake_prometheus.url, headers=(("X-Scope-OrgID", "team-a|team-b"), ("X-Extra", "1"))
    )
    assert query(source).series.error is None
    assert source.ping()[0]
    for request in fake_prometheus.requests:
        assert request.headers["x-scope-orgid"] == "team-a|team-b"
        assert request.headers["x-extra"] == "1"
    assert len(fake_prometheus.requests) == 2


def test_basic_auth_sends_the_password_read_from_its_file_for_every_query(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    fake_prometheus.responder = ok
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    source = make_source(fake_prometheus.url, username="reader", password_file=str(password_file))
    assert query(source).series.error is None
    password_file.write_text("rotated")  # a Secret updated in place
    assert query(source).series.error is None
    sent = [r.headers["authorization"] for r in fake_prometheus.requests]
    assert sent == [
        "Basic " + base64.b64encode(f"reader:{PASSWORD}".encode()).decode(),
        "Basic " + base64.b64encode(b"reader:rotated").decode(),
    ]


def test_a_rejected_password_is_unreachable_and_never_appears_in_the_message(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD)
    # A proxy that echoes the credentials it refused, the worst case for leaks.
    fake_prometheus.responder = lambda r: (
        400,
        fakes.prom_error("bad_data", f"bad {r.headers['authorization']} {PASSWORD}"),
    )
    source = make_source(fake_prometheus.url, username="reader", password_file=str(password_file))
    message = query(source).series.error_message
    assert PASSWORD not in message
    assert base64.b64encode(f"reader:{PASSWORD}".encode()).decode() not in message
    fake_prometheus.responder = lambda r: (401, b"who are you")
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "refused access (HTTP 401)" in report.series.error_message
    assert "basic auth" in report.series.error_message
    assert PASSWORD not in repr(source._auth)


def test_a_missing_password_file_is_unreachable_without_sending_anything(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    source = make_source(
        fake_prometheus.url, username="reader", password_file=str(tmp_path / "absent")
    )
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "cannot read the basic-auth password file" in report.series.error_message
    assert fake_prometheus.requests == []


def test_a_header_from_a_file_is_read_for_every_query_beside_basic_auth(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    fake_prometheus.responder = ok
    key_file, password_file = tmp_path / "key", tmp_path / "password"
    key_file.write_text("k-one\n")
    password_file.write_text(PASSWORD)
    source = make_source(
        fake_prometheus.url,
        header_files=(("X-Api-Key", str(key_file)),),
        username="reader",
        password_file=str(password_file),
    )
    assert query(source).series.error is None
    key_file.write_text("k-two")  # a Secret updated in place
    assert query(source).series.error is None
    assert [r.headers["x-api-key"] for r in fake_prometheus.requests] == ["k-one", "k-two"]
    assert all(r.headers["authorization"].startswith("Basic ") for r in fake_prometheus.requests)


def test_a_headers_secret_never_appears_in_a_message(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("api-key-s3cr3t")
    fake_prometheus.responder = lambda r: (
        400,
        fakes.prom_error("bad_data", f"bad key {r.headers['x-api-key']}"),
    )
    source = make_source(fake_prometheus.url, header_files=(("X-Api-Key", str(key_file)),))
    message = query(source).series.error_message
    assert "api-key-s3cr3t" not in message and "[REDACTED]" in message
    assert "api-key-s3cr3t" not in repr(source._auth)


@pytest.mark.parametrize("content", [None, "", "two\nlines"])
def test_a_missing_empty_or_multi_line_header_file_sends_nothing(
    fake_prometheus: fakes.FakeServer, tmp_path: pathlib.Path, content: str | None
) -> None:
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content)
    source = make_source(fake_prometheus.url, header_files=(("X-Api-Key", str(key_file)),))
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "X-Api-Key" in report.series.error_message
    assert str(key_file) in report.series.error_message
    assert fake_prometheus.requests == []


# --- client certificates ---------------------------------------------------------------


def _openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, signed by it."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed: run `make deps`")
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=test-ca", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "metricsched")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile",
                 f"{name}.ext", cwd=d)  # fmt: skip
    return d


@pytest.fixture
def mtls_prometheus(pki: pathlib.Path) -> Iterator[tuple[str, list[str]]]:
    """An HTTPS server that requires a client certificate of the test CA; yields its URL
    and the common names of the clients it served."""
    clients: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            cert = self.connection.getpeercert()  # type: ignore[attr-defined]
            subject = dict(item[0] for item in cert["subject"]) if cert else {}
            clients.append(str(subject.get("commonName", "")))
            body = json.dumps(fakes.vector(({"node": "node-a"}, "1"))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.daemon = True
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", clients
    server.shutdown()
    server.server_close()


def test_a_client_certificate_is_presented_to_prometheus(
    mtls_prometheus: tuple[str, list[str]], pki: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CA bundle in the environment must not replace the configured CA file.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    url, clients = mtls_prometheus
    source = make_source(
        url,
        ca_file=str(pki / "ca.crt"),
        cert_file=str(pki / "client.crt"),
        key_file=str(pki / "client.key"),
        headers=(("X-Scope-OrgID", "team-a"),),
    )
    report = query(source)
    assert report.series.error is None
    assert report.series.values[model.NodeName("node-a")].value == 1.0
    assert clients == ["metricsched"]


def test_without_a_client_certificate_the_tls_handshake_fails_as_unreachable(
    mtls_prometheus: tuple[str, list[str]], pki: pathlib.Path
) -> None:
    url, clients = mtls_prometheus
    report = query(make_source(url, ca_file=str(pki / "ca.crt")))
    assert report.series.error is Kind.UNREACHABLE
    assert clients == []


def test_a_missing_client_key_file_is_unreachable_naming_the_path_only(
    mtls_prometheus: tuple[str, list[str]], pki: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    url, clients = mtls_prometheus
    source = make_source(
        url,
        ca_file=str(pki / "ca.crt"),
        cert_file=str(pki / "client.crt"),
        key_file=str(tmp_path / "absent.key"),
    )
    report = query(source)
    assert report.series.error is Kind.UNREACHABLE
    assert "Could not find the TLS key file" in report.series.error_message
    assert str(tmp_path / "absent.key") in report.series.error_message
    assert clients == []
