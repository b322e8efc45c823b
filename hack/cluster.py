#!/usr/bin/env python3
"""The local control plane for tests, the demo and benchmarks.

Starts, on loopback only: etcd, kube-apiserver, kube-controller-manager (built from pinned
Go modules by hack/build-tools.sh), kwok managing simulated nodes, the per-node metrics
exporter (hack/exporter.py), the load model (hack/loadmodel.py: utilisation and latency
derived from the pods bound to nodes labelled ``loadmodel.metricsched.io/modelled=true``)
and Prometheus (Debian's package) scraping both. State lives in
the git-ignored ``.cluster/`` directory: pid files, logs, certificates, the admin
kubeconfig and a shell-sourceable ``env``.

    python hack/cluster.py up [--nodes N]   # idempotent: reuses a healthy cluster
    python hack/cluster.py up --nodes 5000 --quiet-nodes   # the benchmark's cluster (below)
    python hack/cluster.py down             # stops exactly what it started (pid files)
    python hack/cluster.py status
    python hack/cluster.py stop prometheus  # stop / start one component (tests use this)
    python hack/cluster.py start prometheus
    python hack/cluster.py kill kube-apiserver             # SIGKILL one component
    python hack/cluster.py restart kube-apiserver --kill --down-for 10

The Kubernetes version is METRICSCHED_KUBE_VERSION (one of ``hack/build-tools.sh
--versions``; unset, the first: the default). It too is remembered: ``up`` restarts a
running cluster of another version, and ``start``/``restart`` of one component use the
running cluster's version whatever the environment says.

``--quiet-nodes`` (the benchmark passes it; tests never do) makes the simulated nodes cheap
enough for 5,000 of them on two cores: kwok renews no node Leases
(``--node-lease-duration-seconds=0``) and posts each node's status heartbeat once every
5-15 minutes, and kube-controller-manager waits an hour (``--node-monitor-grace-period``)
before it calls a silent node unhealthy. With kubelet-like Leases (renewed every 10 s) 5,000
nodes need 500 Lease writes a second, more than this machine's API server and etcd can take
beside anything else; see bench/method.md. The choice is remembered in the state directory:
``up`` restarts a running cluster that was started the other way.

Stdlib only, so it runs before the project's virtualenv has anything in it.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kwok_node  # hack/kwok_node.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("METRICSCHED_CLUSTER_DIR", ROOT / ".cluster"))
PORT_BASE = int(os.environ.get("METRICSCHED_PORT_BASE", "22000"))

PORTS = {
    "etcd": PORT_BASE + 379,
    "etcd-peer": PORT_BASE + 380,
    "kube-apiserver": PORT_BASE + 443,
    "kube-controller-manager": PORT_BASE + 257,
    "kwok": PORT_BASE + 247,
    "exporter": PORT_BASE + 100,
    "loadmodel": PORT_BASE + 101,
    "prometheus": PORT_BASE + 90,
    # opt-in (``metrics-server up``): not in COMPONENTS, started by the tests that need it
    "metrics-server": PORT_BASE + 448,
}
DEFAULT_NODES = 6
# How often Prometheus scrapes the load model: a realistic interval by default; the e2e
# session (tests/e2e/conftest.py) and the benchmark set it shorter.
LOADMODEL_SCRAPE_ENV = "METRICSCHED_LOADMODEL_SCRAPE"
DEFAULT_LOADMODEL_SCRAPE = "15s"
# How often Prometheus evaluates the recording rules: fast by default, so the tests'
# recorded series follow their scrapes; the quality benchmark's realistic plan sets the
# scrape interval, as a stack evaluating as often as it scrapes does.
RULE_INTERVAL_ENV = "METRICSCHED_RULE_INTERVAL"
DEFAULT_RULE_INTERVAL = "2s"

# --quiet-nodes: node status heartbeat every 5-15 min (uniform; the stock stage posts one
# every 600-610 s, so nodes created together stay in step and heartbeat in bursts), no node
# Leases, and a node-monitor grace period well above the longest gap between heartbeats.
QUIET_HEARTBEAT_MS = (300_000, 900_000)
QUIET_GRACE_PERIOD = "1h"
STOCK_HEARTBEAT_DELAY = "durationMilliseconds: 600000\n    jitterDurationMilliseconds: 610000"


class ClusterError(RuntimeError):
    """A failure the user can act on; printed without a traceback."""


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


# --- binaries ------------------------------------------------------------------------------


KUBE_VERSION_ENV = "METRICSCHED_KUBE_VERSION"


def wanted_kube_version() -> str:
    """METRICSCHED_KUBE_VERSION, or build-tools.sh's default (the first it lists)."""
    if found := os.environ.get(KUBE_VERSION_ENV):
        return found
    script = ROOT / "hack" / "build-tools.sh"
    out = subprocess.run([str(script), "--versions"], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.split()[0]


def tools_bin(build: bool, version: str | None = None) -> Path:
    script = ROOT / "hack" / "build-tools.sh"
    args = [str(script)] if build else [str(script), "--print"]
    env = {**os.environ, KUBE_VERSION_ENV: version or wanted_kube_version()}
    out = subprocess.run(args, check=False, stdout=subprocess.PIPE, text=True, env=env)
    if out.returncode != 0:
        raise ClusterError("building the control-plane binaries failed (see the log named above)")
    return Path(out.stdout.strip().splitlines()[-1])


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if not found:
        raise ClusterError(
            "prometheus is not installed; run `make deps` (Debian: apt-get install prometheus)"
        )
    return found


# --- processes and ports -------------------------------------------------------------------


def pid_file(name: str) -> Path:
    return STATE / "pids" / f"{name}.pid"


def read_pid(name: str) -> int | None:
    try:
        return int(pid_file(name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def pid_is(name: str, pid: int) -> bool:
    """True if pid is alive and is the process we started (guards against pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    try:
        marker = pid_file(name).read_text().split(maxsplit=1)[1].strip()
    except (OSError, IndexError):
        return False
    joined = b" ".join(cmdline).decode(errors="replace")
    # Our processes all carry the state directory in an argument; a recycled pid won't.
    return joined.startswith(marker) and str(STATE) in joined


def alive(name: str) -> bool:
    pid = read_pid(name)
    return pid is not None and pid_is(name, pid)


def port_owner(port: int) -> str:
    try:
        out = subprocess.run(
            ["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        return "unknown process"
    return out.split("users:", 1)[1].strip() if "users:" in out else "unknown process"


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_port(name: str, port: int) -> None:
    if not port_free(port):
        raise ClusterError(
            f"port {port} (needed by {name}) is already in use by {port_owner(port)}; "
            f"stop it or set METRICSCHED_PORT_BASE to move every port"
        )


def spawn(name: str, argv: list[str], *, env: dict[str, str] | None = None) -> None:
    (STATE / "logs").mkdir(parents=True, exist_ok=True)
    (STATE / "pids").mkdir(parents=True, exist_ok=True)
    logf = (STATE / "logs" / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        argv,
        stdout=logf,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
        cwd=STATE,
    )
    # The marker (a unique argument of ours) lets `down` verify the pid before killing it.
    pid_file(name).write_text(f"{proc.pid} {argv[0]}\n")
    # Between fork and exec the child still looks like this Python process: wait for exec.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and proc.poll() is None and not pid_is(name, proc.pid):
        time.sleep(0.01)


def stop(name: str, timeout: float = 10.0) -> bool:
    pid = read_pid(name)
    if pid is None:
        return False
    stopped = False
    if pid_is(name, pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and pid_is(name, pid):
            time.sleep(0.1)
        if pid_is(name, pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        stopped = True
    with contextlib.suppress(OSError):
        # Reap if it was our child (start/stop of one component from the same process).
        os.waitpid(pid, os.WNOHANG)
    pid_file(name).unlink(missing_ok=True)
    return stopped


def kill(name: str) -> bool:
    """SIGKILL one component (a crash: no graceful shutdown); the pid file goes."""
    pid = read_pid(name)
    if pid is None or not pid_is(name, pid):
        pid_file(name).unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pid_is(name, pid):
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    pid_file(name).unlink(missing_ok=True)
    return True


def wait_for(
    what: str, check: Callable[[], bool], *, timeout: float, name: str, interval: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name and not alive(name):
            raise ClusterError(
                f"{name} exited while waiting for {what}; see {STATE / 'logs' / (name + '.log')}:\n"
                + tail(STATE / "logs" / f"{name}.log")
            )
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(interval)
    raise ClusterError(
        f"timed out after {timeout:.0f}s waiting for {what}; "
        f"see {STATE / 'logs' / (name + '.log')}:\n" + tail(STATE / "logs" / f"{name}.log")
    )


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- certificates and kubeconfig -----------------------------------------------------------


def openssl(*args: str) -> None:
    if not shutil.which("openssl"):
        raise ClusterError("openssl is missing; install it (Debian: apt-get install openssl)")
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(pki: Path, name: str, subject: str) -> None:
    """A self-signed CA, ``name``.key and ``name``.crt (P-256, ten years)."""
    key = str(pki / f"{name}.key")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    openssl("req", "-x509", "-new", "-key", key, "-days", "3650", "-subj", subject,
            "-out", str(pki / f"{name}.crt"))  # fmt: skip


def _signed(pki: Path, name: str, subject: str, *, ca: str, extensions: str) -> None:
    """``name``.key and ``name``.crt signed by the CA ``ca``, with ``extensions`` (an
    openssl extension file's lines, written beside them as ``name``.ext)."""
    key, csr, ext = (str(pki / f"{name}.{suffix}") for suffix in ("key", "csr", "ext"))
    Path(ext).write_text(extensions)
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", str(pki / f"{ca}.crt"),
            "-CAkey", str(pki / f"{ca}.key"), "-CAcreateserial", "-days", "3650",
            "-extfile", ext, "-out", str(pki / f"{name}.crt"))  # fmt: skip


def make_pki() -> None:
    pki = STATE / "pki"
    if (pki / "apiserver.crt").exists() and (pki / "token").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    _ca(pki, "ca", "/CN=metricsched-local-ca")
    _signed(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        ca="ca",
        extensions="subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1\n"
        "extendedKeyUsage=serverAuth\n",
    )
    openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
    openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
    token = secrets.token_hex(24)
    (pki / "token").write_text(token)
    (pki / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')


def make_front_proxy_pki() -> None:
    """The aggregation layer's front proxy: a CA of its own, and the client certificate
    kube-apiserver presents when it proxies a request to an extension API server (such as
    metrics-server, which trusts that CA for the request headers naming the user). Made
    apart from ``make_pki`` so that a state directory made before it gains them."""
    pki = STATE / "pki"
    if (pki / "front-proxy-client.crt").exists():
        return
    _ca(pki, "front-proxy-ca", "/CN=metricsched-front-proxy-ca")
    _signed(
        pki,
        "front-proxy-client",
        f"/CN={FRONT_PROXY_CLIENT}",
        ca="front-proxy-ca",
        extensions="extendedKeyUsage=clientAuth\n",
    )


FRONT_PROXY_CLIENT = "front-proxy-client"


def server_url() -> str:
    return f"https://127.0.0.1:{PORTS['kube-apiserver']}"


def write_kubeconfig() -> Path:
    pki = STATE / "pki"
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    token = (pki / "token").read_text().strip()
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "metricsched",
                "cluster": {"server": server_url(), "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [
            {
                "name": "metricsched",
                "context": {"cluster": "metricsched", "user": "admin", "namespace": "default"},
            }
        ],
        "current-context": "metricsched",
    }
    path = STATE / "kubeconfig"
    path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML
    path.chmod(0o600)
    return path


def write_env(bin_dir: Path) -> None:
    lines = {
        "KUBECONFIG": str(STATE / "kubeconfig"),
        "PROMETHEUS_URL": f"http://127.0.0.1:{PORTS['prometheus']}",
        "METRICSCHED_EXPORTER_URL": f"http://127.0.0.1:{PORTS['exporter']}",
        "METRICSCHED_LOADMODEL_URL": f"http://127.0.0.1:{PORTS['loadmodel']}",
        "METRICSCHED_LOADMODEL_RECORD": str(loadmodel_record()),
        "METRICSCHED_TOOLS_BIN": str(bin_dir),
        "PATH": f"{bin_dir}:$PATH",
    }
    text = "".join(
        f'export {k}="{v}"\n' if k == "PATH" else f"export {k}={v}\n" for k, v in lines.items()
    )
    (STATE / "env").write_text(text)


# --- API access (stdlib) -------------------------------------------------------------------


def api(method: str, path: str, body: Any = None, *, timeout: float = 10.0) -> Any:
    pki = STATE / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    req = urllib.request.Request(server_url() + path, method=method)
    req.add_header("Authorization", "Bearer " + (pki / "token").read_text().strip())
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, data=data, timeout=timeout, context=ctx) as r:
        raw = r.read()
    return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()


def http_ok(url: str, *, insecure: bool = False) -> bool:
    ctx = None
    if url.startswith("https"):
        ctx = ssl.create_default_context()
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
        return bool(200 <= r.status < 300)


# --- simulated nodes -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodeShape:
    cpu: str
    memory: str
    zone: str


SHAPES = [
    NodeShape("4", "16Gi", "zone-a"),
    NodeShape("8", "32Gi", "zone-b"),
    NodeShape("16", "64Gi", "zone-c"),
]


def node_body(i: int) -> dict[str, Any]:
    """node-1..node-N with varied capacity and zones; node-5 tainted, node-6 cordoned."""
    shape = SHAPES[(i - 1) % len(SHAPES)]
    name = f"node-{i}"
    capacity = {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    spec: dict[str, Any] = {}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        "topology.kubernetes.io/zone": shape.zone,
        "node.kubernetes.io/instance-type": f"sim-{shape.cpu}cpu",
    }
    if i == 5:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        labels["accelerator"] = "gpu"
        capacity["example.com/gpu"] = "4"
    if i == 6:
        spec["unschedulable"] = True
    ip = f"10.240.{i // 250}.{i % 250 + 1}"
    return kwok_node.Node(
        name=name,
        capacity=capacity,
        labels=labels,
        annotations={"example.com/hourly-price": f"{0.1 * (1 + (i % 4)):.2f}"},
        spec=spec,
        addresses={"InternalIP": ip, "Hostname": name},
    ).body()


def ensure_nodes(count: int) -> None:
    existing = {n["metadata"]["name"] for n in api("GET", "/api/v1/nodes")["items"]}
    todo = [i for i in range(1, count + 1) if f"node-{i}" not in existing]
    if not todo:
        return
    log(f"creating {len(todo)} simulated node(s)")

    def create(i: int) -> None:
        for attempt in range(5):
            try:
                api("POST", "/api/v1/nodes", node_body(i))
                return
            except urllib.error.HTTPError as e:
                if e.code == 409:
                    return
                if attempt == 4:
                    raise
                time.sleep(0.5 * (attempt + 1))

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(create, todo))


def wait_nodes_ready(nodes: int) -> None:
    """Wait until ``nodes`` nodes are Ready. Each check LISTs every node: at thousands of
    nodes that LIST is itself a load on the API server, so poll less often."""
    wait_for(
        f"{nodes} Ready nodes",
        lambda: ready_nodes() >= nodes,
        timeout=60 + nodes / 20,
        name="kwok",
        interval=max(0.2, nodes / 2000),
    )


def ready_nodes() -> int:
    n = 0
    for node in api("GET", "/api/v1/nodes")["items"]:
        for cond in node.get("status", {}).get("conditions", []) or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                n += 1
    return n


# --- components ----------------------------------------------------------------------------


def quiet_heartbeat(stage: str) -> str:
    """The stock node-heartbeat stage with its delay spread over QUIET_HEARTBEAT_MS."""
    if STOCK_HEARTBEAT_DELAY not in stage:
        raise ClusterError("kwok's node-heartbeat stage changed; update QUIET_HEARTBEAT_MS's use")
    low, high = QUIET_HEARTBEAT_MS
    spread = f"durationMilliseconds: {low}\n    jitterDurationMilliseconds: {high}"
    return stage.replace(STOCK_HEARTBEAT_DELAY, spread)


def kwok_config(bin_dir: Path, quiet: bool = False) -> Path:
    stages = bin_dir.parent / "kwok-stages"
    files = sorted(stages.glob("*.yaml"))
    if not files:
        raise ClusterError(f"kwok stage files missing in {stages}; re-run hack/build-tools.sh")
    texts = [f.read_text() for f in files]
    # kwok's emulated kubelet resource metrics (what metrics-server scrapes), once
    # hack/build-metrics-server.sh has fetched them: extra routes, harmless otherwise.
    metrics = metrics_server_dir(build=False)
    if metrics is not None:
        texts += [(metrics / name).read_text() for name in KWOK_METRICS_FILES]
    if quiet:
        texts = [quiet_heartbeat(t) if "name: node-heartbeat" in t else t for t in texts]
    path = STATE / "kwok.yaml"
    path.write_text("\n---\n".join(texts))
    return path


def loadmodel_scrape_interval() -> str:
    return os.environ.get(LOADMODEL_SCRAPE_ENV) or DEFAULT_LOADMODEL_SCRAPE


# kube-prometheus's node and container recording rules, over the load model's series.
RULES = ROOT / "hack" / "prometheus-rules.yml"


def prometheus_config_text() -> str:
    return (
        "global:\n  scrape_interval: 2s\n"
        f"  evaluation_interval: {os.environ.get(RULE_INTERVAL_ENV) or DEFAULT_RULE_INTERVAL}\n"
        f"rule_files: ['{RULES}']\n"
        "scrape_configs:\n"
        "  - job_name: node-exporter-sim\n"
        "    honor_labels: true\n"  # keep the exporter's own instance label (node address)
        f"    static_configs: [{{targets: ['127.0.0.1:{PORTS['exporter']}']}}]\n"
        "  - job_name: loadmodel\n"
        "    honor_labels: true\n"
        f"    scrape_interval: {loadmodel_scrape_interval()}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{PORTS['loadmodel']}']}}]\n"
        # The load model's nodes as node-exporter shows them (the recipes' series).
        "  - job_name: node-exporter\n"
        "    honor_labels: true\n"
        f"    scrape_interval: {loadmodel_scrape_interval()}\n"
        "    metrics_path: /node-exporter/metrics\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{PORTS['loadmodel']}']}}]\n"
        # Its pods as the kubelets' cAdvisor shows them, labelled as kube-prometheus-stack's
        # kubelet ServiceMonitor labels them (job "kubelet", the path as metrics_path), and
        # kube_pod_info as kube-state-metrics serves it: the k8s.rules join the two.
        "  - job_name: kubelet\n"
        "    honor_labels: true\n"
        f"    scrape_interval: {loadmodel_scrape_interval()}\n"
        "    metrics_path: /metrics/cadvisor\n"
        "    relabel_configs: [{source_labels: [__metrics_path__], target_label: metrics_path}]\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{PORTS['loadmodel']}']}}]\n"
        "  - job_name: kube-state-metrics\n"
        "    honor_labels: true\n"
        f"    scrape_interval: {loadmodel_scrape_interval()}\n"
        "    metrics_path: /kube-state-metrics/metrics\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{PORTS['loadmodel']}']}}]\n"
        "  - job_name: metricsched\n"
        "    file_sd_configs: [{files: ['" + str(STATE / "scrape-operator.json") + "']}]\n"
    )


def prometheus_config() -> Path:
    path = STATE / "prometheus.yml"
    path.write_text(prometheus_config_text())
    sd = STATE / "scrape-operator.json"
    if not sd.exists():
        sd.write_text("[]")
    return path


def apply_prometheus_config() -> None:
    """Rewrite the running Prometheus's configuration if it changed (a different load
    model scrape interval asked of a reused cluster) and have Prometheus reload it."""
    path = STATE / "prometheus.yml"
    if path.exists() and path.read_text() == prometheus_config_text():
        return
    prometheus_config()
    url = f"http://127.0.0.1:{PORTS['prometheus']}/-/reload"
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as r:
        r.read()
    log(f"Prometheus reloaded: the load model is scraped every {loadmodel_scrape_interval()}")


# kube-apiserver's audit log: who bound which pod, who wrote which Lease and which policy
# status, and when (the fault suite's checker reads it; see tests/faults/audit.py). Node
# leases (kwok renews one per node) and kube-system are left out: they are most of the
# Lease writes and nobody asks about them.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    namespaces: [kube-node-lease, kube-system]
  - level: Metadata
    verbs: [create]
    resources: [{group: "", resources: [pods/binding]}]
  # Request level: the body says who the Lease names as holder and for how long.
  - level: Request
    verbs: [create, update, patch]
    resources: [{group: coordination.k8s.io, resources: [leases]}]
  - level: Metadata
    verbs: [update, patch]
    resources: [{group: metricsched.io, resources: [schedulingpolicies/status]}]
  - level: None
"""


def loadmodel_record() -> Path:
    """The load model's record (JSON lines: ticks, binds and pods gone; see hack/loadmodel.py)."""
    return STATE / "loadmodel.jsonl"


def audit_log() -> Path:
    """The current audit log file; rotated ones sit beside it (audit-<time>.log)."""
    return STATE / "audit" / "audit.log"


def audit_policy() -> Path:
    path = STATE / "audit-policy.yaml"
    path.write_text(AUDIT_POLICY)
    audit_log().parent.mkdir(parents=True, exist_ok=True)
    return path


# --- the components: how each is started and when it is ready ------------------------


@dataclasses.dataclass(frozen=True)
class Component:
    """One process of the local control plane: its command line and its readiness check."""

    argv: Callable[[Path, int, bool], list[str]]  # (tools bin dir, nodes, quiet)
    ready: Callable[[int], None]  # waits until it serves (nodes: how many kwok nodes)
    extra_ports: tuple[str, ...] = ()  # PORTS keys it binds besides its own


def _etcd_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    p = PORTS
    return [
        str(bin_dir / "etcd"),
        "--name=metricsched",
        f"--data-dir={STATE / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
        f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
        f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
        f"--initial-cluster=metricsched=http://127.0.0.1:{p['etcd-peer']}",
        "--unsafe-no-fsync=true",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def _etcd_ready(nodes: int) -> None:
    p = PORTS
    name = "etcd"
    wait_for(
        "etcd health",
        lambda: http_ok(f"http://127.0.0.1:{p['etcd']}/health"),
        timeout=30,
        name=name,
    )


def apiserver_sni_file() -> Path:
    """Extra serving certificates of kube-apiserver, one ``cert,key:name`` a line
    (``--tls-sni-cert-key``), read at each start: a client that names the server by
    ``name`` gets that certificate, every other client the default one. The fault suite
    rotates the CA its replicas trust this way, leaving every other client's alone."""
    return STATE / "apiserver-sni"


def _sni_flags() -> list[str]:
    path = apiserver_sni_file()
    if not path.exists():
        return []
    return [
        f"--tls-sni-cert-key={line.strip()}"
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def _kube_apiserver_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    pki = STATE / "pki"
    p = PORTS
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
        f"--secure-port={p['kube-apiserver']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--token-auth-file={pki / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        "--event-ttl=1h",
        f"--audit-policy-file={audit_policy()}",
        f"--audit-log-path={audit_log()}",
        "--audit-log-format=json",
        "--audit-log-maxsize=100",  # MB per file, then rotated
        "--audit-log-maxbackup=5",
        # The aggregation layer (APIServices such as metrics.k8s.io): harmless without one.
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        "--v=1",
        *_sni_flags(),
    ]


def _kube_apiserver_ready(nodes: int) -> None:
    name = "kube-apiserver"
    wait_for(
        "kube-apiserver /readyz",
        lambda: api("GET", "/readyz", timeout=3) == "ok",
        timeout=90,
        name=name,
    )


def kcm_controllers(version: str | None) -> str:
    """Every controller but node IPAM (kwok assigns pod CIDRs) and, where
    kube-controller-manager still has it (before v1.37, which dropped it from its known
    controllers and refuses to start when it is named), the cloud node lifecycle one."""
    minor = int(version.split(".")[1]) if version else 35
    return "*,-node-ipam-controller" + (",-cloud-node-lifecycle-controller" if minor < 37 else "")


def _kube_controller_manager_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    pki = STATE / "pki"
    p = PORTS
    kubeconfig = str(STATE / "kubeconfig")
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--secure-port={p['kube-controller-manager']}",
        "--bind-address=127.0.0.1",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        f"--controllers={kcm_controllers(read_version_setting())}",
        *([f"--node-monitor-grace-period={QUIET_GRACE_PERIOD}"] if quiet else []),
        "--v=1",
    ]


def _kube_controller_manager_ready(nodes: int) -> None:
    p = PORTS
    name = "kube-controller-manager"
    wait_for(
        "kube-controller-manager /healthz",
        lambda: http_ok(f"https://127.0.0.1:{p['kube-controller-manager']}/healthz", insecure=True),
        timeout=60,
        name=name,
    )


def _kwok_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    p = PORTS
    kubeconfig = str(STATE / "kubeconfig")
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={kubeconfig}",
        f"--config={kwok_config(bin_dir, quiet)}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={kwok_node.SELECTOR}",
        "--cidr=10.244.0.0/16",
        "--node-ip=10.240.0.1",
        f"--node-lease-duration-seconds={0 if quiet else 40}",
        f"--server-address=127.0.0.1:{p['kwok']}",
    ]


def _kwok_ready(nodes: int) -> None:
    ensure_nodes(nodes)
    wait_nodes_ready(nodes)


def _exporter_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    p = PORTS
    return [
        sys.executable,
        str(ROOT / "hack" / "exporter.py"),
        f"--port={p['exporter']}",
        f"--state={STATE / 'exporter.json'}",
        f"--nodes={nodes}",
    ]


def _serves_metrics(name: str, what: str) -> Callable[[int], None]:
    """The readiness check of a component that is ready once its /metrics answers."""

    def ready(nodes: int) -> None:
        wait_for(
            f"{what} /metrics",
            lambda: http_ok(f"http://127.0.0.1:{PORTS[name]}/metrics"),
            timeout=30,
            name=name,
        )

    return ready


def _loadmodel_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    p = PORTS
    kubeconfig = str(STATE / "kubeconfig")
    return [
        sys.executable,
        str(ROOT / "hack" / "loadmodel.py"),
        f"--kubeconfig={kubeconfig}",
        f"--port={p['loadmodel']}",
        f"--record={loadmodel_record()}",
        "--seed=1",
    ]


def _prometheus_argv(bin_dir: Path, nodes: int, quiet: bool) -> list[str]:
    p = PORTS
    return [
        prometheus_binary(),
        f"--config.file={prometheus_config()}",
        f"--storage.tsdb.path={STATE / 'prometheus'}",
        f"--web.listen-address=127.0.0.1:{p['prometheus']}",
        "--storage.tsdb.retention.time=2h",
        "--web.enable-lifecycle",
        "--log.level=warn",
    ]


def _prometheus_ready(nodes: int) -> None:
    p = PORTS
    name = "prometheus"
    wait_for(
        "Prometheus ready",
        lambda: http_ok(f"http://127.0.0.1:{p['prometheus']}/-/ready"),
        timeout=60,
        name=name,
    )
    wait_for(
        "Prometheus to scrape the exporter",
        lambda: len(prometheus_series("node_latency_seconds")) >= nodes,
        timeout=60,
        name=name,
    )


# Start order; "down" stops in reverse.
TABLE: dict[str, Component] = {
    "etcd": Component(_etcd_argv, _etcd_ready, extra_ports=("etcd-peer",)),
    "kube-apiserver": Component(_kube_apiserver_argv, _kube_apiserver_ready),
    "kube-controller-manager": Component(
        _kube_controller_manager_argv, _kube_controller_manager_ready
    ),
    "kwok": Component(_kwok_argv, _kwok_ready),
    "exporter": Component(_exporter_argv, _serves_metrics("exporter", "exporter")),
    "loadmodel": Component(_loadmodel_argv, _serves_metrics("loadmodel", "load model")),
    "prometheus": Component(_prometheus_argv, _prometheus_ready),
}
COMPONENTS = list(TABLE)


def argv_for(name: str, bin_dir: Path, nodes: int, quiet: bool = False) -> list[str]:
    if name not in TABLE:
        raise ClusterError(f"unknown component {name}")
    return TABLE[name].argv(bin_dir, nodes, quiet)


def wait_ready(name: str, nodes: int) -> None:
    TABLE[name].ready(nodes)


def prometheus_series(query: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{PORTS['prometheus']}/api/v1/query?" + urllib.parse.urlencode(
        {"query": query}
    )
    with urllib.request.urlopen(url, timeout=5) as r:
        return list(json.loads(r.read())["data"]["result"])


def start_component(name: str, bin_dir: Path, nodes: int) -> None:
    if alive(name):
        return
    stop(name)  # clears a stale pid file
    check_port(name, PORTS[name])
    for extra in TABLE[name].extra_ports:
        check_port(f"{name} ({extra})", PORTS[extra])
    spawn(name, argv_for(name, bin_dir, nodes, read_quiet_setting()))
    t0 = time.monotonic()
    wait_ready(name, nodes)
    log(f"{name} ready on 127.0.0.1:{PORTS[name]} ({time.monotonic() - t0:.1f}s)")


def healthy(nodes: int) -> bool:
    if not all(alive(c) for c in COMPONENTS):
        return False
    try:
        return (
            api("GET", "/readyz", timeout=3) == "ok"
            and http_ok(f"http://127.0.0.1:{PORTS['prometheus']}/-/ready")
            and ready_nodes() >= nodes
        )
    except Exception:
        return False


def read_quiet_setting() -> bool:
    """Whether the cluster in STATE was started with --quiet-nodes."""
    return (STATE / "quiet-nodes").exists()


def write_quiet_setting(quiet: bool) -> None:
    if quiet:
        (STATE / "quiet-nodes").write_text("1\n")
    else:
        (STATE / "quiet-nodes").unlink(missing_ok=True)


def read_version_setting() -> str | None:
    """The Kubernetes version the cluster in STATE was started with (None: unknown)."""
    try:
        return (STATE / "kube-version").read_text().strip() or None
    except OSError:
        return None


def read_nodes_setting() -> int:
    try:
        return int((STATE / "nodes").read_text())
    except (OSError, ValueError):
        return DEFAULT_NODES


# --- commands ------------------------------------------------------------------------------


def cmd_up(nodes: int, quiet: bool = False) -> None:
    t0 = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    version = wanted_kube_version()
    bin_dir = tools_bin(build=True, version=version)
    running = healthy(0)
    if running and read_version_setting() not in (None, version):
        log(f"the running cluster runs Kubernetes {read_version_setting()}; now {version}")
        cmd_down(quiet=True)
        running = False
    if running and read_quiet_setting() != quiet:
        log(
            f"the running cluster was started {'with' if read_quiet_setting() else 'without'} "
            "--quiet-nodes; restarting it"
        )
        cmd_down(quiet=True)
        running = False
    if running:
        if nodes > read_nodes_setting():
            (STATE / "nodes").write_text(str(nodes))
            stop("exporter")  # restarted below with the larger node range
            start_component("exporter", bin_dir, nodes)
        ensure_nodes(nodes)
        wait_nodes_ready(nodes)
        (STATE / "nodes").write_text(str(max(nodes, read_nodes_setting())))
        if os.environ.get(LOADMODEL_SCRAPE_ENV) or os.environ.get(RULE_INTERVAL_ENV):
            apply_prometheus_config()
        log(f"reusing the healthy cluster in {STATE}")
    else:
        if any(read_pid(c) is not None for c in COMPONENTS):
            log("found an unhealthy or half-started cluster; stopping it first")
            cmd_down(quiet=True)
        prometheus_binary()  # fail early with the install hint
        make_pki()
        make_front_proxy_pki()
        write_kubeconfig()
        (STATE / "nodes").write_text(str(nodes))
        write_quiet_setting(quiet)
        (STATE / "kube-version").write_text(version + "\n")
        for name in COMPONENTS:
            start_component(name, bin_dir, nodes)
    write_env(bin_dir)
    log(f"cluster up in {time.monotonic() - t0:.1f}s; `source {STATE / 'env'}` to use it")


def cmd_down(quiet: bool = False) -> None:
    any_stopped = stop("metrics-server")
    for name in reversed(COMPONENTS):
        if stop(name):
            any_stopped = True
            if not quiet:
                log(f"stopped {name}")
    # Data is per cluster: a new `up` starts from an empty etcd and Prometheus.
    for sub in (
        "etcd",
        "prometheus",
        "exporter.json",
        "loadmodel.jsonl",
        "pids",
        "audit",
        "quiet-nodes",
    ):
        target = STATE / sub
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    if not quiet:
        log("cluster down" if any_stopped else "nothing was running")


def cmd_status() -> int:
    ok = True
    for name in COMPONENTS:
        pid = read_pid(name)
        state = "running" if alive(name) else ("dead (stale pid file)" if pid else "stopped")
        ok = ok and state == "running"
        print(f"{name:26} {state:22} 127.0.0.1:{PORTS[name]}  pid={pid or '-'}")
    if ok:
        try:
            print(f"nodes Ready: {ready_nodes()}")
        except Exception as e:
            print(f"API not answering: {e}")
            ok = False
    print(f"kubeconfig: {STATE / 'kubeconfig'}")
    return 0 if ok else 1


def restart(name: str, *, hard: bool, down_for: float) -> None:
    """Take one component down (SIGKILL if hard), keep it down, start it and wait ready."""
    if hard:
        kill(name)
    else:
        stop(name)
    log(f"{name} {'killed' if hard else 'stopped'}; down for {down_for:g}s")
    time.sleep(down_for)
    # A killed process drops its memory before its sockets: the port frees a moment later.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not port_free(PORTS[name]):
        time.sleep(0.05)
    start_component(
        name, tools_bin(build=False, version=read_version_setting()), read_nodes_setting()
    )


# --- metrics-server (opt-in) -----------------------------------------------------------
# The real metrics-server serving metrics.k8s.io through the API server's aggregation
# layer, scraping kwok's emulated kubelets: a node opts in with an address of type
# ExternalDNS (localhost, where kwok serves) and the annotation naming its path on kwok
# (``metrics_server_node_fields``); the other nodes are skipped (no such address).

KWOK_METRICS_FILES = ("kwok-metrics-resource.yaml", "kwok-usage-from-annotation.yaml")
METRICS_APISERVICE = "v1beta1.metrics.k8s.io"
# metrics-server keeps a node's usage once it has two scrapes this far apart (its minimum).
METRICS_RESOLUTION = "10s"


def metrics_server_dir(*, build: bool) -> Path | None:
    """Where hack/build-metrics-server.sh caches metrics-server and kwok's metric files;
    None when not built (and ``build`` is False)."""
    script = ROOT / "hack" / "build-metrics-server.sh"
    if build:
        out = subprocess.run([str(script)], check=False, capture_output=True, text=True)
        if out.returncode != 0:
            raise ClusterError(f"building metrics-server failed:\n{out.stderr[-2000:]}")
        return Path(out.stdout.strip().splitlines()[-1])
    if subprocess.run([str(script), "--check"], check=False).returncode != 0:
        return None
    out = subprocess.run([str(script), "--print"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _metrics_server_argv(bin_path: Path) -> list[str]:
    kubeconfig = str(STATE / "kubeconfig")
    return [
        str(bin_path),
        f"--secure-port={PORTS['metrics-server']}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={STATE / 'metrics-server'}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # kwok serves plain HTTP on its server port, one path per node
        f"--kubelet-port={PORTS['kwok']}",
        "--deprecated-kubelet-completely-insecure",
        "--kubelet-preferred-address-types=ExternalDNS",
        "--kubelet-request-timeout=5s",
        f"--metric-resolution={METRICS_RESOLUTION}",
        "--v=1",
    ]


def _metrics_api_serves() -> bool:
    try:
        return api("GET", "/apis/metrics.k8s.io/v1beta1/nodes", timeout=3) is not None
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _apiserver_aggregates() -> bool:
    """Whether the running kube-apiserver was started with the front proxy's flags."""
    pid = read_pid("kube-apiserver")
    try:
        return (
            pid is not None
            and b"--proxy-client-cert-file" in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    except OSError:
        return False


def cmd_metrics_server_up() -> None:
    """Build metrics-server if needed, give kwok its resource metrics (a kwok restart if
    it was started without them), start metrics-server and register its APIService;
    returns once the API server serves metrics.k8s.io."""
    if not healthy(0):
        raise ClusterError("the cluster is not up; run `hack/cluster.py up` first")
    t0 = time.monotonic()
    found = metrics_server_dir(build=True)
    assert found is not None
    if not _apiserver_aggregates():
        # A cluster started before kube-apiserver had the aggregation flags.
        make_front_proxy_pki()
        restart("kube-apiserver", hard=False, down_for=0.0)
    if "kind: Metric" not in (STATE / "kwok.yaml").read_text().splitlines():
        restart("kwok", hard=False, down_for=0.0)
    if not alive("metrics-server"):
        stop("metrics-server")  # clears a stale pid file
        check_port("metrics-server", PORTS["metrics-server"])
        (STATE / "metrics-server").mkdir(exist_ok=True)
        spawn("metrics-server", _metrics_server_argv(found / "metrics-server"))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "metrics-server", "namespace": "kube-system"},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": METRICS_APISERVICE},
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "service": {
                "namespace": "kube-system",
                "name": "metrics-server",
                "port": PORTS["metrics-server"],
            },
            "insecureSkipTLSVerify": True,  # metrics-server's self-signed serving certificate
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    for path, body in (
        ("/api/v1/namespaces/kube-system/services", service),
        ("/apis/apiregistration.k8s.io/v1/apiservices", apiservice),
    ):
        try:
            api("POST", path, body)
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise
    wait_for("metrics.k8s.io served", _metrics_api_serves, timeout=60, name="metrics-server")
    log(f"metrics-server serving metrics.k8s.io ({time.monotonic() - t0:.1f}s)")


def cmd_metrics_server_down() -> None:
    """Unregister the APIService and stop metrics-server (kwok keeps its metric routes)."""
    for path in (
        f"/apis/apiregistration.k8s.io/v1/apiservices/{METRICS_APISERVICE}",
        "/api/v1/namespaces/kube-system/services/metrics-server",
    ):
        try:
            api("DELETE", path)
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
    stop("metrics-server")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--nodes", type=int, default=int(os.environ.get("NODES", DEFAULT_NODES)))
    up.add_argument(
        "--quiet-nodes",
        action="store_true",
        help="benchmark only: no node Leases, rare node heartbeats, 1 h node grace period",
    )
    sub.add_parser("down")
    sub.add_parser("status")
    for verb in ("start", "stop", "kill"):
        sp = sub.add_parser(verb)
        sp.add_argument("component", choices=COMPONENTS)
    rs = sub.add_parser("restart", help="stop (or --kill) a component, wait, start it again")
    rs.add_argument("component", choices=COMPONENTS)
    rs.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    rs.add_argument("--down-for", type=float, default=0.0, help="seconds to stay down")
    ms = sub.add_parser("metrics-server", help="the real metrics-server behind metrics.k8s.io")
    ms.add_argument("action", choices=("up", "down"))
    args = parser.parse_args(argv)
    try:
        if args.cmd == "up":
            cmd_up(args.nodes, args.quiet_nodes)
        elif args.cmd == "down":
            cmd_down()
        elif args.cmd == "status":
            return cmd_status()
        elif args.cmd == "stop":
            stop(args.component)
        elif args.cmd == "kill":
            kill(args.component)
        elif args.cmd == "metrics-server":
            (cmd_metrics_server_up if args.action == "up" else cmd_metrics_server_down)()
        elif args.cmd == "restart":
            restart(args.component, hard=args.kill, down_for=args.down_for)
        elif args.cmd == "start":
            start_component(
                args.component,
                tools_bin(build=False, version=read_version_setting()),
                read_nodes_setting(),
            )
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
