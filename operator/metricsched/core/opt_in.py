"""Namespace and pod-label opt-in: which new pods the admission webhook hands to this install.

A namespace opts in with the label ``metricsched.io/scheduler: <scheduler name>``; the
webhook then sets ``spec.schedulerName`` on the pods created there, so that workloads
need no edit. A single workload opts in with the same label on its pods (its pod
template), in a namespace that is not opted in. Precedence, most specific first: kube-system
and the install's namespace are never changed; a pod's opt-out label wins over both
opt-ins; a pod's opt-in label naming this install opts it in whatever its namespace's
label says, and naming another install leaves it to that one, even in a namespace opted
into this one; a pod with no such label follows its namespace.

It only ever fills in a scheduler for pods that name none (or
``default-scheduler``, the API server's default): a pod that names its own scheduler, a
pod already on a node, a DaemonSet's pod (pinned to its node: nothing to choose), a pod
labelled ``metricsched.io/opt-out: "true"``, and every pod of kube-system or of the
install's own namespace are left as they are.

Pure: the decision reads the pod as the AdmissionReview carries it and the rules; no I/O,
no clocks, no module-level state. The MutatingWebhookConfiguration's namespaceSelector and
objectSelector apply the same rules on the API server's side, so most pods that must not
change never reach the webhook at all; this is the check that holds when they do.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

NAMESPACE_LABEL = "metricsched.io/scheduler"
OPT_OUT_LABEL = "metricsched.io/opt-out"
OPT_OUT_VALUE = "true"
DEFAULT_SCHEDULER = "default-scheduler"
KUBE_SYSTEM = "kube-system"


class Reason(enum.Enum):
    """Why a pod was or was not given this install's scheduler name."""

    ASSIGNED = "Assigned"
    EXCLUDED_NAMESPACE = "ExcludedNamespace"  # kube-system or the install's namespace
    NOT_OPTED_IN = "NotOptedIn"  # the namespace's label does not name this install
    OPTED_OUT = "OptedOut"  # the pod's opt-out label
    # the pod's opt-in label names another install: that one's webhook decides
    OPTED_IN_ELSEWHERE = "PodLabelNamesAnother"
    ALREADY_BOUND = "AlreadyBound"  # spec.nodeName set: no scheduler is involved
    NAMES_A_SCHEDULER = "NamesAScheduler"  # its own choice (ours included), never changed
    DAEMON_SET = "DaemonSetPod"  # pinned to one node by its controller


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """What the webhook may do: the name it sets and where it never acts."""

    scheduler_name: str
    # kube-system is always excluded, whatever is passed (see ``rules``).
    excluded_namespaces: frozenset[str] = frozenset({KUBE_SYSTEM})
    namespace_label: str = NAMESPACE_LABEL
    # The pod label that opts one pod in (value: the scheduler name).
    pod_label: str = NAMESPACE_LABEL
    opt_out_label: str = OPT_OUT_LABEL


def rules(
    *,
    scheduler_name: str,
    excluded_namespaces: Iterable[str] = (),
    pod_label: str = NAMESPACE_LABEL,
) -> Rules:
    """The rules of one install; kube-system is excluded in every case."""
    excluded = frozenset({KUBE_SYSTEM, *(n for n in excluded_namespaces if n)})
    return Rules(
        scheduler_name=scheduler_name,
        excluded_namespaces=excluded,
        pod_label=pod_label or NAMESPACE_LABEL,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    reason: Reason
    # The schedulerName to set, or None to leave the pod as it came.
    scheduler_name: str | None = None


def decide(
    pod: Mapping[str, Any],
    *,
    namespace: str,
    namespace_labels: Mapping[str, str] | None,
    rules: Rules,
) -> Decision:
    """The webhook's answer for a pod being created in ``namespace``.

    ``namespace_labels`` None means the caller has checked the opt-in already: the webhook
    does, through the namespaceSelector and objectSelector the API server applies before
    it calls (so the webhook reads nothing, and never a stale copy of the labels); the
    pod's own label is read here in every case, for the precedence above."""
    if namespace in rules.excluded_namespaces:
        return Decision(Reason.EXCLUDED_NAMESPACE)
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    chosen = labels.get(rules.pod_label)
    if chosen and chosen != rules.scheduler_name:
        return Decision(Reason.OPTED_IN_ELSEWHERE)
    if (
        chosen != rules.scheduler_name
        and namespace_labels is not None
        and namespace_labels.get(rules.namespace_label) != rules.scheduler_name
    ):
        return Decision(Reason.NOT_OPTED_IN)
    if labels.get(rules.opt_out_label) == OPT_OUT_VALUE:
        return Decision(Reason.OPTED_OUT)
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return Decision(Reason.ALREADY_BOUND)
    if spec.get("schedulerName") not in (None, "", DEFAULT_SCHEDULER):
        return Decision(Reason.NAMES_A_SCHEDULER)
    owners = meta.get("ownerReferences") or ()
    if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners):
        return Decision(Reason.DAEMON_SET)
    return Decision(Reason.ASSIGNED, scheduler_name=rules.scheduler_name)
