"""Target reservations of rebalancing: room held on a node for one pod of a workload.

When the rebalancer evicts a pod to move it to the node its dry run chose, the freed room
and the target's room would go to whatever arrives first. A reservation holds the target:
a placeholder of the evicted pod (its requests, and its workload for the metric
estimate) counted on the target node as a just-bound pod, so NodeResourcesFit, the scores
and the estimate of every other pod see that room as taken. The snapshot lists the
placeholders by node (``ClusterSnapshot.reserved``): a pod of the reserving workload
(``PodInfo.usage_workload``) is decided on the nodes without its workload's placeholders
(``release_for``), so it may take the room, and its bind consumes one hold.

A placeholder carries no labels but the one the workload is known by, no ports, no
affinity terms and no volumes: it keeps room, and must not satisfy or refuse another
pod's affinity, spreading or volume limits for a pod that is not there yet.

Purely computational, like the rest of ``core``: no I/O, no clocks, no module-level state.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from metricsched.core import columns, model, node_state

SUFFIX: Final = "/reserve"
"""A placeholder's uid: the evicted pod's, with this suffix (never a real pod's uid)."""

# The one label ``usage_workload`` reads (a Deployment across its ReplicaSets).
_WORKLOAD_LABELS: Final = ("pod-template-hash",)


def placeholder(pod: model.PodInfo, *, node: model.NodeName, at: float) -> model.PodInfo:
    """The room ``pod`` (the evicted one) needs, held on ``node`` from unix time ``at``."""
    return dataclasses.replace(
        pod,
        uid=pod.uid + SUFFIX,
        node_name=node,
        bound_at=at,
        labels={k: v for k, v in pod.labels.items() if k in _WORKLOAD_LABELS},
        host_ports=(),
        topology_spread=(),
        pod_affinity=(),
        pod_anti_affinity=(),
        preferred_pod_affinity=(),
        preferred_pod_anti_affinity=(),
        volume_claims=(),
        ephemeral_claims=(),
        resource_claims=(),
        placed_by="",
        nominated_node="",
        deleting=False,
        phase="Running",
    )


def is_placeholder(uid: str) -> bool:
    return uid.endswith(SUFFIX)


def held_for(
    snapshot: model.ClusterSnapshot, workload: str
) -> dict[model.NodeName, tuple[model.PodInfo, ...]]:
    """The placeholders ``workload`` holds, by node."""
    found: dict[model.NodeName, tuple[model.PodInfo, ...]] = {}
    for node, held in snapshot.reserved.items():
        mine = tuple(p for p in held if p.usage_workload == workload)
        if mine:
            found[node] = mine
    return found


def release_for(
    pod: model.PodInfo, snapshot: model.ClusterSnapshot, table: columns.NodeTable | None
) -> tuple[model.ClusterSnapshot, columns.NodeTable | None]:
    """The snapshot (and its table) as ``pod`` sees it: its own workload's held room is
    free on every node that holds it. Unchanged (the same objects) when it holds none."""
    mine = held_for(snapshot, pod.usage_workload) if snapshot.reserved else {}
    for node, held in mine.items():
        state = snapshot.nodes.get(node)
        if state is None:
            continue
        uids = {p.uid for p in held}
        freed = node_state.build(
            state.node,
            (p for p in state.pods if p.uid not in uids),
            recent_binds=state.recent_binds,
        )
        snapshot, table = columns.replace_state(snapshot, table, freed)
    if mine:
        snapshot = dataclasses.replace(
            snapshot,
            reserved={
                node: tuple(p for p in held if p.usage_workload != pod.usage_workload)
                for node, held in snapshot.reserved.items()
                if node not in mine or len(held) > len(mine[node])
            },
        )
    return snapshot, table


def describe(held: tuple[model.PodInfo, ...]) -> str:
    """One line for explain: whose room a node holds and how much."""
    parts = []
    for pod in held:
        r = pod.requests
        parts.append(f"{pod.usage_workload} (cpu {r.milli_cpu}m, memory {r.memory // 2**20}Mi)")
    return "room held for the replacement of a rebalanced pod: " + ", ".join(parts)
