"""The independent checker: its own watch and LISTs, none of the operator's code.

It answers, for one scenario:
- pods lost: a created pod of the scenario that is, after a generous wait, neither bound
  to a node that exists nor deleted by the scenario, unless the scenario made it
  unschedulable on purpose;
- overcommitted nodes: the requests of the bound, non-terminal pods on a node exceed its
  allocatable cpu, memory or pod count (quantities parsed here, not by the operator);
- when each pod was first seen bound (its watch), for the recovery times of the report.

Bindings by a replica that did not hold the Lease come from the audit log (audit.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import kubernetes

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
}


def quantity(text: str | int | float) -> Decimal:
    """A Kubernetes quantity ("250m", "1Gi", "2", "1e3") as a Decimal of base units."""
    s = str(text).strip()
    for suffix in ("Ki", "Mi", "Gi", "Ti", "n", "u", "m", "k", "M", "G", "T"):
        if s.endswith(suffix):
            return Decimal(s[: -len(suffix)]) * _SUFFIX[suffix]
    return Decimal(s)


RESOURCES = ("cpu", "memory")


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """Effective requests: max(sum of containers, largest init container) + overhead."""
    spec = pod.get("spec") or {}
    total = {r: Decimal(0) for r in RESOURCES}
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        for r in RESOURCES:
            if r in req:
                total[r] += quantity(req[r])
    for c in spec.get("initContainers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        for r in RESOURCES:
            if r in req:
                total[r] = max(total[r], quantity(req[r]))
    for r, v in (spec.get("overhead") or {}).items():
        if r in total:
            total[r] += quantity(v)
    return total


@dataclasses.dataclass(frozen=True)
class Overcommit:
    node: str
    resource: str
    requested: Decimal
    allocatable: Decimal


def overcommitted(
    nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]
) -> list[Overcommit]:
    """Nodes whose bound non-terminal pods request more than the node allocates."""
    alloc: dict[str, dict[str, Decimal]] = {}
    for n in nodes:
        a = (n.get("status") or {}).get("allocatable") or {}
        alloc[n["metadata"]["name"]] = {
            "cpu": quantity(a.get("cpu", "0")),
            "memory": quantity(a.get("memory", "0")),
            "pods": quantity(a.get("pods", "0")),
        }
    used: dict[str, dict[str, Decimal]] = {name: {} for name in alloc}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        phase = (p.get("status") or {}).get("phase")
        if not node or node not in used or phase in ("Succeeded", "Failed"):
            continue
        u = used[node]
        for r, v in pod_requests(p).items():
            u[r] = u.get(r, Decimal(0)) + v
        u["pods"] = u.get("pods", Decimal(0)) + 1
    out = []
    for name, a in alloc.items():
        for r, cap in a.items():
            got = used[name].get(r, Decimal(0))
            if got > cap:
                out.append(Overcommit(name, r, got, cap))
    return out


class PodWatch:
    """Its own watch on the scenario's namespace: when was each pod first seen bound."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.core: Any = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.bound_at: dict[str, float] = {}  # pod name -> time.time() first seen bound
        self.node_of: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checker-watch", daemon=True)

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _see(self, pod: Any) -> None:
        name = pod.metadata.name
        node = pod.spec.node_name
        if not node:
            return
        if name not in self.bound_at:
            self.bound_at[name] = time.time()
            self.node_of[name] = node

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                lst = self.core.list_namespaced_pod(self.namespace, _request_timeout=30)
                for p in lst.items:
                    self._see(p)
                rv = lst.metadata.resource_version
                w: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
                for ev in w.stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=rv,
                    timeout_seconds=5,
                    _request_timeout=15,
                ):
                    self._see(ev["object"])
                    if self._stop.is_set():
                        w.stop()
            except Exception:  # the API server may be down on purpose: retry
                self._stop.wait(0.5)

    def first_bind_after(self, t: float) -> float | None:
        after = [b for b in self.bound_at.values() if b >= t]
        return min(after) - t if after else None

    def last_bind(self, names: Iterable[str]) -> float | None:
        times = [self.bound_at[n] for n in names if n in self.bound_at]
        return max(times) if times else None


def list_all(api_client: Any, *, namespace: str | None = None) -> list[dict[str, Any]]:
    core: Any = kubernetes.client.CoreV1Api(api_client)
    out: list[dict[str, Any]] = []
    cont = None
    while True:
        if namespace is None:
            lst = core.list_pod_for_all_namespaces(limit=1000, _continue=cont, _request_timeout=60)
        else:
            lst = core.list_namespaced_pod(
                namespace, limit=1000, _continue=cont, _request_timeout=60
            )
        out.extend(api_client.sanitize_for_serialization(p) for p in lst.items)
        cont = lst.metadata._continue
        if not cont:
            return out


def list_nodes(api_client: Any, *, selector: str = "") -> list[dict[str, Any]]:
    core: Any = kubernetes.client.CoreV1Api(api_client)
    lst = core.list_node(label_selector=selector, _request_timeout=60)
    return [api_client.sanitize_for_serialization(n) for n in lst.items]


def lost_pods(
    pods: Iterable[dict[str, Any]],
    *,
    created: Iterable[str],
    deleted: set[str],
    unschedulable: set[str],
    node_names: set[str],
    seen_on: dict[str, str] | None = None,
) -> list[str]:
    """Created pods that are not bound to an existing node (and were meant to be).

    seen_on: the node the checker's watch saw each pod bound to, to explain a pod that is
    gone (the pod garbage collector deletes pods bound to nodes that do not exist).
    """
    by_name = {p["metadata"]["name"]: p for p in pods}
    lost = []
    for name in created:
        if name in deleted or name in unschedulable:
            continue
        p = by_name.get(name)
        if p is None:
            node = (seen_on or {}).get(name)
            if node and node not in node_names:
                lost.append(f"{name}: bound to {node}, which does not exist (then deleted)")
            else:
                lost.append(f"{name}: gone")
            continue
        node = (p.get("spec") or {}).get("nodeName")
        if not node:
            lost.append(f"{name}: still pending")
        elif node not in node_names:
            lost.append(f"{name}: bound to {node}, which does not exist")
    return lost


def bound_but_marked_unschedulable(pods: Iterable[dict[str, Any]]) -> list[str]:
    """Bound pods whose PodScheduled condition says False (a failed bind that was not)."""
    out = []
    for p in pods:
        if not (p.get("spec") or {}).get("nodeName"):
            continue
        for c in (p.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                out.append(f"{p['metadata']['name']} on {p['spec']['nodeName']}: {c.get('reason')}")
    return out


def wait_all_bound(api_client: Any, namespace: str, names: set[str], *, timeout: float) -> set[str]:
    """Poll until every named pod is bound or ``timeout`` passes; returns the unbound."""
    deadline = time.monotonic() + timeout
    unbound = set(names)
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            pods = list_all(api_client, namespace=namespace)
            bound = {p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName")}
            unbound = names - bound
            if not unbound:
                return unbound
        time.sleep(1.0)
    return unbound
