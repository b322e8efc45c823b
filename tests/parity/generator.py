"""Seeded random scheduling scenarios, as the API server would store them.

A scenario is a small cluster (labelled namespaces, nodes, pods bound to them,
PersistentVolumeClaims and the PersistentVolumes they are bound to) and a few pending pods,
each to be asked about that same cluster. Everything is plain Kubernetes JSON, so
the same scenario is read by metricsched's parser and by kube-scheduler's Go types.

The objects are valid (the API server would accept them) and already in the shape it
stores: labels ``kubernetes.io/metadata.name`` on namespaces, ``matchLabelKeys`` of
spread constraints merged into their label selectors (as kube-apiserver v1.35 does).
Priorities are ``spec.priority`` as the Priority admission plugin resolves a
priorityClassName (no PriorityClass objects); there are no StorageClasses, CSI volumes or
CSINodes yet. Values come from small pools on purpose: collisions (the same label on a pod
and a selector, the same host port twice, a domain that is full, a claim two pods mount)
are where the rules meet. Nothing here is random unless it comes from the
``random.Random`` passed in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tests.parity import pools, storage

Body = pools.Body


def scenario(rng: random.Random, *, pods: int) -> Body:
    """A cluster and ``pods`` pending pods to ask about it."""
    namespaces = [_namespace(rng, name) for name in pools.NAMESPACES]
    # Mostly small clusters, where every rule meets often; sometimes a bigger one (kept
    # under 100 nodes: there kube-scheduler stops at enough feasible nodes).
    count = rng.randint(1, 10) if rng.random() < 0.9 else rng.randint(11, 40)
    nodes = [_node(rng, index) for index in range(count)]
    node_names = [n["metadata"]["name"] for n in nodes]
    # A few are bound to a node that is gone (or not yet seen): they count nowhere.
    hosts = [*node_names, *(["node-gone"] if rng.random() < 0.2 else [])]
    claims, volumes = (
        storage.claims_and_volumes(rng, node_names) if rng.random() < 0.6 else ([], [])
    )
    existing = [
        _pod(rng, f"old-{index}", node_name=rng.choice(hosts), claims=claims)
        for index in range(rng.randint(0, 20))
    ]
    _refuse_port_conflicts(existing)
    incoming = [
        _pod(rng, f"new-{index}", node_name="", nodes=node_names, claims=claims)
        for index in range(pods)
    ]
    return {
        "namespaces": namespaces,
        "claims": claims,
        "volumes": volumes,
        "nodes": nodes,
        "pods": existing,
        "incoming": incoming,
    }


def pending_pod(rng: random.Random, name: str, nodes: list[str]) -> Body:
    """A pending pod without claims (tests/parity/extras.py nominates some)."""
    return _pod(rng, name, node_name="", nodes=nodes)


def _refuse_port_conflicts(pods: list[Body]) -> None:
    """A pod bound where another running pod holds its host port is refused by the kubelet
    (phase Failed), as in a real cluster; kube-scheduler's preemption dry run cannot
    count two holders of one port (NodeInfo keeps a set)."""
    held: dict[str, set[tuple[str, int, str]]] = {}
    for pod in pods:
        if pod["status"]["phase"] != "Running":
            continue
        spec = pod["spec"]
        ports = {
            (entry.get("protocol", "TCP"), entry["hostPort"], entry.get("hostIP", "0.0.0.0"))
            for container in [*spec["containers"], *spec.get("initContainers", [])]
            for entry in container.get("ports", [])
            if entry.get("hostPort")
        }
        mine = held.setdefault(spec["nodeName"], set())
        if any(_same_port(port, other) for port in ports for other in mine):
            pod["status"]["phase"] = "Failed"
        else:
            mine |= ports


def _same_port(one: tuple[str, int, str], other: tuple[str, int, str]) -> bool:
    """(protocol, port, host IP) pairs that collide: 0.0.0.0 is every address."""
    return one[:2] == other[:2] and (one[2] == other[2] or "0.0.0.0" in (one[2], other[2]))


def _namespace(rng: random.Random, name: str) -> Body:
    labels = {"kubernetes.io/metadata.name": name}
    if rng.random() < 0.8:
        labels["team"] = rng.choice("ab")
    if rng.random() < 0.5:
        labels["env"] = rng.choice(("prod", "dev"))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


# --- nodes -----------------------------------------------------------------------------


def _node(rng: random.Random, index: int) -> Body:
    name = f"node-{index}"
    labels = {"kubernetes.io/os": "linux"}
    roll = rng.random()
    if roll < 0.9:
        labels[pools.HOSTNAME] = name
    elif roll < 0.97:
        labels[pools.HOSTNAME] = f"host-{index // 2}"  # hostnames need not be node names

    if rng.random() < 0.85:
        zone = rng.choice(pools.ZONES)
        roll = rng.random()
        if roll < 0.9:
            labels[pools.ZONE] = zone
        if roll > 0.8:  # older nodes carry the beta label, some only that
            labels[pools.LEGACY_ZONE] = zone
        if rng.random() < 0.3:
            labels[pools.REGION] = "region-1"
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
        allocatable[pools.EXTENDED] = rng.choice(("0", "1", "2"))
    if rng.random() < 0.2:
        allocatable[pools.HUGEPAGES] = rng.choice(("0", "64Mi", "128Mi"))
    if rng.random() < 0.03:
        del allocatable["pods"]  # a node that admits no pods
    spec: Body = {}
    taints = rng.sample(pools.TAINTS, k=rng.choice((0, 0, 0, 0, 0, 0, 1, 1, 2)))
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
    labels = {"app": rng.choice(pools.APPS)}
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
        resources[pools.EXTENDED] = rng.choice(("1", "2"))
    if rng.random() < 0.04:
        resources[pools.HUGEPAGES] = rng.choice(("2Mi", "64Mi"))
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
            if pools.HUGEPAGES in requests:  # hugepages need limits equal to requests
                container["resources"]["limits"] = {pools.HUGEPAGES: requests[pools.HUGEPAGES]}
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
        return {"matchLabels": {"app": rng.choice(pools.APPS)}}
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    expression: Body = {"key": rng.choice(("app", "tier")), "operator": operator}
    if operator in ("In", "NotIn"):
        expression["values"] = rng.sample((*pools.APPS, "front", "back"), k=rng.randint(1, 2))
    return {"matchExpressions": [expression]}


def _affinity_term(rng: random.Random) -> Body:
    term: Body = {"topologyKey": rng.choice((pools.HOSTNAME, pools.HOSTNAME, pools.ZONE, "disk"))}
    if rng.random() < 0.9:
        term["labelSelector"] = _selector(rng)
    roll = rng.random()
    if roll < 0.5:  # both: the union of the listed and the selected namespaces
        term["namespaces"] = rng.sample((*pools.NAMESPACES, "gone"), k=rng.randint(1, 3))
    if 0.3 < roll < 0.7:
        term["namespaceSelector"] = _namespace_selector(rng)
    return term


def _namespace_selector(rng: random.Random) -> Body:
    roll = rng.random()
    if roll < 0.25:
        return {}  # every namespace
    if roll < 0.6:
        return {"matchLabels": {"team": rng.choice("ab")}}
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    expression: Body = {"key": rng.choice(("env", "team")), "operator": operator}
    if operator in ("In", "NotIn"):
        expression["values"] = rng.sample(("prod", "dev", "a"), k=rng.randint(1, 2))
    selector: Body = {"matchExpressions": [expression]}
    if rng.random() < 0.2:
        selector["matchLabels"] = {"kubernetes.io/metadata.name": rng.choice(pools.NAMESPACES)}
    return selector


def _weighted(rng: random.Random, terms: list[Body], key: str) -> list[Body]:
    """Preferred terms: they weigh in scores only and must not change feasibility."""
    return [{"weight": rng.randint(1, 100), key: term} for term in terms]


def _node_selector_term(rng: random.Random, nodes: list[str]) -> Body:
    expressions: list[Body] = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        key = rng.choice(("disk", "tier", pools.ZONE, "gpu"))
        operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
        expression: Body = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            pool = {
                "disk": ("ssd", "hdd"),
                "tier": ("1", "3", "5"),
                pools.ZONE: pools.ZONES,
                "gpu": ("true",),
            }
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
        "topologyKey": rng.choice((pools.HOSTNAME, pools.ZONE, pools.ZONE, "disk")),
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


def _pod(
    rng: random.Random,
    name: str,
    *,
    node_name: str,
    nodes: list[str] | None = None,
    claims: Sequence[Body] = (),
) -> Body:
    nodes = nodes or [node_name]
    pending = not node_name
    labels = _labels(rng)
    namespace = rng.choice(pools.NAMESPACES)
    containers = [_container(rng, f"c{i}", ports=True) for i in range(rng.randint(1, 2))]
    spec: Body = {"containers": containers}
    if node_name:
        spec["nodeName"] = node_name
    if (priority := rng.choice(pools.PRIORITIES)) is not None:
        spec["priority"] = priority
    if pending and (preemption := rng.choice(pools.PREEMPTION_POLICIES)) is not None:
        spec["preemptionPolicy"] = preemption
    if rng.random() < (0.4 if pending else 0.15) and (
        volumes := storage.claim_volumes(rng, namespace, claims)
    ):
        spec["volumes"] = volumes
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
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.2:
            terms = [_affinity_term(rng) for _ in range(rng.randint(1, 2))]
            affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = (
                _weighted(rng, terms, "podAffinityTerm")
            )
    if pending:
        if rng.random() < 0.3:
            spec["tolerations"] = rng.sample(pools.TOLERATIONS, k=rng.randint(1, 2))
        if rng.random() < 0.2:
            spec["nodeSelector"] = rng.choice(
                (
                    {"disk": "ssd"},
                    {pools.ZONE: rng.choice(pools.ZONES)},
                    {pools.HOSTNAME: rng.choice(nodes)},
                )
            )
        if rng.random() < 0.25:
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        _node_selector_term(rng, nodes) for _ in range(rng.randint(1, 2))
                    ]
                }
            }
        if rng.random() < 0.25:
            terms = [_node_selector_term(rng, nodes) for _ in range(rng.randint(1, 2))]
            affinity.setdefault("nodeAffinity", {})[
                "preferredDuringSchedulingIgnoredDuringExecution"
            ] = _weighted(rng, terms, "preference")
    # Bound pods carry them too: only their anti-affinity may bind a newcomer.
    if rng.random() < (0.2 if pending else 0.1):
        affinity.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            _affinity_term(rng) for _ in range(rng.randint(1, 2))
        ]
    if rng.random() < (0.5 if pending else 0.1):
        spec["topologySpreadConstraints"] = [
            _spread_constraint(rng, labels) for _ in range(rng.randint(1, 2))
        ]
    if affinity:
        spec["affinity"] = affinity
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
