"""Scenario pods as controllers own them, for the rebalance pair (issue 23).

Rebalancing moves only pods whose controller recreates them, so the two systems of the
pair (``metricsched-owned``, rebalance off, and ``metricsched-rebalance``, on) play the
scenario's own pods as one 1-replica ReplicaSet per event, under one PodDisruptionBudget
per workload (``api``, ``batch``, ``web``; ``maxUnavailable: MAX_UNAVAILABLE``). A
workload's life counts from its first pod's bind; at its end the ReplicaSet is deleted
(foreground: its pod goes first). The other scheduler's pods stay bare pods.

``Ledger`` reads the trial's pod watch: which pods the Eviction API took (their
``DisruptionTarget`` condition, reason ``EvictionByEvictionAPI``), where each workload's
replacement went, and whether an eviction ever left more of a budget's workloads down by
evictions than its ``maxUnavailable`` (a violation: the API server should never allow one).

Pure: no I/O, no clocks (times come in with the events).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bench.quality import scenarios

WORKLOAD_LABEL = "bench.metricsched.io/workload"
MAX_UNAVAILABLE = 5  # per budget (one budget per workload kind)
EVICTION_REASON = "EvictionByEvictionAPI"


def replicaset_body(event: scenarios.PodEvent, scheduler: str) -> dict[str, Any]:
    """One replica of ``event``'s pod, owned by a ReplicaSet named after the event."""
    pod = scenarios.pod_body(event, scheduler)
    labels = {**pod["metadata"]["labels"], WORKLOAD_LABEL: event.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": event.name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {WORKLOAD_LABEL: event.name}},
            "template": {
                "metadata": {"labels": labels, "annotations": pod["metadata"]["annotations"]},
                "spec": pod["spec"],
            },
        },
    }


def budget_bodies() -> list[dict[str, Any]]:
    """One PodDisruptionBudget per workload kind of the scenarios' own pods."""
    return [
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": w.name},
            "spec": {
                "maxUnavailable": MAX_UNAVAILABLE,
                "selector": {"matchLabels": {"app": w.name, scenarios.QUALITY_LABEL: "true"}},
            },
        }
        for w in scenarios.WORKLOADS
    ]


def workload_of(pod: Mapping[str, Any]) -> str:
    """The event a pod plays: its workload label, else (a bare pod) its name."""
    meta = pod.get("metadata") or {}
    return str((meta.get("labels") or {}).get(WORKLOAD_LABEL) or meta.get("name") or "")


def evicted(pod: Mapping[str, Any]) -> bool:
    """The Eviction API took this pod (kube-apiserver marks it before deleting it)."""
    return any(
        c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == EVICTION_REASON
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    running = status.get("phase") == "Running"
    return running and (not ready or ready[0].get("status") == "True")


@dataclasses.dataclass(frozen=True)
class Eviction:
    t: float
    workload: str
    kind: str  # the budget's workload kind (app label)
    pod: str
    node: str
    down: int  # the budget's workloads down by evictions, this one included


@dataclasses.dataclass
class Ledger:
    """Evictions, moves and budget violations, from the trial's pod watch events."""

    evictions: list[Eviction] = dataclasses.field(default_factory=list)
    moves: dict[str, list[tuple[str, str]]] = dataclasses.field(default_factory=dict)
    _seen: set[str] = dataclasses.field(default_factory=set)  # evicted pod names
    _down: dict[str, Eviction] = dataclasses.field(default_factory=dict)  # workload -> open

    def see(self, t: float, kind: str, pod: Mapping[str, Any]) -> None:
        """One watch event (``kind``: ADDED, MODIFIED, DELETED) of a scenario pod."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        workload = labels.get(WORKLOAD_LABEL)
        if not workload:
            return  # a bare pod: nothing recreates it, nothing evicts it
        name = str(meta.get("name") or "")
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if evicted(pod) and name not in self._seen:
            self._seen.add(name)
            app = str(labels.get("app") or "")
            down = 1 + sum(1 for e in self._down.values() if e.kind == app)
            record = Eviction(t, workload, app, name, node, down)
            self.evictions.append(record)
            self._down[workload] = record
            return
        opened = self._down.get(workload)
        if opened is None or kind == "DELETED" or name == opened.pod:
            return
        if node and _ready(pod):  # the replacement runs: the workload is back
            del self._down[workload]
            self.moves.setdefault(workload, []).append((opened.node, node))

    def end(self, workload: str) -> None:
        """The scenario ended ``workload`` (its ReplicaSet is being deleted)."""
        self._down.pop(workload, None)

    def figures(self) -> dict[str, Any]:
        moved = {w for w, hops in self.moves.items() if any(a != b for a, b in hops)}
        per_workload: dict[str, int] = {}
        for e in self.evictions:
            per_workload[e.workload] = per_workload.get(e.workload, 0) + 1
        return {
            "evictions": len(self.evictions),
            "workloads_evicted": len(per_workload),
            "workloads_evicted_twice": sum(1 for n in per_workload.values() if n > 1),
            "pods_moved": len(moved),
            "evictions_per_pod_moved": (
                round(len(self.evictions) / len(moved), 3) if moved else None
            ),
            "replaced_on_same_node": sum(
                1 for hops in self.moves.values() for a, b in hops if a == b
            ),
            "budget_violations": sum(1 for e in self.evictions if e.down > MAX_UNAVAILABLE),
            "most_down_at_once": max((e.down for e in self.evictions), default=0),
            "still_down_at_end": len(self._down),
            "eviction_times": [round(e.t, 2) for e in self.evictions],
        }
