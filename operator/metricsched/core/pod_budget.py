"""What one pod may ask of a scheduling attempt: caps on the terms the filters evaluate.

The cycle runs on the operator's one event loop, shared by every namespace (and by the
Lease loop and the heartbeat). Its cost grows with the pod's terms times the nodes and
pods they are matched against: one pod with 1,000 required anti-affinity terms of 100
values cost 9 s per attempt at 500 nodes, 10,000 tolerations 3.7 s, 500 spread
constraints 0.8 s. A pod past any cap here is not evaluated: it gets a FailedScheduling
event naming the cap, and backs off like any unschedulable pod. The caps are far above
what workloads use (kube-scheduler has none; the API server's only bound is the object's
size), and the same for every pod.

Pure: no I/O, no clocks, no module-level state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metricsched.core import model

MAX_POD_AFFINITY_TERMS = 32  # required and preferred, affinity and anti-affinity, each
MAX_SELECTOR_VALUES = 1024  # label-selector values over all pod (anti-)affinity terms
MAX_NODE_AFFINITY_TERMS = 64  # nodeSelectorTerms, and preferred node affinity terms
MAX_TOLERATIONS = 256
MAX_SPREAD_CONSTRAINTS = 16
MAX_HOST_PORTS = 256


def refusal(pod: model.PodInfo) -> str | None:
    """Why ``pod`` is too expensive to evaluate; None if it is within every cap."""
    counts = (
        (len(pod.pod_anti_affinity), MAX_POD_AFFINITY_TERMS, "required pod anti-affinity terms"),
        (len(pod.pod_affinity), MAX_POD_AFFINITY_TERMS, "required pod affinity terms"),
        (
            len(pod.preferred_pod_anti_affinity),
            MAX_POD_AFFINITY_TERMS,
            "preferred pod anti-affinity terms",
        ),
        (len(pod.preferred_pod_affinity), MAX_POD_AFFINITY_TERMS, "preferred pod affinity terms"),
        (len(pod.required_node_affinity), MAX_NODE_AFFINITY_TERMS, "node selector terms"),
        (
            len(pod.preferred_node_affinity),
            MAX_NODE_AFFINITY_TERMS,
            "preferred node affinity terms",
        ),
        (len(pod.tolerations), MAX_TOLERATIONS, "tolerations"),
        (len(pod.topology_spread), MAX_SPREAD_CONSTRAINTS, "topology spread constraints"),
        (len(pod.host_ports), MAX_HOST_PORTS, "host ports"),
    )
    for count, cap, what in counts:
        if count > cap:
            return _message(f"{count} {what}", cap)
    values = _selector_values(
        (
            *pod.pod_affinity,
            *pod.pod_anti_affinity,
            *(t.get("podAffinityTerm") or {} for t in pod.preferred_pod_affinity),
            *(t.get("podAffinityTerm") or {} for t in pod.preferred_pod_anti_affinity),
        )
    )
    if values > MAX_SELECTOR_VALUES:
        return _message(
            f"{values} label selector values in its pod affinity terms", MAX_SELECTOR_VALUES
        )
    return None


def _message(what: str, cap: int) -> str:
    return (
        f"pod is too expensive to evaluate: {what} (metricsched's limit is {cap}); "
        "simplify the pod, or let another scheduler place it (spec.schedulerName)"
    )


def _selector_values(terms: Iterable[Any]) -> int:
    total = 0
    for term in terms:
        if not isinstance(term, dict):
            continue
        for key in ("labelSelector", "namespaceSelector"):
            selector = term.get(key)
            if not isinstance(selector, dict):
                continue
            total += len(selector.get("matchLabels") or {})
            for expression in selector.get("matchExpressions") or ():
                if isinstance(expression, dict):
                    total += 1 + len(expression.get("values") or ())
    return total
