"""Refusals metricsched makes on purpose, counted apart from disagreements.

One is documented (docs/internals.md, "Kubernetes versions", DRA-backed extended
resources): from v1.36, kube-scheduler leaves an extended resource that a DeviceClass maps
to its DynamicResources plugin on a node that does not list it in allocatable
(NodeResourcesFit's ``shouldDelegateResourceToDRA``, kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/noderesources/fit.go``), which allocates a device claim
for the pod there. metricsched does not allocate claims, and refuses such a node with
``node_resources_fit.filtering.dra_backed_reason`` (``node(s) serve <resource> through DRA ...``).

A pod's differences are "refused by design" only when every one of them is that refusal:

- ``delegated`` says where kube-scheduler would need DRA allocation, read from the
  scenario itself (the DeviceClasses, the pod's requests and limits, the nodes'
  allocatable), not from metricsched's answer;
- on every other node both answers are the same (feasible, or the same reasons);
- on a delegated node metricsched's reasons hold the documented words for a delegated
  resource, its other reasons are ones it gives with the delegated resources taken off the
  pod (``without_delegated``: what kube-scheduler's NodeResourcesFit checks there), and
  that stripped pod gets kube-scheduler's answer on the node, except where
  kube-scheduler's DynamicResources rejects the node (it found no device: the allocation
  metricsched does not do), where the stripped pod must pass every filter kube-scheduler
  runs before DynamicResources (all but NodeDeclaredFeatures: v1.37.2's
  ``applyFeatureGates`` appends NodeDeclaredFeatures, then ``applyDynamicResources``
  inserts DynamicResources before DefaultPreemption, pkg/scheduler/apis/config/v1/
  default_plugins.go);
- where every node is answered alike and only the message differs (the PostFilter's
  dry run met the refusal on a node an earlier filter rejects), the stripped pod must get
  kube-scheduler's very message;
- the FailedScheduling message: kube-scheduler places the pod (no message), or its
  message is the stripped pod's, or metricsched's message counts the documented refusal.
  In that last case the FailedScheduling text of the pod is not compared beyond the
  nodes' reasons: its counts follow from them, and the PostFilter (preemption) part of
  metricsched's dry run treats the refused nodes as unresolvable, where kube-scheduler
  dry-runs them with a device.

Anything else (a refusal with other words, a delegated node where the rest of the answer
differs, any node where kube-scheduler does not delegate) stays a disagreement.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol

from metricsched.core import quantity, versions
from metricsched.core.plugins import node_declared_features, node_resources_fit

REFUSED_BY_DESIGN: Final = "refused by design"
# kube-scheduler's implicit extended resource name of every DeviceClass (KEP-5004)
IMPLICIT_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
DYNAMIC_RESOURCES: Final = "DynamicResources"
# The reasons of the filters kube-scheduler v1.37.2 runs after DynamicResources
AFTER_DYNAMIC_RESOURCES: Final = frozenset({node_declared_features.REASON_UNSATISFIED})

Body = dict[str, Any]


class Answer(Protocol):
    """oracle.Answer's fields read here."""

    @property
    def feasible(self) -> frozenset[str]: ...
    @property
    def rejected(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def message(self) -> str: ...
    @property
    def plugins(self) -> Mapping[str, str]: ...


def _containers(pod: Body) -> Iterator[Body]:
    spec = pod["spec"]
    yield from spec.get("initContainers", ())
    yield from spec.get("containers", ())


def _requested(pod: Body) -> set[str]:
    """The resource names a container requests (or limits, which the API server copies to
    an absent request) in a non-zero amount."""
    names = set()
    for container in _containers(pod):
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        names |= {name for name, amount in amounts.items() if quantity.parse_nano(amount) > 0}
    return names


def delegated(scenario: Body, pod: Body, rules: versions.Rules) -> dict[str, frozenset[str]]:
    """node -> the resources ``pod`` requests that kube-scheduler of ``rules``' version
    leaves to DRA there (none before v1.36)."""
    if not rules.dra_extended_resources:
        return {}
    mapped = set()
    for device_class in scenario.get("deviceClasses", ()):
        mapped.add(IMPLICIT_PREFIX + device_class["metadata"]["name"])
        if name := (device_class.get("spec") or {}).get("extendedResourceName"):
            mapped.add(name)
    wanted = _requested(pod) & mapped
    found = {}
    for node in scenario["nodes"]:
        allocatable = node["status"].get("allocatable") or {}
        served = frozenset(r for r in wanted if quantity.parse_nano(allocatable.get(r, "0")) <= 0)
        if served:
            found[node["metadata"]["name"]] = served
    return found


def without_delegated(pod: Body, resources: frozenset[str]) -> Body:
    """``pod`` without requests or limits for ``resources``."""
    stripped = copy.deepcopy(pod)
    for container in _containers(stripped):
        for part in (container.get("resources") or {}).values():
            if isinstance(part, dict):
                for name in resources:
                    part.pop(name, None)
    return stripped


def _status(answer: Answer, node: str) -> tuple[str, ...] | None:
    """None where ``node`` is feasible, else its reasons."""
    return None if node in answer.feasible else answer.rejected.get(node, ("(not answered)",))


def refused_by_design(
    mine: Answer, kube: Answer, stripped: Answer, delegated: Mapping[str, frozenset[str]]
) -> bool:
    """Whether every difference between ``mine`` and ``kube`` (one pod's answers) is the
    documented refusal; ``stripped``: metricsched's answer for the pod without the
    delegated resources."""
    nodes = set(mine.feasible) | set(mine.rejected) | set(kube.feasible) | set(kube.rejected)
    refused = False
    for node in sorted(nodes):
        resources = delegated.get(node, frozenset())
        documented = {node_resources_fit.filtering.dra_backed_reason(r) for r in resources}
        reasons = set(mine.rejected.get(node, ()))
        if not reasons & documented:
            if _status(mine, node) != _status(kube, node):
                return False
            continue
        refused = True
        rest = _status(stripped, node)
        if not reasons - documented <= set(rest or ()):
            return False
        if kube.plugins.get(node) == DYNAMIC_RESOURCES:
            if not set(rest or ()) <= AFTER_DYNAMIC_RESOURCES:
                return False
        elif rest != _status(kube, node):
            return False
    if not refused:
        # Every node answered alike: only the message differs, as when the PostFilter's
        # dry run meets the refusal on a node an earlier filter rejects. By design only
        # if the pod without the delegated resources gets kube-scheduler's very message.
        return mine.message != kube.message and kube.message == stripped.message
    if mine.message == kube.message or kube.message in ("", stripped.message):
        return True
    return any(f" {reason}" in mine.message for reason in _documented(delegated))


def _documented(delegated: Mapping[str, frozenset[str]]) -> set[str]:
    resources = frozenset().union(*delegated.values())
    return {node_resources_fit.filtering.dra_backed_reason(r) for r in resources}
