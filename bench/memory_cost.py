"""What holds the operator's memory with a full cache, in process, without a cluster.

    python -m bench memory [--nodes 5000] [--pods 10000] [--shape realistic|bench]

Each stage runs in a fresh process (RSS only shrinks when the allocator gives pages back,
so stages must not share one), and reports VmRSS and VmHWM from /proc/self/status:

- ``import``: the operator's modules (kopf, the kubernetes client, numpy) and nothing else.
- ``bodies``: plus the JSON-decoded bodies of every node and pod, held at once (what a
  LIST that keeps all its pages costs).
- ``operator``: an ``Operator`` (no connection is made) whose ``load_once`` reads paged
  LIST answers (500 items a page, JSON bytes made on demand) through the same
  ``Ingest.on_node``/``on_pod`` the kopf handlers call; then a snapshot; then
  ``--cycles`` scheduling cycles as ``Scheduler.attempt`` runs them (``schedule_one``
  with the scheduler's memo, each placed pod assumed on its node); then one
  ``Reconciler.once`` (its LIST, served the same way). The same process then measures, by
  walking the objects (each object counted once, in the first structure that reaches
  it), the bytes per node and per pod of each structure.
- ``kopf``: kopf's per-object ``ResourceMemory`` (kept from an object's first event to its
  DELETED), one per node and pod, made as kopf's ``process_resource_event`` makes them.
- ``--trace``: the ``operator`` stage under tracemalloc (slower; RSS then includes
  tracemalloc's own bookkeeping): the allocation sites holding the most at the end.

Bound pods are spread round-robin over the nodes, all of one Deployment (one ReplicaSet);
``--pending`` more pods of the scheduler's own wait to be placed by the cycles.
``--shape realistic`` gives pods and nodes the fields kube-apiserver returns for a
Deployment's replica and a kwok node (managedFields, status conditions, ownerReferences,
env, nodeInfo: ≈ 6 KB and ≈ 4 KB of JSON); ``bench`` the benchmark's own small pods
(bench/kube.py) and hack/cluster.py's nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import gc
import json
import subprocess
import sys
import time
import tracemalloc
import types
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import kopf
import kubernetes
from kopf._cogs.clients import watching
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing, queueing

from bench import kube
from metricsched import config as config_mod
from metricsched.core import cycle, model
from metricsched.runtime import kopf_source
from metricsched.runtime import operator as operator_mod

MIB = 2**20
STAGES = ("import", "bodies", "operator", "kopf", "kopf-listing")
_ZONES = ("zone-a", "zone-b", "zone-c")
_CPUS = ("4", "8", "16")
_MEMS = ("16Gi", "32Gi", "64Gi")
_TIME = "2026-11-23T12:00:00Z"


# --- bodies ----------------------------------------------------------------------------


def _fields(*paths: str) -> dict[str, Any]:
    """A fieldsV1 tree (managedFields) with the given dotted paths."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path.split("|"):
            node = node.setdefault(part, {})
    return tree


_POD_SPEC_FIELDS = _fields(
    *(
        f'f:spec|f:containers|k:{{"name":"app"}}|{f}'
        for f in (
            ".",
            "f:env|.",
            'f:env|k:{"name":"LOG_LEVEL"}|.',
            'f:env|k:{"name":"LOG_LEVEL"}|f:name',
            'f:env|k:{"name":"LOG_LEVEL"}|f:value',
            'f:env|k:{"name":"POD_NAME"}|f:valueFrom|f:fieldRef',
            'f:env|k:{"name":"POD_NAMESPACE"}|f:valueFrom|f:fieldRef',
            'f:env|k:{"name":"GOMAXPROCS"}|f:valueFrom|f:resourceFieldRef',
            "f:image",
            "f:imagePullPolicy",
            "f:name",
            'f:ports|k:{"containerPort":8080,"protocol":"TCP"}|f:containerPort',
            "f:resources|f:limits|f:memory",
            "f:resources|f:requests|f:cpu",
            "f:resources|f:requests|f:memory",
            "f:terminationMessagePath",
            "f:terminationMessagePolicy",
        )
    ),
    "f:metadata|f:generateName",
    "f:metadata|f:labels|f:app",
    "f:metadata|f:labels|f:pod-template-hash",
    'f:metadata|f:ownerReferences|k:{"uid":"rs-uid"}',
    "f:spec|f:dnsPolicy",
    "f:spec|f:enableServiceLinks",
    "f:spec|f:restartPolicy",
    "f:spec|f:schedulerName",
    "f:spec|f:securityContext",
    "f:spec|f:terminationGracePeriodSeconds",
)
_POD_STATUS_FIELDS = _fields(
    *(
        f'f:status|f:conditions|k:{{"type":"{t}"}}|{f}'
        for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
        for f in (".", "f:lastProbeTime", "f:lastTransitionTime", "f:status", "f:type")
    ),
    "f:status|f:containerStatuses",
    "f:status|f:hostIP",
    "f:status|f:hostIPs",
    "f:status|f:phase",
    "f:status|f:podIP",
    'f:status|f:podIPs|k:{"ip":"10.0.0.1"}|f:ip',
    "f:status|f:startTime",
)


def realistic_pod(i: int, node: str, scheduler: str) -> dict[str, Any]:
    """A Deployment's replica as kube-apiserver returns it (≈ 6 KB of JSON)."""
    name = f"web-7d4b9c8f6d-{i:05d}"
    uid = f"6f1c2d3e-{i:04x}-4a5b-8c7d-{i:012x}"
    ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _TIME}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": _TIME,
        }
    )
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "generateName": "web-7d4b9c8f6d-",
            "namespace": "bench-bound",
            "uid": uid,
            "resourceVersion": str(100_000 + i),
            "creationTimestamp": _TIME,
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d4b9c8f6d",
                    "uid": "0b7e9a52-3c1d-4e8f-9a6b-5d4c3b2a1f00",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": _TIME,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": _POD_SPEC_FIELDS,
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": _TIME,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": _POD_STATUS_FIELDS,
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": f"kube-api-access-{i % 100000:05d}",
                    "projected": {
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "expirationSeconds": 3607,
                                    "path": "token",
                                }
                            },
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/team/web:1.27.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
                            },
                        },
                        {
                            "name": "POD_NAMESPACE",
                            "valueFrom": {
                                "fieldRef": {
                                    "apiVersion": "v1",
                                    "fieldPath": "metadata.namespace",
                                }
                            },
                        },
                        {
                            "name": "GOMAXPROCS",
                            "valueFrom": {
                                "resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}
                            },
                        },
                    ],
                    "resources": {
                        "limits": {"memory": "128Mi"},
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": f"kube-api-access-{i % 100000:05d}",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": scheduler,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running" if node else "Pending",
            "conditions": conditions if node else [],
            "qosClass": "Burstable",
        },
    }
    if node:
        body["status"].update(
            {
                "hostIP": "10.240.0.1",
                "hostIPs": [{"ip": "10.240.0.1"}],
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": _TIME,
                "containerStatuses": [
                    {
                        "name": "app",
                        "state": {"running": {"startedAt": _TIME}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": "registry.example.com/team/web:1.27.3",
                        "imageID": "registry.example.com/team/web@sha256:" + "ab" * 32,
                        "containerID": f"containerd://{i:064x}",
                        "started": True,
                    }
                ],
            }
        )
    return body


def bench_pod(i: int, node: str, scheduler: str) -> dict[str, Any]:
    """The benchmark's pod (bench/kube.py::pod_body) as the API server returns it, bound."""
    body = kube.pod_body(f"bench-{i:05d}", scheduler)
    body["metadata"].update(
        namespace="bench-bound",
        uid=f"uid-{i:08d}",
        resourceVersion=str(100_000 + i),
        creationTimestamp=_TIME,
    )
    body["spec"]["nodeName"] = node
    body["status"] = {"phase": "Running" if node else "Pending"}
    return body


def bench_node(i: int) -> dict[str, Any]:
    """hack/cluster.py's node_body: labels, capacity, addresses."""
    name = f"node-{i}"
    shape = (i - 1) % 3
    capacity = {
        "cpu": _CPUS[shape],
        "memory": _MEMS[shape],
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    return {
        "metadata": {
            "name": name,
            "uid": f"node-uid-{i:08d}",
            "resourceVersion": str(i),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "topology.kubernetes.io/zone": _ZONES[shape],
                "node.kubernetes.io/instance-type": f"sim-{_CPUS[shape]}cpu",
            },
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                "example.com/hourly-price": f"{0.1 * (1 + (i % 4)):.2f}",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [
                {"type": "InternalIP", "address": f"10.240.{i // 250}.{i % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def realistic_node(i: int) -> dict[str, Any]:
    """A kwok node as kube-apiserver returns it (≈ 4 KB of JSON): bench_node plus
    conditions, nodeInfo, daemonEndpoints, managedFields; no images."""
    body = bench_node(i)
    meta, status = body["metadata"], body["status"]
    meta["creationTimestamp"] = _TIME
    meta["annotations"]["node.alpha.kubernetes.io/ttl"] = "0"
    meta["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"] = "true"
    meta["labels"]["beta.kubernetes.io/arch"] = "amd64"
    meta["labels"]["beta.kubernetes.io/os"] = "linux"
    meta["managedFields"] = [
        {
            "manager": "kwok",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields(
                *(f"f:metadata|f:labels|f:{k}" for k in meta["labels"]),
                *(f"f:metadata|f:annotations|f:{k}" for k in meta["annotations"]),
            ),
        },
        {
            "manager": "kwok",
            "operation": "Update",
            "apiVersion": "v1",
            "time": _TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields(
                *(
                    f'f:status|f:conditions|k:{{"type":"{t}"}}|{f}'
                    for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
                    for f in (
                        ".",
                        "f:lastHeartbeatTime",
                        "f:lastTransitionTime",
                        "f:message",
                        "f:reason",
                        "f:status",
                        "f:type",
                    )
                ),
                "f:status|f:allocatable|f:cpu",
                "f:status|f:capacity|f:cpu",
                "f:status|f:daemonEndpoints|f:kubeletEndpoint|f:Port",
                "f:status|f:nodeInfo|f:architecture",
                "f:status|f:nodeInfo|f:kubeletVersion",
            ),
            "subresource": "status",
        },
    ]
    status["conditions"] = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": _TIME,
            "lastTransitionTime": _TIME,
            "reason": reason,
            "message": message,
        }
        for t, reason, message in (
            ("Ready", "KubeletReady", "kubelet is posting ready status"),
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("NetworkUnavailable", "RouteCreated", "RouteController created a route"),
        )
    ]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10247}}
    status["nodeInfo"] = {
        "architecture": "amd64",
        "bootID": f"boot-{i:032x}",
        "containerRuntimeVersion": "kwok-v0.7.0",
        "kernelVersion": "kwok-v0.7.0",
        "kubeProxyVersion": "kwok-v0.7.0",
        "kubeletVersion": "kwok-v0.7.0",
        "machineID": f"{i:032x}",
        "operatingSystem": "linux",
        "osImage": "kwok-v0.7.0",
        "systemUUID": f"{i:08x}-0000-0000-0000-000000000000",
    }
    status["images"] = []
    return body


def _policy_body() -> dict[str, Any]:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "latency", "namespace": "bench", "generation": 1, "uid": "p-1"},
        "spec": {
            "podSelector": {},
            "metrics": [
                {
                    "name": "latency",
                    "prometheus": {"query": "max by (node) (node_latency_seconds)"},
                    "weight": 1,
                    "goal": "Minimize",
                }
            ],
        },
    }


class Cluster:
    """The nodes and pods of the measurement, as bodies made on demand."""

    def __init__(self, *, nodes: int, pods: int, pending: int, shape: str) -> None:
        self.nodes, self.pods, self.pending = nodes, pods, pending
        self._node = realistic_node if shape == "realistic" else bench_node
        self._pod = realistic_pod if shape == "realistic" else bench_pod

    def node(self, i: int) -> dict[str, Any]:
        return self._node(i + 1)

    def pod(self, i: int) -> dict[str, Any]:
        if i < self.pods:
            return self._pod(i, f"node-{i % self.nodes + 1}", "default-scheduler")
        return self._pod(i, "", "metricsched")

    def node_bodies(self) -> Iterable[dict[str, Any]]:
        return (self.node(i) for i in range(self.nodes))

    def pod_bodies(self) -> Iterable[dict[str, Any]]:
        return (self.pod(i) for i in range(self.pods + self.pending))


# --- a fake API for the LISTs ----------------------------------------------------------


class FakeHttp:
    """``kube_http.AsyncApi``'s LIST requests (the informers' and the start-up's), from a
    Cluster: bound pods, our pending pods, nodes and one policy; other kinds empty."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    async def request(self, method: str, path: str, *, params: dict[str, str], **_: Any) -> Any:
        from metricsched.edges import kube_http  # noqa: PLC0415 (worker-only imports)

        c = self._cluster
        selector = params.get("fieldSelector", "")
        if path == "/api/v1/nodes":
            count, first, item = c.nodes, 0, c.node
        elif path == "/api/v1/pods" and "spec.nodeName!=" in selector:
            count, first, item = c.pods, 0, c.pod
        elif path == "/api/v1/pods":
            count, first, item = c.pending, c.pods, c.pod
        elif path.endswith("/schedulingpolicies"):
            count, first, item = 1, 0, lambda _: _policy_body()
        else:
            count, first, item = 0, 0, lambda _: {}
        start = int(params.get("continue") or 0)
        end = min(count, start + int(params.get("limit") or 500))
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if end < count:
            meta["continue"] = str(end)
        items = [item(first + i) for i in range(start, end)]
        return kube_http.Answer(200, json.dumps({"metadata": meta, "items": items}).encode())

    async def close(self) -> None:
        pass


# --- measuring -------------------------------------------------------------------------


def proc_status() -> dict[str, float]:
    """VmRSS and VmHWM of this process, in MiB."""
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


class Walker:
    """Bytes of object graphs, each object counted once (in the first graph that reaches
    it): what a structure adds on top of what was already counted."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        # Code, and bound methods (a callback would reach its whole owner).
        self._skip = (
            type,
            types.ModuleType,
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
        )

    def size(self, *roots: object) -> int:
        total = 0
        stack = list(roots)
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or isinstance(obj, self._skip):
                continue
            self.seen.add(id(obj))
            total += sys.getsizeof(obj)
            stack.extend(gc.get_referents(obj))
        return total


def _structures(op: Any, memo: Any) -> list[tuple[str, int, str]]:
    """(structure, bytes, per) for the operator's cache after the cycles."""
    cache = op.cache
    walker = Walker()
    # What import-time and class-level objects reach (interned names, enum members,
    # small ints): not per object.
    walker.size(model, op.config)
    nodes = list(cache._nodes.values())
    pods = [p for n in nodes for p in n.pods.values()] + list(cache.pending.values())
    rows: list[tuple[str, int, str]] = []

    def add(name: str, per: str, *roots: object) -> None:
        rows.append((name, walker.size(*roots), per))

    add("NodeInfo (labels, annotations, taints, allocatable, addresses)", "node",
        *(n.info for n in nodes))  # fmt: skip
    strings = sum(sys.getsizeof(s) for p in pods for s in (p.name, p.uid, p.namespace))
    add("PodInfo (all fields; strings first reached here)", "pod", *pods)
    rows.append(("  of which name, uid, namespace strings (shared or not)", strings, "pod"))
    add("cache per-node wrappers (_Node, pods dict, deque)", "node",
        *(n.pods for n in nodes), *(n.recent for n in nodes), *nodes)  # fmt: skip
    add("NodeState (pods tuple, requested, ports, binds)", "node", cache._states)
    add("NodeTable columns and keeper", "node", cache._table)
    add("Memo (scheduler's, after the cycles; superseded states it holds)", "node", memo)
    indexes = (cache._pod_node, cache._pod_rv, cache._node_rv, cache._tombstones, cache._assumed)
    add("cache indexes (uid->node, uid->rv, node->rv, tombstones)", "pod", *indexes)
    add("pending pods' conditions (pod_conditions)", "pod", cache.pod_conditions)
    add("scheduling queue", "pod", op.queue)
    return rows


def stage_import() -> dict[str, Any]:
    return {"stage": "import", **proc_status()}


def stage_bodies(cluster: Cluster) -> dict[str, Any]:
    before = proc_status()["VmRSS"]
    raw = [json.dumps(b).encode() for b in cluster.pod_bodies()]
    size = sum(len(r) for r in raw) / max(1, len(raw))
    del raw
    gc.collect()
    start = proc_status()["VmRSS"]
    t = time.perf_counter()
    bodies = [json.loads(json.dumps(b)) for b in cluster.pod_bodies()]
    pods_mib = proc_status()["VmRSS"] - start
    nodes = [json.loads(json.dumps(b)) for b in cluster.node_bodies()]
    nodes_mib = proc_status()["VmRSS"] - start - pods_mib
    node_json = len(json.dumps(cluster.node(0)))
    elapsed = time.perf_counter() - t
    del bodies, nodes
    return {
        "stage": "bodies",
        "import_rss": before,
        "pod_json_bytes": round(size),
        "node_json_bytes": node_json,
        "pod_body_bytes_in_python": round(pods_mib * MIB / max(1, cluster.pods + cluster.pending)),
        "node_body_bytes_in_python": round(nodes_mib * MIB / max(1, cluster.nodes)),
        "all_bodies_mib": round(pods_mib + nodes_mib, 1),
        "seconds": round(elapsed, 1),
        **proc_status(),
    }


def stage_operator(
    cluster: Cluster,
    *,
    cycles: int,
    trace: bool,
    with_kopf: bool,
    idle_timeout: float | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"stage": "operator", "import": proc_status()}
    if trace:
        tracemalloc.start(1)
    config = config_mod.from_args(argparse.Namespace(), env={})
    api = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    op = operator_mod.Operator(config, api)
    out["constructed"] = proc_status()
    fake = FakeHttp(cluster)
    op.reads = fake  # type: ignore[assignment]
    for reflector in op.cluster_state.reflectors:
        reflector._api = fake  # type: ignore[assignment]
    t = time.perf_counter()
    asyncio.run(op.load_once())
    out["sync_s"] = round(time.perf_counter() - t, 1)
    gc.collect()
    out["synced"] = proc_status()
    now = time.time()
    policy = next(iter(op.cache.policies.values()))
    names = [n.name for n in op.cache.nodes()]
    op.store.update(
        model.MetricKey(policy.key, "latency"),
        model.MetricSeries(
            values={
                m: model.MetricSample(0.05 + 0.03 * (i % 10), now) for i, m in enumerate(names)
            },
            last_refresh=now,
            error=None,
            error_message="",
        ),
    )
    if with_kopf:
        # As the operator: kopf starts after the start-up LIST and lists everything again.
        # kopf keeps a ResourceMemory per object until its DELETED: kept alive here too.
        kept = inventory.ResourceMemories()
        out["kopf_listing"] = kopf_listing(op, cluster, idle_timeout=idle_timeout, memories=kept)
        gc.collect()
        out["after_kopf_listing"] = proc_status()
    op.cache.snapshot(now=now)
    gc.collect()
    out["snapshot"] = proc_status()
    memo = op.scheduler.memo
    pending = list(op.cache.pending.values())
    bound = 0
    t = time.perf_counter()
    for k in range(cycles):
        pod = pending[k % len(pending)] if pending else None
        if pod is None or pod.uid not in op.cache.pending:
            continue
        snapshot = op.cache.snapshot(now=now + k * 0.01)
        decision = cycle.schedule_one(
            pod=pod,
            snapshot=snapshot,
            table=op.cache.table(snapshot),
            policies=list(op.cache.policies.values()),
            metrics=op.store.view(),
            default_fallback=config.default_fallback,
            now=now + k * 0.01,
            scheduler_names=config.scheduler_names,
            rr_counter=k,
            seed=zlib.crc32(pod.uid.encode()),
            detail=False,
            memo=memo,
        )
        if decision.outcome is model.Outcome.BIND and decision.node is not None:
            op.cache.assume(pod, decision.node, now=now + k * 0.01)
            bound += 1
    out["cycles"] = {"count": cycles, "bound": bound, "s": round(time.perf_counter() - t, 1)}
    gc.collect()
    out["after_cycles"] = proc_status()
    t = time.perf_counter()
    outcome = asyncio.run(op.reconciler.once())
    out["reconcile"] = {"outcome": dataclasses.asdict(outcome) if outcome else None}
    gc.collect()
    out["after_reconcile"] = proc_status()
    if trace:
        snap = tracemalloc.take_snapshot()
        tracemalloc.stop()
        top = snap.statistics("lineno")[:20]
        out["trace_top"] = [
            f"{s.size / MIB:6.1f} MiB {s.count:>8} blocks  {_short(s.traceback[0].filename)}"
            f":{s.traceback[0].lineno}"
            for s in top
        ]
        out["trace_total_mib"] = round(sum(s.size for s in snap.statistics("filename")) / MIB, 1)
    rows = _structures(op, memo)
    per = {"node": cluster.nodes, "pod": cluster.pods + cluster.pending}
    out["structures"] = [
        (name, round(size / MIB, 1), round(size / per[unit]), unit) for name, size, unit in rows
    ]
    out["memo_entries"] = {
        "derived": len(memo._entries),
        "per_table": len(memo._by_table),
        "per_row": len(memo._by_row),
    }
    return out


def _short(filename: str) -> str:
    return filename.rsplit("/site-packages/", maxsplit=1)[-1].rsplit("/operator/", maxsplit=1)[-1]


def stage_kopf(cluster: Cluster) -> dict[str, Any]:
    """kopf's ResourceMemories as process_resource_event fills them: one per object."""
    memories = inventory.ResourceMemories()
    bodies = [cluster.node(i) for i in range(cluster.nodes)]
    bodies += [cluster.pod(i) for i in range(cluster.pods)]
    identity = ("name", "namespace", "uid")
    keys_only = [
        {"metadata": {k: b["metadata"][k] for k in identity if k in b["metadata"]}} for b in bodies
    ]
    del bodies
    gc.collect()
    before = proc_status()["VmRSS"]

    async def fill() -> None:
        for body in keys_only:
            await memories.recall(body, noticed_by_listing=True)

    asyncio.run(fill())
    gc.collect()
    grown = proc_status()["VmRSS"] - before
    walker = Walker()
    walker.size(keys_only)
    deep = walker.size(memories)
    count = len(keys_only)
    return {
        "stage": "kopf",
        "objects": count,
        "rss_growth_mib": round(grown, 1),
        "bytes_per_object_rss": round(grown * MIB / count),
        "bytes_per_object_walked": round(deep / count),
        **proc_status(),
    }


def stage_kopf_listing(cluster: Cluster, *, idle_timeout: float | None) -> dict[str, Any]:
    """kopf's own listing alone, into an empty cache (see ``kopf_listing``)."""
    config = config_mod.from_args(argparse.Namespace(), env={})
    op = operator_mod.Operator(
        config, kubernetes.client.ApiClient(kubernetes.client.Configuration())
    )
    out: dict[str, Any] = {"stage": "kopf-listing", "start": proc_status()}
    memories = inventory.ResourceMemories()
    out.update(kopf_listing(op, cluster, idle_timeout=idle_timeout, memories=memories))
    gc.collect()
    out["end"] = proc_status()
    out["cache"] = {"nodes": len(op.cache.nodes()), "pending": len(op.cache.pending)}
    return out


def kopf_listing(
    op: operator_mod.Operator,
    cluster: Cluster,
    *,
    idle_timeout: float | None,
    memories: inventory.ResourceMemories,
) -> dict[str, Any]:
    """kopf's own listing of our pending pods (after the start-up LIST, kopf lists them
    again; the rest of the cluster is the informers'): kopf's real watcher, per-object
    workers and ``process_resource_event`` with the operator's registry and settings, fed
    from pages of JSON instead of the API server. Each worker keeps its object's last
    event until it idles out (``settings.queueing.idle_timeout``)."""
    registry = kopf_source.build_registry(op.kopf)
    settings = kopf.OperatorSettings()
    kopf_source.configure_kopf(settings)
    if idle_timeout is not None:
        settings.queueing.idle_timeout = idle_timeout
    most_workers = 0

    def listing(count: int, item: Callable[[int], dict[str, Any]]) -> Any:
        async def infinite_watch(**_: Any) -> Any:
            for start in range(0, count, 500):
                page = json.dumps([item(i) for i in range(start, min(count, start + 500))])
                for body in json.loads(page):
                    yield {"type": None, "object": body}
                await asyncio.sleep(0)  # the next page is read from the socket
            yield watching.Bookmark.LISTED

        return infinite_watch

    async def run(plural: str, count: int, item: Callable[[int], dict[str, Any]]) -> None:
        nonlocal most_workers
        resource = references.Resource(group="", version="v1", plural=plural)
        queueing.watching.infinite_watch = listing(count, item)  # type: ignore[assignment]
        task = asyncio.create_task(
            queueing.watcher(
                namespace=None,
                settings=settings,
                resource=resource,
                processor=functools.partial(
                    processing.process_resource_event,
                    lifecycle=kopf.lifecycles.all_at_once,
                    registry=registry,
                    settings=settings,
                    indexers=indexing.OperatorIndexers(),
                    memories=memories,
                    memobase=ephemera.AnyMemo(ephemera.Memo()),
                    event_queue=asyncio.Queue(),
                    resource=resource,
                ),
            )
        )
        while not task.done():
            most_workers = max(most_workers, len(asyncio.all_tasks()))
            await asyncio.sleep(0.05)

    t = time.perf_counter()
    asyncio.run(run("pods", cluster.pending, lambda i: cluster.pod(cluster.pods + i)))
    return {
        "idle_timeout_s": settings.queueing.idle_timeout,
        "seconds": round(time.perf_counter() - t, 1),
        "most_tasks_alive": most_workers,
        "kopf_memories": len(list(memories.iter_all_memories())),
    }


# --- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000, help="bound pods")
    parser.add_argument("--pending", type=int, default=200, help="pods the cycles place")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--shape", choices=("realistic", "bench"), default="realistic")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--trace", action="store_true", help="the operator stage, traced")
    parser.add_argument("--kopf-idle", type=float, help="kopf's idle_timeout (s) to try")
    parser.add_argument(
        "--no-kopf", action="store_true", help="operator: without kopf's listing after the sync"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per stage")
    parser.add_argument("--child", help=argparse.SUPPRESS)


def _run_child(args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(nodes=args.nodes, pods=args.pods, pending=args.pending, shape=args.shape)
    if args.child == "import":
        return stage_import()
    if args.child == "bodies":
        return stage_bodies(cluster)
    if args.child == "operator":
        return stage_operator(
            cluster,
            cycles=args.cycles,
            trace=args.trace,
            with_kopf=not args.no_kopf,
            idle_timeout=args.kopf_idle,
        )
    if args.child == "kopf-listing":
        return stage_kopf_listing(cluster, idle_timeout=args.kopf_idle)
    return stage_kopf(cluster)


def cmd_memory(args: argparse.Namespace) -> int:
    if args.child:
        print(json.dumps(_run_child(args)))
        return 0
    forwarded = [
        f"--nodes={args.nodes}",
        f"--pods={args.pods}",
        f"--pending={args.pending}",
        f"--cycles={args.cycles}",
        f"--shape={args.shape}",
        *(["--trace"] if args.trace else []),
        *([f"--kopf-idle={args.kopf_idle}"] if args.kopf_idle is not None else []),
        *(["--no-kopf"] if args.no_kopf else []),
    ]
    for stage in args.stages.split(","):
        done = subprocess.run(
            # Not ``-m bench``: its harness imports (matplotlib, ...) are not the operator's.
            [sys.executable, "-m", "bench.memory_cost", f"--child={stage}", *forwarded],
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            _print(result)
    return 0


def _print(result: dict[str, Any]) -> None:
    """One stage's result, for people (``--json`` prints it as it is)."""
    stage = result.pop("stage")
    structures = result.pop("structures", [])
    trace = result.pop("trace_top", [])
    print(f"== {stage}")
    for key, value in result.items():
        print(f"  {key}: {value}")
    if structures:
        print(f"  {'structure':<70} {'MiB':>6} {'bytes':>6} per")
        for name, mib, each, per in structures:
            print(f"  {name:<70} {mib:>6} {each:>6} {per}")
    for line in trace:
        print(f"  {line}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return cmd_memory(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
