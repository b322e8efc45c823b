"""What a differential-oracle run exercised: per feature, the pending pods that carry it
(claims, bound volumes, namespaceSelector, preferred terms, priority, ...) or that led
kube-scheduler somewhere (it would preempt, its PostFilter failed). A feature never
exercised means the generator stopped making it."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tests.parity import extras, pools

if TYPE_CHECKING:
    from tests.parity import oracle

Body = dict[str, Any]

FEATURES = (
    "claims",
    "bound volume with node affinity",
    "bound volume without node affinity",
    "volume zone labels",
    "legacy zone label",
    "unbound claim",
    "namespaces list",
    "namespaceSelector",
    "empty namespaceSelector",
    "preferred node affinity",
    "preferred pod (anti-)affinity",
    "priority",
    "preemptionPolicy Never",
    "kube would preempt",
    "PostFilter state missing",
)
# What the generator's extras add (tests/parity/extras.py), for versions after v1.35.
EXTRA_FEATURES = (
    "needs a declared feature",
    "DRA-backed extended resource",
    "nominated pods beside it",
)


def exercised(scenario: Body, theirs: Sequence[oracle.Answer]) -> collections.Counter[str]:
    """How many pending pods of ``scenario`` exercise each of ``FEATURES`` (``theirs``:
    kube-scheduler's answers, for what it would do)."""
    claims = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in scenario.get("claims", ())
    }
    volumes = {v["metadata"]["name"]: v for v in scenario.get("volumes", ())}
    found: collections.Counter[str] = collections.Counter()
    for body, answer in zip(scenario["incoming"], theirs, strict=True):
        spec = body["spec"]
        features: set[str] = set()
        namespace = body["metadata"].get("namespace", "default")
        for item in spec.get("volumes", ()):
            if "persistentVolumeClaim" not in item:
                continue
            features.add("claims")
            claim = claims.get((namespace, item["persistentVolumeClaim"]["claimName"]))
            if claim is None:
                continue
            bound = "pv.kubernetes.io/bind-completed" in claim["metadata"].get("annotations", {})
            volume = volumes.get(claim["spec"].get("volumeName", ""))
            if not bound:
                features.add("unbound claim")
            elif volume is not None:
                affinity = "nodeAffinity" in volume["spec"]
                features.add(f"bound volume {'with' if affinity else 'without'} node affinity")
                labels = volume["metadata"].get("labels", {})
                if labels:
                    features.add("volume zone labels")
                if pools.LEGACY_ZONE in labels:
                    features.add("legacy zone label")
        affinity = spec.get("affinity", {})
        for kind in ("podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind, {})
            for term in terms.get("requiredDuringSchedulingIgnoredDuringExecution", ()):
                if "namespaces" in term:
                    features.add("namespaces list")
                if "namespaceSelector" in term:
                    features.add("namespaceSelector")
                    if not term["namespaceSelector"]:
                        features.add("empty namespaceSelector")
            if terms.get("preferredDuringSchedulingIgnoredDuringExecution"):
                features.add("preferred pod (anti-)affinity")
        if affinity.get("nodeAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution"):
            features.add("preferred node affinity")
        if spec.get("priority"):
            features.add("priority")
        if spec.get("preemptionPolicy") == "Never":
            features.add("preemptionPolicy Never")
        if answer.nominated:
            features.add("kube would preempt")
        if answer.post_filter_error:
            features.add("PostFilter state missing")
        if (spec.get("hostNetwork") and spec.get("hostUsers") is False) or any(
            "restartPolicyRules" in c for c in spec["containers"]
        ):
            features.add("needs a declared feature")
        if scenario.get("deviceClasses") and any(
            extras.DRA_RESOURCE in c.get("resources", {}).get("limits", {})
            for c in spec["containers"]
        ):
            features.add("DRA-backed extended resource")
        if scenario.get("nominated"):
            features.add("nominated pods beside it")
        found.update(features)
    return found
