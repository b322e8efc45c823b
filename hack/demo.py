#!/usr/bin/env python3
"""`make demo`: pods placed by metrics, on the local control plane.

1. brings the local control plane up (or reuses it) and installs the CRD;
2. runs the operator (`metricsched run`) against it and the cluster's Prometheus;
3. applies manifests/examples/latency-policy.yaml and a Deployment of 6 web pods;
4. prints where they went, shifts latency half-way (the best node becomes the worst),
   scales to 12 and prints again: the new pods follow the metric;
5. waits for one new pod's Scheduled event (the events API, polled for up to 30 s) and
   prints its `kubectl describe`;
6. a threshold alone, nothing declared about pod usage: three nodes whose cpu the load
   model derives from the pods on them, served as node-exporter and cAdvisor serve it
   (counters, read through kube-prometheus's recording rule and a per-pod rate), a
   Deployment whose pods request 50m and use 0.5 cores, scaled from 2 to 14 at once: its
   measured usage keeps every node under 80 % and the pods that do not fit wait, where a
   requests-only scheduler would bind all 14 and run a node at about 1.1;
7. cleans up on exit or Ctrl-C (operator stopped, demo namespace deleted, and the
   cluster stopped if the demo started it; DEMO_KEEP=1 keeps everything).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import kwok_node  # hack/kwok_node.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".cluster"
NS = "metricsched-demo"
PY = sys.executable
LOADMODEL = "loadmodel.metricsched.io/"
# Act 6's nodes: 4 cpu each, background (things no pod explains) 0.20, 0.50, 0.30: room
# for 2.4 + 1.2 + 2.0 = 5.6 cores under 80 %, 11 of its pods at 0.5 cores.
CPU_NODES = [("demo-cpu-1", 0.20), ("demo-cpu-2", 0.50), ("demo-cpu-3", 0.30)]
CPU_POOL = "metricsched.io/demo-pool"
# The test bed's recording rules rate over [30s] (hack/prometheus-rules.yml says why): the
# operator's per-pod query uses the same window, and a sibling counts once bound 20 s.
POD_USAGE_FLAGS = (
    "--pod-usage-cpu-query=sum by (namespace, pod) (max by (namespace, pod, container) "
    '(rate(container_cpu_usage_seconds_total{container!="", image!=""}[30s])))',
    "--pod-usage-memory-query=",
    "--pod-usage-settle-time=20s",
)


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def env() -> dict[str, str]:
    out = {}
    for line in (STATE / "env").read_text().splitlines():
        k, v = line.removeprefix("export ").split("=", 1)
        out[k] = v.strip('"')
    return out


def kubectl(*args: str, check: bool = True, stdin: str | None = None) -> str:
    e = env()
    res = subprocess.run(
        [f"{e['METRICSCHED_TOOLS_BIN']}/kubectl", f"--kubeconfig={e['KUBECONFIG']}", *args],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
    )
    if check and res.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {res.stderr}")
    return res.stdout


def set_latency(values: dict[str, float]) -> None:
    body = json.dumps({"metric": "node_latency_seconds", "values": values}).encode()
    req = urllib.request.Request(
        env()["METRICSCHED_EXPORTER_URL"] + "/values",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=5).read()


def promql(query: str) -> dict[str, float]:
    url = env()["PROMETHEUS_URL"] + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as r:
        result = json.loads(r.read())["data"]["result"]
    return {s["metric"].get("node", "?"): float(s["value"][1]) for s in result}


def wait(what: str, fn: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            got = fn()
            if got:
                return got
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def scheduled_event(pod: str, timeout: float = 30) -> dict[str, Any]:
    """The pod's Scheduled event, polled from the events API until it exists (at most
    `timeout` seconds). The scheduler writes it after the Binding, so a pod can show its
    node before its event: a describe at that moment shows no events."""
    selector = f"involvedObject.kind=Pod,involvedObject.name={pod},reason=Scheduled"

    def found() -> dict[str, Any] | None:
        out = kubectl("get", "events", "-n", NS, "--field-selector", selector, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items[0] if items else None

    event: dict[str, Any] = wait(f"the Scheduled event of {pod}", found, timeout=timeout)
    return event


def placement() -> dict[str, str]:
    pods = json.loads(kubectl("get", "pods", "-n", NS, "-l", "app=web", "-o", "json"))["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in pods}


def print_table(before: dict[str, str] | None = None) -> dict[str, str]:
    latency = promql("node_latency_seconds")
    now = placement()
    per_node: dict[str, list[str]] = {}
    for pod, node in now.items():
        per_node.setdefault(node or "(pending)", []).append(pod)
    print(f"{'NODE':10} {'LATENCY':>8}  {'PODS':>4}  NEW")
    for node in sorted(set(latency) | set(per_node), key=lambda n: (n == "(pending)", n)):
        pods = per_node.get(node, [])
        new = [p for p in pods if before is not None and p not in before]
        lat = f"{latency[node]:.3f}" if node in latency else "-"
        print(f"{node:10} {lat:>8}  {len(pods):>4}  {'+' * len(new)}")
    return now


def cpu_node(name: str, index: int, background: float) -> dict[str, Any]:
    """A kwok node the load model serves (its cpu is the background plus its pods' usage),
    kept for act 6's pods by a taint."""
    return kwok_node.Node(
        name=name,
        capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
        labels={CPU_POOL: "cpu", LOADMODEL + "modelled": "true"},
        annotations={
            LOADMODEL + "background-cpu": str(background),
            LOADMODEL + "background-memory": "0.1",
        },
        spec={"taints": [{"key": CPU_POOL, "value": "cpu", "effect": "NoSchedule"}]},
        addresses={"InternalIP": f"10.252.0.{index + 1}", "Hostname": name},
    ).body()


def api_deployment(replicas: int) -> dict[str, Any]:
    """Pods that request 50m and use 0.5 cores (the load model's annotation): what a
    requests-based scheduler cannot see."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {
                    "labels": {"app": "api"},
                    "annotations": {LOADMODEL + "cpu": "0.5", LOADMODEL + "ramp": "5"},
                },
                "spec": {
                    "schedulerName": "metricsched",
                    "nodeSelector": {CPU_POOL: "cpu"},
                    "tolerations": [{"key": CPU_POOL, "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "api",
                            "image": "registry.invalid/api:1",
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def node_cpu() -> dict[str, float]:
    """Each act-6 node's cpu utilisation as the recipe's recording rule reads it."""
    by_ip = {f"10.252.0.{i + 1}:9100": name for i, (name, _) in enumerate(CPU_NODES)}
    url = (
        env()["PROMETHEUS_URL"]
        + "/api/v1/query?"
        + urllib.parse.urlencode(
            {"query": 'instance:node_cpu_utilisation:rate5m{job="node-exporter"}'}
        )
    )
    with urllib.request.urlopen(url, timeout=5) as r:
        result = json.loads(r.read())["data"]["result"]
    return {
        by_ip[s["metric"]["instance"]]: float(s["value"][1])
        for s in result
        if s["metric"].get("instance") in by_ip
    }


def api_pods() -> dict[str, str]:
    pods = json.loads(kubectl("get", "pods", "-n", NS, "-l", "app=api", "-o", "json"))["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in pods}


def print_cpu(note: str) -> None:
    cpu, pods = node_cpu(), api_pods()
    print(f"{'NODE':12} {'CPU':>5}  API PODS   ({note})")
    for name, _ in CPU_NODES:
        count = sum(1 for node in pods.values() if node == name)
        print(f"{name:12} {cpu.get(name, float('nan')):5.2f}  {count:>8}")
    pending = sum(1 for node in pods.values() if not node)
    if pending:
        print(f"{'(pending)':12} {'':5}  {pending:>8}")


def threshold_only() -> None:
    say("A threshold alone: 3 nodes of 4 cpu whose usage Prometheus reads from counters")
    for index, (name, background) in enumerate(CPU_NODES):
        kubectl("apply", "-f", "-", stdin=json.dumps(cpu_node(name, index, background)))
    policy = ROOT / "manifests" / "examples" / "node-exporter-cpu-memory-policy.yaml"
    print(kubectl("apply", "-n", NS, "-f", str(policy)).strip())
    print(
        "Its cpu metric says only `threshold: {max: 0.8}`, nothing about what pods use: "
        "kube-prometheus's instance:node_cpu_utilisation:rate5m over node-exporter's "
        "counters."
    )
    wait(
        "Prometheus to read the 3 nodes",
        lambda: len(node_cpu()) == 3 and all(v < 0.6 for v in node_cpu().values()),
        timeout=120,
    )
    say("Deployment api: 2 pods requesting 50m and using 0.5 cores each")
    kubectl("apply", "-n", NS, "-f", "-", stdin=json.dumps(api_deployment(2)))
    wait("2 api pods placed", lambda: (p := api_pods()) and len(p) == 2 and all(p.values()))
    print("Waiting for cAdvisor's counters of those 2 pods to show 0.5 cores each (~50 s)")
    time.sleep(50)
    print_cpu("before the scale-out")

    say("Scaled to 14 at once, as an autoscaler would: 50m each by requests, 7 cores in use")
    kubectl("scale", "-n", NS, "deployment/api", "--replicas=14")
    wait(
        "every api pod placed or refused",
        lambda: (
            len(p := api_pods()) == 14
            and all(
                node
                or "exceeded threshold"
                in kubectl(
                    "get", "events", "-n", NS, "--field-selector",
                    f"involvedObject.name={pod},reason=FailedScheduling", "-o", "json",
                )
                for pod, node in p.items()
            )
        ),
        timeout=90,
    )  # fmt: skip
    placed = api_pods()
    newest = sorted(pod for pod, node in placed.items() if node)[-1]
    event = scheduled_event(newest)
    print(f"{newest}: {event['message']}")
    print(
        "Each new pod counted 0.5 cores, its siblings' measured usage, until its own usage "
        "showed in a sample (metricsched explain lists the pods still counted)."
    )
    print("Waiting for the new pods' usage to show in Prometheus (~45 s)")
    time.sleep(45)
    print_cpu("after: the pods that did not fit wait, FailedScheduling says why")
    print(
        "A requests-only scheduler would have bound all 14, 4 or 5 a node (50m each fits "
        "anywhere): demo-cpu-2 would run at about 1.1 and demo-cpu-3 at about 0.9."
    )


def main() -> int:
    started_cluster = (
        subprocess.run(
            [PY, str(ROOT / "hack" / "cluster.py"), "status"], capture_output=True, check=False
        ).returncode
        != 0
    )
    say("Local control plane (etcd, kube-apiserver, KCM, kwok nodes, Prometheus)")
    subprocess.run([PY, str(ROOT / "hack" / "cluster.py"), "up"], check=True)
    e = env()
    operator: subprocess.Popen[bytes] | None = None

    def cleanup(*_: Any) -> None:
        if os.environ.get("DEMO_KEEP") == "1":
            print(
                f"\nDEMO_KEEP=1: leaving the operator (pid {operator.pid if operator else '-'})"
                f", namespace {NS} and the cluster running"
            )
            return
        say("Cleaning up")
        if operator is not None and operator.poll() is None:
            operator.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                operator.wait(timeout=15)
        kubectl("delete", "namespace", NS, "--wait=false", check=False)
        if started_cluster:
            subprocess.run([PY, str(ROOT / "hack" / "cluster.py"), "down"], check=False)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        say("Installing the SchedulingPolicy CRD")
        print(kubectl("apply", "-f", str(ROOT / "crds")).strip())
        wait(
            "CRD established",
            lambda: (
                "True"
                in kubectl(
                    "get",
                    "crd",
                    "schedulingpolicies.metricsched.io",
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                )
            ),
        )
        kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true")
        kubectl("create", "namespace", NS)

        say("Starting the operator (log: .cluster/logs/operator.log)")
        logf = (STATE / "logs" / "operator.log").open("ab")
        operator = subprocess.Popen(
            [
                str(Path(PY).parent / "metricsched"),
                "run",
                f"--kubeconfig={e['KUBECONFIG']}",
                f"--prometheus-url={e['PROMETHEUS_URL']}",
                "--refresh-interval=3s",
                "--metrics-port=0",
                "--health-port=0",
                "--bind-address=127.0.0.1",
                "--log-format=text",
                *POD_USAGE_FLAGS,
            ],
            stdout=logf,
            stderr=subprocess.STDOUT,
        )

        say("Latency per node: node-2 is the fastest")
        set_latency(
            {
                "node-1": 0.20,
                "node-2": 0.05,
                "node-3": 0.30,
                "node-4": 0.12,
                "node-5": 0.08,
                "node-6": 0.02,
            }
        )
        wait("Prometheus to see it", lambda: promql("node_latency_seconds").get("node-2") == 0.05)
        print("node-5 is tainted (dedicated=gpu) and node-6 cordoned: web pods cannot go there")
        print(
            kubectl(
                "apply",
                "-n",
                NS,
                "-f",
                str(ROOT / "manifests" / "examples" / "latency-policy.yaml"),
            ).strip()
        )
        time.sleep(4)  # one refresh interval, so the policy's metric is cached

        say("6 web pods (Deployment, schedulerName: metricsched)")
        print(
            kubectl(
                "apply",
                "-n",
                NS,
                "-f",
                str(ROOT / "manifests" / "examples" / "web-deployment.yaml"),
            ).strip()
        )
        wait("6 pods placed", lambda: (p := placement()) and len(p) == 6 and all(p.values()))
        first = print_table()
        print(
            "Pods favour node-2; the burst penalty (10 points per pod bound in the last 30s)"
            " spreads a burst before the metric can react."
        )

        say("Latency shifts: node-2 degrades to 0.45s, node-3 becomes the fastest (0.01s)")
        set_latency({"node-2": 0.45, "node-3": 0.01})
        wait("Prometheus to see it", lambda: promql("node_latency_seconds").get("node-3") == 0.01)
        time.sleep(4)  # one refresh interval of the operator
        kubectl("scale", "-n", NS, "deployment/web", "--replicas=12")
        wait("12 pods placed", lambda: (p := placement()) and len(p) == 12 and all(p.values()))
        second = print_table(first)
        new = {pod: node for pod, node in second.items() if pod not in first}
        on_slow = sum(1 for node in new.values() if node == "node-2")
        on_best = sum(1 for node in new.values() if node == "node-3")
        print(
            f"Of the 6 new pods (+), {on_best} went to node-3 (now fastest) and {on_slow} to "
            "node-2 (now slowest): they followed the metric."
        )

        say("kubectl describe of a new pod: the Scheduled event explains the decision")
        newest = sorted(new, key=lambda pod: (new[pod] != "node-3", pod))[0]
        scheduled_event(newest)
        describe = kubectl("describe", "pod", "-n", NS, newest)
        print(describe[describe.find("Events:") :].rstrip() if "Events:" in describe else describe)
        time.sleep(3.5)  # the policy's status counters are written at each refresh
        say("kubectl get spol")
        print(kubectl("get", "spol", "-n", NS, "-o", "wide").rstrip())
        threshold_only()
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(SystemExit):
            for name, _ in CPU_NODES:
                kubectl("delete", "node", name, "--ignore-not-found", "--wait=false", check=False)
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
