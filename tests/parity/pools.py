"""The small pools the parity generators draw from, and the label keys they use.

Small on purpose: collisions (the same label on a pod and a selector, the same zone on a
node and a volume) are where the rules meet.
"""

from __future__ import annotations

from typing import Any

Body = dict[str, Any]

ZONES = ("zone-a", "zone-b", "zone-c")
NAMESPACES = ("default", "team-a", "team-b", "ops")
APPS = ("web", "db", "cache")
EXTENDED = "example.com/gpu"
HUGEPAGES = "hugepages-2Mi"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
LEGACY_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # set by the PV controller when it binds
# Priorities (spec.priority as the Priority admission plugin resolves it) and policies.
PRIORITIES = (None, None, 0, 0, 100, 1000, -5, 2000000000)
PREEMPTION_POLICIES = (None, None, "PreemptLowerPriority", "Never")
TAINTS: tuple[Body, ...] = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "maintenance", "effect": "NoSchedule"},
    {"key": "team", "value": "a", "effect": "NoExecute"},
)
TOLERATIONS: tuple[Body, ...] = (
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "team", "operator": "Equal", "value": "b"},
    {
        "key": "team",
        "operator": "Equal",
        "value": "a",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    },
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
)
