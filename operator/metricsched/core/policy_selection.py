"""The choice of a policy for a pod: the one its ``metricsched.io/policy`` label pins, else
the highest-priority active policy of its namespace whose podSelector matches (ties: the
oldest, then the first name); and the shadow policy that evaluates a pod another
scheduler placed.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

from metricsched.core import model, policy_defaults, selectors


def selector_matches(selector: model.LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector``, as metav1.LabelSelector does; {} matches all.
    The matching is ``core.selectors``' (one implementation for pods, nodes and policies)."""
    requirements = [
        selectors.Requirement(key, "In", frozenset((value,)))
        for key, value in selector.match_labels.items()
    ]
    requirements.extend(
        selectors.Requirement(key, operator, frozenset(values))
        for key, operator, values in selector.match_expressions
    )
    return selectors.Selector.of(requirements).matches(labels)


class ChoiceReason(enum.StrEnum):
    """Why a policy was (not) chosen for a pod."""

    PINNED = "Pinned"  # the pod's metricsched.io/policy label names it
    SELECTED = "Selected"  # its podSelector matches the pod and it has the highest priority
    PINNED_MISSING = "PinnedMissing"  # the label names a policy that does not exist
    NO_MATCH = "NoMatch"  # no policy of the pod's namespace selects the pod


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyChoice:
    """The policy governing a pod, or why there is none."""

    policy: model.Policy | None  # None for PINNED_MISSING and NO_MATCH
    reason: ChoiceReason
    pinned: model.PolicyKey | None = None  # the policy the pod's label names, if it does


def _precedence(policy: model.Policy) -> tuple[int, float, str]:
    return (-policy.priority, policy.creation_timestamp, policy.name)


def select_policy(pod: model.PodInfo, policies: Sequence[model.Policy]) -> PolicyChoice:
    """Choose the policy that governs ``pod`` among ``policies`` (of any namespace).

    A pod label ``metricsched.io/policy: <name>`` pins the policy of that name in the pod's
    namespace, whatever its selector says. Otherwise, among the namespace's policies whose
    podSelector matches the pod, the highest priority wins; ties go to the oldest, then to
    the first name. Shadow policies never govern a pod here (see ``shadow_policy_for``).
    """
    policies = [p for p in policies if p.mode is model.PolicyMode.ACTIVE]
    pinned_name = pod.labels.get(policy_defaults.POLICY_LABEL)
    if pinned_name is not None:
        key = model.PolicyKey(f"{pod.namespace}/{pinned_name}")
        for policy in policies:
            if policy.namespace == pod.namespace and policy.name == pinned_name:
                return PolicyChoice(policy=policy, reason=ChoiceReason.PINNED, pinned=key)
        return PolicyChoice(policy=None, reason=ChoiceReason.PINNED_MISSING, pinned=key)
    candidates = [
        policy
        for policy in policies
        if policy.namespace == pod.namespace and selector_matches(policy.pod_selector, pod.labels)
    ]
    if not candidates:
        return PolicyChoice(policy=None, reason=ChoiceReason.NO_MATCH)
    return PolicyChoice(policy=min(candidates, key=_precedence), reason=ChoiceReason.SELECTED)


def shadow_policy_for(pod: model.PodInfo, policies: Sequence[model.Policy]) -> model.Policy | None:
    """The shadow policy that evaluates ``pod``, placed by another scheduler, or None.

    Among the shadow policies of the pod's namespace that list the pod's schedulerName,
    the one the pod's ``metricsched.io/policy`` label names, else the highest-priority one
    whose podSelector matches (ties: oldest, then first name), as ``select_policy`` does.
    """
    candidates = [
        p
        for p in policies
        if p.mode is model.PolicyMode.SHADOW
        and p.namespace == pod.namespace
        and pod.scheduler_name in p.shadow_scheduler_names
    ]
    pinned_name = pod.labels.get(policy_defaults.POLICY_LABEL)
    if pinned_name is not None:
        return next((p for p in candidates if p.name == pinned_name), None)
    matching = [p for p in candidates if selector_matches(p.pod_selector, pod.labels)]
    return min(matching, key=_precedence) if matching else None
