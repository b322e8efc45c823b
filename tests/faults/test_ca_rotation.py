"""The API server's CA rotated under a leading operator (issue 28, N11).

kube-apiserver restarts serving a certificate signed by a new CA, and the CA file the
replicas read is replaced on disk the way the kubelet updates a projected
service-account CA (a new directory, then the ``..data`` symlink swapped). Every request
the operator makes (the Lease, watches, Bindings, Events) must go on over the new CA:
a replica that renews its Lease but cannot bind would hold every pod for good, and no
standby would take over.

The new certificate is served only to clients that name the server ``localhost`` (an SNI
certificate, ``hack/cluster.py``'s ``apiserver-sni``): the replicas do, every other client
of the shared control plane (kwok, the controller manager, this harness) keeps the
cluster's CA.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import CLUSTER
from tests.faults import audit, harness
from tests.faults.conftest import ScenarioFactory

# Every pod created after the rotation is bound within this long of its creation: the
# API server's restart (≈ 5-10 s here), a failed watch or request retried, kopf's own
# restart after a few seconds of errors (runtime/kopf_source.py: KOPF_ERROR_BACKOFFS), and a
# lease duration (15 s) if the Lease moves to the standby, with room to spare.
BIND_WITHIN_S = 60.0
WAVES, PER_WAVE, WAVE_EVERY_S = 8, 10, 3.0
LEASE_DURATION_S = 15.0


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _new_ca_and_serving_cert(pki: Path) -> tuple[Path, Path, Path]:
    """A new CA, and a serving certificate for ``localhost`` signed by it."""
    pki.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = pki / "ca.key", pki / "ca.crt"
    key, csr, crt, ext = pki / "serving.key", pki / "serving.csr", pki / "serving.crt", pki / "san"
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ca_key))
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(ca_key),
        "-days",
        "2",
        "-subj",
        "/CN=metricsched-rotated-ca",
        "-out",
        str(ca_crt),
    )
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-new", "-key", str(key), "-subj", "/CN=kube-apiserver", "-out", str(csr))
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_crt),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    return ca_crt, crt, key


class ProjectedCa:
    """A CA file as the kubelet keeps a projected volume: ``ca.crt`` → ``..data/ca.crt``,
    ``..data`` → a timestamped directory, updated by writing a new directory and swapping
    the ``..data`` symlink (one rename)."""

    def __init__(self, root: Path, first: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._version = 0
        self.update(first)
        (root / "ca.crt").symlink_to("..data/ca.crt")

    @property
    def path(self) -> str:
        return str(self.root / "ca.crt")

    def update(self, ca: Path) -> None:
        self._version += 1
        version = self.root / f"..{self._version}"
        version.mkdir()
        (version / "ca.crt").write_bytes(ca.read_bytes())
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.root / "..data")


def _restart_api_server() -> None:
    subprocess.run(
        [sys.executable, str(CLUSTER), "restart", "kube-apiserver", "--down-for", "1"], check=True
    )


def test_the_api_servers_ca_rotated_under_the_leader_keeps_pods_binding_and_the_lease_renewed(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("ca-rotate", "The API server's CA rotated (new CA, restart, CA file swapped)")
    s.add_nodes(harness.nodes_for(40 + WAVES * PER_WAVE))
    pki = harness.STATE / "faults" / s.namespace
    projected = ProjectedCa(pki / "projected", harness.STATE / "pki" / "ca.crt")
    new_ca, cert, key = _new_ca_and_serving_cert(pki / "new")
    s.start_replicas(2, server_name="localhost", ca_file=projected.path)
    s.create_pods("before", 40)
    s.wait_bound_count(40)
    s.extra["holder_before_the_rotation"] = holder = s.holder()
    sni = Path(str(harness.STATE / "apiserver-sni"))
    try:
        with s.fault("kube-apiserver restarted with a new CA's certificate") as w:
            sni.write_text(f"{cert},{key}:localhost\n")
            projected.update(new_ca)
            _restart_api_server()
        s.lost_leader(w.start, holder)  # a takeover, if any, is reported
        _after_the_rotation(s, rotated_at=w.end or time.time())
        s.verify(recover_from=w.end, outage=True)
    finally:
        # Serve the cluster's certificate alone again (the next run's replicas trust it),
        # once the verdict is in: these replicas trust only the new CA now.
        sni.unlink(missing_ok=True)
        _restart_api_server()


def _after_the_rotation(s: harness.Scenario, *, rotated_at: float) -> None:
    """Pods arrive; record the binds and Lease writes after the rotation, and what fails."""
    holder = s.holder()
    created_at: dict[str, float] = {}
    for i in range(WAVES):
        t = time.time()
        for name in s.create_pods(f"after{i}", PER_WAVE):
            created_at[name] = t
        time.sleep(WAVE_EVERY_S)
    harness.wait_until(lambda: set(created_at) <= set(s.watch.bound_at), timeout=BIND_WITHIN_S)
    time.sleep(harness.AUDIT_FLUSH_S)

    waits = {n: s.watch.bound_at[n] - t for n, t in created_at.items() if n in s.watch.bound_at}
    late = sorted(n for n in created_at if waits.get(n, float("inf")) > BIND_WITHIN_S)
    entries = list(audit.since(audit.read(harness.STATE / "audit"), s.started))
    renewals = [
        e
        for e in audit.lease_writes(entries, namespace=s.namespace, name=s.lease)
        if e.time.timestamp() >= rotated_at and e.holder
    ]
    last_renewal = max((e.time.timestamp() for e in renewals), default=None)
    s.extra["pods_after_the_rotation"] = len(created_at)
    s.extra["bind_within_s_target"] = BIND_WITHIN_S
    s.extra["slowest_bind_after_the_rotation_s"] = round(max(waits.values()), 1) if waits else None
    s.extra["lease_writes_after_the_rotation"] = len(renewals)
    s.extra["lease_holders_after_the_rotation"] = sorted({str(e.holder) for e in renewals})
    s.extra["holder_after_the_rotation"] = holder
    s.extra["tls_pool_rebuilds_logged"] = {
        r.name: _count_in(r.log, "TLS files changed on disk") for r in s.replicas
    }
    failures = []
    if late:
        failures.append(
            f"{len(late)} pods created after the rotation not bound within "
            f"{BIND_WITHIN_S:g} s, e.g. {late[:5]}"
        )
    if last_renewal is None or time.time() - last_renewal > LEASE_DURATION_S:
        failures.append(
            "the Lease was not renewed over the new CA in the last lease duration "
            f"({len(renewals)} Lease writes after the rotation)"
        )
    if failures:
        s.extra["failures"] = failures


def _count_in(log: Path, text: str) -> int:
    try:
        return log.read_text(errors="replace").count(text)
    except OSError:
        return 0
