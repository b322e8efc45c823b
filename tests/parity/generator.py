"""Seeded random scheduling scenarios, as the API server would store them.

A scenario is a small cluster (namespaces, nodes, pods bound to them) and a few pending
pods, each to be asked about that same cluster. Everything is plain Kubernetes JSON, so
the same scenario is read by metricsched's parser and by kube-scheduler's Go types.

The objects are valid (the API server would accept them) and already in the shape it
stores: labels ``kubernetes.io/metadata.name`` on namespaces, ``matchLabelKeys`` of
spread constraints merged into their label selectors (as kube-apiserver v1.35 does).
Values come from small pools on purpose: collisions (the same label on a pod and a
selector, the same host port twice, a domain that is full) are where the rules meet.
Nothing here is random unless it comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
from typing import Any

Body = dict[str, Any]

ZONES = ("zone-a", "zone-b", "zone-c")
NAMESPACES = ("default", "team-a", "team-b")
APPS = ("web", "db", "cache")
EXTENDED = "example.com/gpu"
HUGEPAGES = "hugepages-2Mi"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TAINTS: tuple[Body, ...] = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "maintenance", "effect": "NoSchedule"},
    {"key": "team", "value": "a", "effect": "NoExecute"},
)
TOLERATIONS: tuple[Body, ...] = (
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "team", "operator": "Equal", "value": "b"},
    {
        "key": "team",
        "operator": "Equal",
        "value": "a",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    },
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
)


def scenario(rng: random.Random, *, pods: int) -> Body:
    """A cluster and ``pods`` pending pods to ask about it."""
    namespaces = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/metadata.name": name}
                | ({"team": rng.choice("ab")} if rng.random() < 0.8 else {}),
            },
        }
        for name in NAMESPACES
    ]
    # Mostly small clusters, where every rule meets often; sometimes a bigger one (kept
    # under 100 nodes: there kube-scheduler stops at enough feasible nodes).
    count = rng.randint(1, 10) if rng.random() < 0.9 else rng.randint(11, 40)
    nodes = [_node(rng, index) for index in range(count)]
    node_names = [n["metadata"]["name"] for n in nodes]
    # A few are bound to a node that is gone (or not yet seen): they count nowhere.
    hosts = [*node_names, *(["node-gone"] if rng.random() < 0.2 else [])]
    existing = [
        _pod(rng, f"old-{index}", node_name=rng.choice(hosts))
        for index in range(rng.randint(0, 20))
    ]
    incoming = [_pod(rng, f"new-{index}", node_name="", nodes=node_names) for index in range(pods)]
    return {"namespaces": namespaces, "nodes": nodes, "pods": existing, "incoming": incoming}


# --- nodes -----------------------------------------------------------------------------


def _node(rng: random.Random, index: int) -> Body:
    name = f"node-{index}"
    labels = {"kubernetes.io/os": "linux"}
    roll = rng.random()
    if roll < 0.9:
        labels[HOSTNAME] = name
    elif roll < 0.97:
        labels[HOSTNAME] = f"host-{index // 2}"  # hostnames need not be node names

    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(ZONES)
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.6:
        labels["tier"] = str(rng.randint(1, 5))
    allocatable = {
        "cpu": rng.choice(("500m", "1", "2", "3500m", "4", "8", "16", "16", "32")),
        "memory": rng.choice(("1Gi", "2Gi", "3000Mi", "4Gi", "8Gi", "32Gi")),
        "pods": rng.choice(("2", "4", "10", "110", "110", "110")),
    }
    if rng.random() < 0.6:
        allocatable["ephemeral-storage"] = rng.choice(("1Gi", "10Gi"))
    if rng.random() < 0.3:
        allocatable[EXTENDED] = rng.choice(("0", "1", "2"))
    if rng.random() < 0.2:
        allocatable[HUGEPAGES] = rng.choice(("0", "64Mi", "128Mi"))
    if rng.random() < 0.03:
        del allocatable["pods"]  # a node that admits no pods
    spec: Body = {}
    taints = rng.sample(TAINTS, k=rng.choice((0, 0, 0, 0, 0, 0, 1, 1, 2)))
    if rng.random() < 0.08:
        spec["unschedulable"] = True
        if rng.random() < 0.7:  # the node lifecycle controller adds it to a cordoned node
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


# --- pods ------------------------------------------------------------------------------


def _labels(rng: random.Random) -> dict[str, str]:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(("front", "back"))
    if rng.random() < 0.3:
        labels["version"] = rng.choice(("v1", "v2"))
    return labels


def _requests(rng: random.Random, *, big: bool = False) -> Body:
    resources: Body = {}
    if rng.random() < 0.8:
        resources["cpu"] = rng.choice(
            ("100m", "250m", "500m", "1", "1500m", "0.1", "1.25", "0") + (("3",) if big else ())
        )
    if rng.random() < 0.7:
        resources["memory"] = rng.choice(
            ("64Mi", "256Mi", "512Mi", "1Gi", "1500Mi", "1.5Gi", "1e9", "500M", "1000000001m", "0")
        )
    if rng.random() < 0.08:
        resources["ephemeral-storage"] = rng.choice(("100Mi", "2Gi"))
    if rng.random() < 0.06:
        resources[EXTENDED] = rng.choice(("1", "2"))
    if rng.random() < 0.04:
        resources[HUGEPAGES] = rng.choice(("2Mi", "64Mi"))
    return resources


def _container(rng: random.Random, name: str, *, ports: bool) -> Body:
    container: Body = {"name": name, "image": "registry.k8s.io/pause:3.10"}
    requests = _requests(rng)
    if requests:
        if rng.random() < 0.15:
            # Limits only: the API server copies them into requests.
            container["resources"] = {"limits": requests}
        else:
            container["resources"] = {"requests": requests}
            if HUGEPAGES in requests:  # hugepages need limits equal to requests
                container["resources"]["limits"] = {HUGEPAGES: requests[HUGEPAGES]}
    if ports and rng.random() < 0.2:
        port = rng.choice((80, 443, 8080))
        entry: Body = {"containerPort": port, "hostPort": port}
        if rng.random() < 0.3:
            entry["protocol"] = rng.choice(("UDP", "UDP", "SCTP"))
        if rng.random() < 0.2:
            entry["hostIP"] = rng.choice(("127.0.0.1", "10.0.0.1"))
        container["ports"] = [entry]
    return container


def _selector(rng: random.Random, *, allow_empty: bool = True) -> Body:
    roll = rng.random()
    if allow_empty and roll < 0.05:
        return {}
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    expression: Body = {"key": rng.choice(("app", "tier")), "operator": operator}
    if operator in ("In", "NotIn"):
        expression["values"] = rng.sample((*APPS, "front", "back"), k=rng.randint(1, 2))
    return {"matchExpressions": [expression]}


def _affinity_term(rng: random.Random) -> Body:
    term: Body = {"topologyKey": rng.choice((HOSTNAME, HOSTNAME, ZONE, "disk"))}
    if rng.random() < 0.9:
        term["labelSelector"] = _selector(rng)
    roll = rng.random()
    if roll < 0.2:
        term["namespaces"] = rng.sample(NAMESPACES, k=rng.randint(1, 2))
    elif roll < 0.3:
        term["namespaceSelector"] = rng.choice(({}, {"matchLabels": {"team": rng.choice("ab")}}))
    return term


def _node_selector_term(rng: random.Random, nodes: list[str]) -> Body:
    expressions: list[Body] = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        key = rng.choice(("disk", "tier", ZONE, "gpu"))
        operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
        expression: Body = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            pool = {"disk": ("ssd", "hdd"), "tier": ("1", "3", "5"), ZONE: ZONES, "gpu": ("true",)}
            expression["values"] = rng.sample(pool[key], k=1)
        elif operator in ("Gt", "Lt"):
            expression["values"] = [str(rng.randint(0, 5))]
        expressions.append(expression)
    term: Body = {}
    if expressions:
        term["matchExpressions"] = expressions
    if not expressions or rng.random() < 0.15:
        field: Body = {"key": "metadata.name", "operator": rng.choice(("In", "In", "NotIn"))}
        field["values"] = [rng.choice([*nodes, "node-gone"])]
        term["matchFields"] = [field]
    return term


def _spread_constraint(rng: random.Random, labels: dict[str, str]) -> Body:
    constraint: Body = {
        "maxSkew": rng.choice((1, 1, 2)),
        "topologyKey": rng.choice((HOSTNAME, ZONE, ZONE, "disk")),
        "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
        "labelSelector": _selector(rng, allow_empty=False),
    }
    if constraint["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.2:
        constraint["minDomains"] = rng.randint(1, 4)
    if rng.random() < 0.2:
        constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.2:
        constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.15 and "version" in labels:
        # kube-apiserver merges matchLabelKeys into the selector when it stores the pod.
        constraint["matchLabelKeys"] = ["version"]
        selector = constraint["labelSelector"]
        if "version" not in selector.get("matchLabels", {}) and not any(
            e["key"] == "version" for e in selector.get("matchExpressions", [])
        ):
            selector.setdefault("matchExpressions", []).append(
                {"key": "version", "operator": "In", "values": [labels["version"]]}
            )
    return constraint


def _pod(rng: random.Random, name: str, *, node_name: str, nodes: list[str] | None = None) -> Body:
    nodes = nodes or [node_name]
    pending = not node_name
    labels = _labels(rng)
    containers = [_container(rng, f"c{i}", ports=True) for i in range(rng.randint(1, 2))]
    spec: Body = {"containers": containers}
    if node_name:
        spec["nodeName"] = node_name
    if rng.random() < 0.25:
        inits = []
        for i in range(rng.randint(1, 2)):
            init = _container(rng, f"init{i}", ports=True)
            if rng.random() < 0.5:
                init["restartPolicy"] = "Always"  # a sidecar
                if rng.random() < 0.3:
                    init["ports"] = [{"containerPort": 9090, "hostPort": 9090}]
            inits.append(init)
        spec["initContainers"] = inits
    if rng.random() < 0.12:
        _pod_level(rng, spec)
    if rng.random() < 0.1:
        spec["overhead"] = {"cpu": rng.choice(("50m", "250m")), "memory": "64Mi"}
    affinity: Body = {}
    if rng.random() < (0.35 if pending else 0.2):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _affinity_term(rng) for _ in range(rng.randint(1, 2))
            ]
        }
    if pending:
        if rng.random() < 0.3:
            spec["tolerations"] = rng.sample(TOLERATIONS, k=rng.randint(1, 2))
        if rng.random() < 0.2:
            spec["nodeSelector"] = rng.choice(
                ({"disk": "ssd"}, {ZONE: rng.choice(ZONES)}, {HOSTNAME: rng.choice(nodes)})
            )
        if rng.random() < 0.25:
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        _node_selector_term(rng, nodes) for _ in range(rng.randint(1, 2))
                    ]
                }
            }
    # Bound pods carry them too: only their anti-affinity may bind a newcomer.
    if rng.random() < (0.2 if pending else 0.1):
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _affinity_term(rng) for _ in range(rng.randint(1, 2))
            ]
        }
    if rng.random() < (0.5 if pending else 0.1):
        spec["topologySpreadConstraints"] = [
            _spread_constraint(rng, labels) for _ in range(rng.randint(1, 2))
        ]
    if affinity:
        spec["affinity"] = affinity
    namespace = rng.choice(NAMESPACES)
    meta: Body = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}.{name}",
        "labels": labels,
    }
    status: Body = {"phase": "Pending" if pending else "Running"}
    if not pending:
        if rng.random() < 0.05:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        elif rng.random() < 0.05:
            status["phase"] = rng.choice(("Succeeded", "Failed"))
        if rng.random() < 0.15:
            _resized(rng, spec, status)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _resized(rng: random.Random, spec: Body, status: Body) -> None:
    """A running pod in the middle of an in-place resize: its containers' allocated and
    actuated requests differ from the spec; sometimes the kubelet found it infeasible."""
    statuses = []
    for container in spec["containers"] + [
        c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"
    ]:
        entry: Body = {
            "name": container["name"],
            "image": container["image"],
            "ready": True,
            "restartCount": 0,
            "imageID": "",
            "started": True,
        }
        if rng.random() < 0.8:
            entry["allocatedResources"] = {"cpu": rng.choice(("100m", "1", "2")), "memory": "256Mi"}
            entry["resources"] = {
                "requests": {
                    "cpu": rng.choice(("100m", "500m", "2")),
                    "memory": rng.choice(("128Mi", "1Gi")),
                }
            }
        statuses.append(entry)
    key = "containerStatuses"
    status[key] = [s for s in statuses if any(s["name"] == c["name"] for c in spec["containers"])]
    inits = [s for s in statuses if s not in status[key]]
    if inits:
        status["initContainerStatuses"] = inits
    if rng.random() < 0.4:
        status["conditions"] = [
            {
                "type": "PodResizePending",
                "status": "True",
                "reason": rng.choice(("Infeasible", "Deferred")),
            }
        ]


def _pod_level(rng: random.Random, spec: Body) -> None:
    """Pod-level resources (beta, on in v1.35) for cpu and memory; the containers then ask
    for neither, which keeps the pod valid (pod-level requests cover the containers')."""
    for container in spec["containers"] + spec.get("initContainers", []):
        for kind in ("requests", "limits"):
            amounts = container.get("resources", {}).get(kind)
            if amounts:
                amounts.pop("cpu", None)
                amounts.pop("memory", None)
    amounts = {"cpu": rng.choice(("500m", "2", "3")), "memory": rng.choice(("256Mi", "3Gi"))}
    if rng.random() < 0.5:
        amounts.pop(rng.choice(("cpu", "memory")))
    # Limits only: the API server copies them into the pod-level requests.
    spec["resources"] = {rng.choice(("requests", "requests", "limits")): amounts}
