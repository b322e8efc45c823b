"""A pod this scheduler bound that the kubelet then refused at admission.

The kubelet re-runs the scheduler's node checks when a pod arrives (pkg/kubelet/lifecycle's
predicate admit handler) and fails the pod for good when they no longer hold: the pod goes
``status.phase: Failed`` with ``status.reason`` ``OutOf<resource>`` (``OutOfcpu``,
``OutOfmemory``, ``OutOfpods``, ``OutOfephemeral-storage``, ``OutOfnvidia.com/gpu``...), the
name of the failed predicate (``NodeAffinity``, ``NodePorts``, ...), or one of the
admission handler's own reasons (``UnexpectedAdmissionError`` when a device plugin cannot
hand out what was counted, ``PodOSNotSupported``...). Beside another scheduler on shared
nodes, capacity ones are the signature of the race: each scheduler sees the other's binds
only through its watch, and a bind into the same room in that window makes the kubelet
refuse one of the two pods.

``status.reason`` values of other failures (``Evicted``, ``DeadlineExceeded``,
``NodeLost``...) are not admission and are not reported here.

Purely computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import dataclasses
from typing import Final

OUT_OF_PREFIX: Final = "OutOf"

CAPACITY_REASONS: Final = frozenset({"UnexpectedAdmissionError", "NodePorts"})
"""Besides ``OutOf*``: the reasons a concurrent bind by another scheduler also explains
(a device counted twice, a host port taken twice)."""

OTHER_ADMISSION_REASONS: Final = frozenset(
    {
        # The node's labels, taints or OS changed between the decision and the kubelet's
        # check, or the kubelet reads them otherwise (the predicate names of its filter).
        "NodeAffinity",
        "NodeName",
        "TaintToleration",
        "NodeDeclaredFeatures",
        "PodOSSelectorNodeLabelDoesNotMatch",
        "PodOSNotSupported",
        "SupplementalGroupsPolicyNotSupported",
        "InitContainerRestartPolicyForbidden",
        "InvalidNodeInfo",
        "UnknownReason",
        "UnexpectedPredicateFailureType",
    }
)

DOCS: Final = "docs/operating.md#metricschedkubeletrejections"
_MAX_REASON = 63  # a label value kept short: the resource part of OutOf<resource> is free text
_MAX_MESSAGE = 300


@dataclasses.dataclass(frozen=True, slots=True)
class KubeletRejection:
    """A bound pod the kubelet failed at admission, as its status says."""

    namespace: str
    name: str
    uid: str
    node: str
    reason: str
    message: str


def is_admission_reason(reason: str) -> bool:
    """Whether a Failed pod's ``status.reason`` is the kubelet refusing it at admission."""
    return (
        (reason.startswith(OUT_OF_PREFIX) and len(reason) > len(OUT_OF_PREFIX))
        or reason in CAPACITY_REASONS
        or reason in OTHER_ADMISSION_REASONS
    )


def is_capacity_race(reason: str) -> bool:
    """Whether another scheduler's concurrent bind explains the rejection."""
    return reason.startswith(OUT_OF_PREFIX) or reason in CAPACITY_REASONS


def metric_reason(reason: str) -> str:
    """The reason as the rejection counter's label."""
    return reason[:_MAX_REASON]


def event_message(rejection: KubeletRejection, *, scheduler: str) -> str:
    """The Warning Event on the pod: what happened, the likely cause, what to do."""
    said = f" ({rejection.message[:_MAX_MESSAGE]})" if rejection.message else ""
    head = (
        f"the kubelet on {rejection.node} rejected this pod after {scheduler} bound it: "
        f"{rejection.reason}{said}. "
    )
    if is_capacity_race(rejection.reason):
        cause = (
            "Most likely another scheduler (kube-scheduler or a third one) bound a pod into "
            f"the same room on {rejection.node} before {scheduler} saw that bind: each "
            "scheduler sees the other's binds only through its watch. "
        )
    else:
        cause = (
            f"The node no longer matched what {scheduler} saw when it decided (labels, taints "
            "or features changed, or the kubelet reads them otherwise). "
        )
    return (
        head
        + cause
        + "A pod owned by a controller is replaced; a bare pod is lost and must be created "
        "again. Give each scheduler its own nodes (node pools, taints) or leave headroom on "
        f"shared ones: see {DOCS}."
    )
