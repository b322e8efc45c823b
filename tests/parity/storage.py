"""Seeded PersistentVolumeClaims and PersistentVolumes for the parity scenarios, and the
claim volumes of pods, in the shape the API server stores them after the PV controller
(``pv.kubernetes.io/bind-completed``) has done its part. No StorageClasses, CSI volumes or
CSINodes yet."""

from __future__ import annotations

import random
from collections.abc import Sequence

from tests.parity import pools

Body = pools.Body


def claims_and_volumes(rng: random.Random, nodes: list[str]) -> tuple[list[Body], list[Body]]:
    """PersistentVolumeClaims in every namespace, most bound to a PersistentVolume (with or
    without node affinity and zone labels), some pre-bound (``volumeName`` set, the PV
    controller not done yet), unbound (no StorageClass: immediate binding), being deleted,
    lost, or bound to a volume that is gone. No StorageClasses, CSI volumes or CSINodes."""
    claims: list[Body] = []
    volumes: list[Body] = []
    for index in range(rng.randint(1, 6)):
        namespace = rng.choice(pools.NAMESPACES)
        name = f"data-{index}"
        claim: Body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"pvc-{index}"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeMode": "Filesystem",
            },
            "status": {"phase": "Pending"},
        }
        claims.append(claim)
        roll = rng.random()
        if roll < 0.12:
            continue  # unbound, no StorageClass: kube-scheduler waits for the PV controller
        volume_name = f"pv-{index}"
        claim["spec"]["volumeName"] = volume_name
        if roll < 0.2:
            continue  # pre-bound by the user, not yet bound (no volume either)
        claim["metadata"]["annotations"] = {pools.BIND_COMPLETED: "yes"}
        claim["status"] = {
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"},
        }
        if roll < 0.25:
            claim["status"]["phase"] = "Lost"  # its volume was deleted
            continue
        if roll < 0.29:
            claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            claim["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
        if roll < 0.33:
            continue  # bound to a volume that is gone (not yet marked Lost)
        volumes.append(_volume(rng, volume_name, claim=claim, nodes=nodes))
    return claims, volumes


def _volume(rng: random.Random, name: str, *, claim: Body, nodes: list[str]) -> Body:
    labels: dict[str, str] = {}
    if rng.random() < 0.4:
        key = rng.choice((pools.ZONE, pools.ZONE, pools.LEGACY_ZONE))
        # A regional volume lists its zones joined by "__".
        labels[key] = "__".join(sorted(rng.sample(pools.ZONES, k=rng.choice((1, 1, 1, 2)))))
    if rng.random() < 0.1:
        labels[rng.choice((pools.REGION, "failure-domain.beta.kubernetes.io/region"))] = "region-1"
    spec: Body = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "volumeMode": "Filesystem",
        "hostPath": {"path": f"/data/{name}", "type": ""},
        "claimRef": {
            "kind": "PersistentVolumeClaim",
            "namespace": claim["metadata"]["namespace"],
            "name": claim["metadata"]["name"],
            "uid": claim["metadata"]["uid"],
        },
    }
    if rng.random() < 0.55:
        terms = [_volume_term(rng, nodes) for _ in range(rng.choice((1, 1, 2)))]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels} if labels else {"name": name},
        "spec": spec,
        "status": {"phase": "Bound"},
    }


def _volume_term(rng: random.Random, nodes: list[str]) -> Body:
    """A node selector term as local and zonal volumes carry them: a hostname, a zone, or
    any label; now and then a field (the volume's affinity sees labels only)."""
    roll = rng.random()
    if roll < 0.35:
        hosts = rng.sample([*nodes, "node-gone"], k=min(len(nodes) + 1, rng.choice((1, 1, 2))))
        return {"matchExpressions": [{"key": pools.HOSTNAME, "operator": "In", "values": hosts}]}
    if roll < 0.65:
        zones = rng.sample(pools.ZONES, k=rng.choice((1, 2)))
        key = rng.choice((pools.ZONE, pools.ZONE, pools.LEGACY_ZONE))
        return {"matchExpressions": [{"key": key, "operator": "In", "values": zones}]}
    if roll < 0.9:
        key = rng.choice(("disk", "tier"))
        operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt"))
        expression: Body = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            expression["values"] = [rng.choice(("ssd", "hdd") if key == "disk" else ("1", "3"))]
        elif operator == "Gt":
            expression["values"] = [str(rng.randint(0, 4))]
        return {"matchExpressions": [expression]}
    return {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [rng.choice(nodes)]}]
    }


def claim_volumes(rng: random.Random, namespace: str, claims: Sequence[Body]) -> list[Body]:
    """Volumes of the pod's claims (of its namespace); now and then a claim that is missing."""
    mine = [c["metadata"]["name"] for c in claims if c["metadata"]["namespace"] == namespace]
    names = rng.sample(mine, k=min(len(mine), rng.choice((1, 1, 2))))
    if rng.random() < (0.05 if names else 0.15):
        names.append("missing")
    volumes: list[Body] = [
        {"name": f"v{index}", "persistentVolumeClaim": {"claimName": claim}}
        for index, claim in enumerate(names)
    ]
    if rng.random() < 0.2:
        volumes.append({"name": "scratch", "emptyDir": {}})
    return volumes
