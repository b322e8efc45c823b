"""Scenario pods as controllers own them, for the rebalance pair (issue 23).

Rebalancing moves only pods whose controller recreates them, so the two systems of the
pair (``metricsched-owned``, rebalance off, and ``metricsched-rebalance``, on) play the
scenario's own pods as one 1-replica ReplicaSet per event, under one PodDisruptionBudget
per workload (``api``, ``batch``, ``web``, and scenario e's ``surge``; ``maxUnavailable:
MAX_UNAVAILABLE``). A
workload's life counts from its first pod's bind; at its end the ReplicaSet is deleted
(foreground: its pod goes first). The other scheduler's pods stay bare pods.

``Ledger`` reads the trial's pod watch: which pods the Eviction API took (their
``DisruptionTarget`` condition, reason ``EvictionByEvictionAPI``), where each workload's
replacement went, and whether an eviction ever left more of a budget's workloads down by
evictions than its ``maxUnavailable`` (a violation: the API server should never allow one),
and whether any workload was evicted more often within the policy's ``workloadInterval``
than its ``maxPerWorkload`` allows (the per-workload limiter failing: ``over_limit``).

Pure: no I/O, no clocks (times come in with the events).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bench.quality import scenarios

WORKLOAD_LABEL = "bench.metricsched.io/workload"
MAX_UNAVAILABLE = 5  # per budget (one budget per workload kind)
EVICTION_REASON = "EvictionByEvictionAPI"


def replicaset_body(
    event: scenarios.PodEvent, scheduler: str, *, t0: float = 0.0
) -> dict[str, Any]:
    """One replica of ``event``'s pod, owned by a ReplicaSet named after the event (``t0``:
    as for ``scenarios.pod_body``)."""
    pod = scenarios.pod_body(event, scheduler, t0=t0)
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
        for w in (*scenarios.WORKLOADS, scenarios.SURGE)
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


def over_limit(times: Mapping[str, Sequence[float]], *, interval_s: float, most: int) -> list[str]:
    """The workloads evicted more than ``most`` times within some ``interval_s`` (eviction
    times by workload, seconds): what the operator's per-workload limiter must prevent."""
    found = []
    for workload, seen in sorted(times.items()):
        ordered = sorted(seen)
        if any(ordered[i + most] - ordered[i] < interval_s for i in range(len(ordered) - most)):
            found.append(workload)
    return found


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

    def figures(
        self, *, workload_interval_s: float = 300.0, max_per_workload: int = 1
    ) -> dict[str, Any]:
        """The pair's figures; ``workload_interval_s`` and ``max_per_workload``: the policy's
        per-workload limit (its CRD defaults, 5m and 1, unless told)."""
        moved = {w for w, hops in self.moves.items() if any(a != b for a, b in hops)}
        per_workload: dict[str, int] = {}
        times: dict[str, list[float]] = {}
        for e in self.evictions:
            per_workload[e.workload] = per_workload.get(e.workload, 0) + 1
            times.setdefault(e.workload, []).append(e.t)
        beyond = over_limit(times, interval_s=workload_interval_s, most=max_per_workload)
        return {
            "evictions": len(self.evictions),
            "workloads_evicted": len(per_workload),
            "workloads_evicted_twice": sum(1 for n in per_workload.values() if n > 1),
            "workloads_over_limit": len(beyond),
            "workload_limit": [workload_interval_s, max_per_workload],
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
