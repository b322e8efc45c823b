"""Node state built from the pods on a node: the one place that does it.

``build`` turns a node and the pods counted on it into a ``model.NodeState``: what they
request (as the filters count it), the host ports they hold, the pods themselves, the
node's recent binds, and what they request as kube-scheduler's scores count it
(``nonzero_requested``: a container without a cpu or memory request counts 100m / 200Mi).
The runtime's cluster cache, the snapshots the tests, the parity oracle and the bench
build (``snapshot``), the assume step (``add_pod``) and the what-if copies of shadow
evaluation, rebalancing and preemption all go through it, so no two of them can disagree
about a node.

Purely computational, like the rest of ``core``: no I/O, no clocks, no module-level state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from metricsched.core import model, pod_resources


def build(
    node: model.NodeInfo, pods: Iterable[model.PodInfo], *, recent_binds: Iterable[float] = ()
) -> model.NodeState:
    """The state of ``node`` holding ``pods`` (already chosen: bound there, not terminated),
    with ``recent_binds`` (unix times this scheduler bound pods there) for the burst penalty."""
    on_node = tuple(pods)
    return model.NodeState(
        node=node,
        requested=pod_resources.sum_resources(pod.requests for pod in on_node),
        used_ports=frozenset(port for pod in on_node for port in pod.host_ports),
        pods=on_node,
        recent_binds=tuple(recent_binds),
        nonzero_requested=pod_resources.sum_resources(
            pod.requests if pod.nonzero_requests is None else pod.nonzero_requests
            for pod in on_node
        ),
    )


def add_pod(state: model.NodeState, pod: model.PodInfo) -> model.NodeState:
    """``state`` with ``pod`` placed on it (the assume cache's view after a bind)."""
    return build(state.node, (*state.pods, pod), recent_binds=state.recent_binds)


def snapshot(
    nodes: Iterable[model.NodeInfo],
    pods: Iterable[model.PodInfo],
    recent_binds: Mapping[model.NodeName, Sequence[float]] | None = None,
) -> model.ClusterSnapshot:
    """A snapshot with every bound, non-terminated pod counted on its node.

    Pods bound to nodes that are not listed are ignored (the node is gone or not yet
    seen); pods in phase Succeeded or Failed free their resources, as in the scheduler's
    informer. Deleting pods still count: their containers may still run. Unbound pods
    with ``status.nominatedNodeName`` are the snapshot's ``nominated`` pods.
    """
    binds = recent_binds or {}
    node_list = list(nodes)
    placed: dict[model.NodeName, list[model.PodInfo]] = {n.name: [] for n in node_list}
    nominated: dict[model.NodeName, tuple[model.PodInfo, ...]] = {}
    for pod in pods:
        if model.finished(pod.phase):
            continue
        if not pod.node_name:
            if pod.nominated_node:
                node = model.NodeName(pod.nominated_node)
                nominated[node] = (*nominated.get(node, ()), pod)
            continue
        bucket = placed.get(model.NodeName(pod.node_name))
        if bucket is not None:
            bucket.append(pod)
    return model.ClusterSnapshot(
        nodes={
            node.name: build(node, placed[node.name], recent_binds=binds.get(node.name, ()))
            for node in node_list
        },
        nominated=nominated,
    )
