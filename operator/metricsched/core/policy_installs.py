"""Which install serves a policy (its ``spec.schedulerName``), and the policies other
installs serve, read only as far as a pod's events name them (``elsewhere_note``).

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from metricsched.core import model, policy_defaults, policy_fields, policy_selection


def served_by(body: model.RawBody, scheduler_names: frozenset[str]) -> bool:
    """Whether the install serving ``scheduler_names`` serves the raw policy ``body``.

    A policy belongs to the install whose scheduler names include its
    ``spec.schedulerName`` (``metricsched`` when absent); every other install ignores it
    entirely (no refresh, no status, no events), so two installs never fight over it.
    """
    spec = body.get("spec")
    name = (
        spec.get("schedulerName", policy_defaults.DEFAULT_SCHEDULER_NAME)
        if isinstance(spec, Mapping)
        else None
    )
    return name in scheduler_names if isinstance(name, str) else True


@dataclasses.dataclass(frozen=True, slots=True)
class Elsewhere:
    """A policy that another install serves, as much of it as says whether it would select
    a pod: the cycle names it in the pod's events (``elsewhere_note``)."""

    namespace: str
    name: str
    scheduler_name: str
    selector: model.LabelSelector
    active: bool

    @property
    def key(self) -> model.PolicyKey:
        return model.PolicyKey(f"{self.namespace}/{self.name}")


def elsewhere_from_body(body: model.RawBody) -> Elsewhere | None:
    """The light index entry of a raw policy another install serves; None when its
    scheduler name or selector cannot be read (it selects nothing then, to anyone)."""
    meta = body.get("metadata")
    spec = body.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    name = spec.get("schedulerName", policy_defaults.DEFAULT_SCHEDULER_NAME)
    problems = policy_fields.Problems()
    selector = policy_fields.label_selector(
        spec.get("podSelector", {}), path="spec.podSelector", problems=problems
    )
    if problems.items or not isinstance(name, str):
        return None
    return Elsewhere(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        scheduler_name=name,
        selector=selector,
        active=spec.get("mode", policy_defaults.DEFAULT_MODE.value)
        == model.PolicyMode.ACTIVE.value,
    )


def selecting_elsewhere(pod: model.PodInfo, elsewhere: Sequence[Elsewhere]) -> list[Elsewhere]:
    """The policies of ``elsewhere`` that would govern ``pod`` if they were this install's:
    the one its ``metricsched.io/policy`` label pins, else the active ones of its namespace
    whose podSelector matches (as ``select_policy`` chooses), by key."""
    pinned = pod.labels.get(policy_defaults.POLICY_LABEL)
    found = [
        p
        for p in elsewhere
        if p.namespace == pod.namespace
        and p.active
        and (
            p.name == pinned
            if pinned is not None
            else policy_selection.selector_matches(p.selector, pod.labels)
        )
    ]
    return sorted(found, key=lambda p: p.key)


def elsewhere_note(pod: model.PodInfo, elsewhere: Sequence[Elsewhere]) -> str:
    """`` (policy ns/x selects this pod but is served by scheduler other-sched)`` for each
    policy of another install that selects ``pod``; "" when none does."""
    return "".join(
        f" (policy {p.key} selects this pod but is served by scheduler {p.scheduler_name})"
        for p in selecting_elsewhere(pod, elsewhere)
    )
