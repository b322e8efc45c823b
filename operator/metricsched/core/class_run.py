"""A run of one pod class: consecutive identical pods decided with their shared work done once.

The pods of one workload (a Deployment's replicas) waiting together differ only in their
name, uid and creation time: the same *class* (``same_class``). A ``Run`` is started from
the first of them and decides each of them in turn, as ``cycle.schedule_one`` would,
after the caller has assumed the previous one on its node:

- **once per run**: the part of the cycle that reads no node (``cycle.prepare``: which
  policy governs the pod, the refusals that hold whatever the nodes, the note naming
  other installs' policies);
- **per pod, only what changed**: the PreFilters and Filters of a *node-local* class
  (below) are run again only for the table rows updated since the previous pod of the
  run (``NodeTable.row_stamp``: the node the previous pod was assumed on, and any node
  an informer event rewrote meanwhile); the other rows keep their answer;
- **per pod, in full**: everything else (burst counts, metric samples and estimates,
  thresholds, kube-scheduler's scores, normalisation, ranking, verdicts, message), with
  the pod's own ``now``, on the snapshot and table the caller hands in for it (the
  runtime cache rebuilds only the rows that changed), and the memo keeps the class's
  score columns row by row as before.

**Why every decision is the one the pod-at-a-time cycle makes.** ``cycle.prepare`` reads
the pod's class fields, the policies, the default strategy, the scheduler names and the
other installs' policies only: the run is valid while those are the same (``admits``: the
same class, the same ``generation`` of the caller's cluster state, which moves on every
policy change, and equal ``elsewhere``). The rest of the cycle runs unchanged per pod,
except the filters' reuse, which holds because a node-local class's filters answer for
a row from that row alone: a class with no topology spread constraints, no pod affinity
or anti-affinity, no host ports, no volumes or resource claims, on a table where no
placed pod has required anti-affinity (``has_anti_affinity``), with no nominated pods
and no rebalancing reservations on the snapshot, and the same table object at the same
``node_version`` (node set, labels, taints, allocatable) and the same version rules and
device-class mapping. Anything else (another class, a PreFilter refusal, a new table)
runs every filter again. So ``now`` needs no cut: nothing that depends on it is reused.

What is not shared yet: normalisation and scoring are redone per pod (vector operations
over the feasible nodes). Not to be confused with pod-group gang scheduling (all or
nothing, Kubernetes' Workload API), which metricsched refuses (``core.profile``): a run
places each pod on its own, exactly as one at a time. Purely computational: no I/O, no
clocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, cycle, framework, model, policy_installs, profile

_IDENTITY: Final = frozenset({"name", "uid", "creation_timestamp"})
_CLASS_FIELDS: Final = tuple(
    field.name for field in dataclasses.fields(model.PodInfo) if field.name not in _IDENTITY
)


def same_class(one: model.PodInfo, other: model.PodInfo) -> bool:
    """Whether two pods differ at most in their name, uid and creation time."""
    return one is other or all(getattr(one, name) == getattr(other, name) for name in _CLASS_FIELDS)


def node_local(pod: model.PodInfo) -> bool:
    """Whether the filters' answer for a node reads that node's row alone for ``pod``'s
    class (given no placed pod has required anti-affinity and no pod is nominated)."""
    return not (
        pod.topology_spread
        or pod.pod_affinity
        or pod.pod_anti_affinity
        or pod.host_ports
        or pod.volume_claims
        or pod.ephemeral_claims
        or pod.resource_claims
        or pod.unsupported
    )


@dataclasses.dataclass(slots=True)
class _Filtered:
    """The filters' outcome for the previous pod of a run, and what it was valid for."""

    table: columns.NodeTable
    stamp: int
    node_version: int
    rules: object
    device_classes: object
    outcome: framework.FilterOutcome


@dataclasses.dataclass(slots=True)
class Run:
    """Consecutive pods of one class, decided one after the other (module docstring).
    Made by ``start``; owned by the caller, who assumes each decided pod before the
    next ``decide``."""

    template: model.PodInfo
    generation: int
    elsewhere: tuple[policy_installs.Elsewhere, ...]
    prepared: cycle.Prepared
    memo: framework.Memo
    local: bool
    filtered: _Filtered | None = None
    decided: int = 0

    @classmethod
    def start(
        cls,
        *,
        pod: model.PodInfo,
        inputs: cycle.Inputs,
        generation: int,
        memo: framework.Memo,
    ) -> Run | None:
        """A run for ``pod``'s class; None when ``cycle.prepare`` decides the pod without
        the nodes (skipped or refused): such a pod is decided alone by ``schedule_one``.
        ``generation`` is the caller's count of changes to the policies (and the cluster):
        a run serves only pods decided at the same one."""
        prepared = cycle.prepare(
            pod=pod,
            policies=inputs.policies,
            default_fallback=inputs.default_fallback,
            scheduler_names=inputs.scheduler_names,
            elsewhere=inputs.elsewhere,
        )
        if isinstance(prepared, model.Decision):
            return None
        return cls(
            template=pod,
            generation=generation,
            elsewhere=tuple(inputs.elsewhere),
            prepared=prepared,
            memo=memo,
            local=node_local(pod),
        )

    def admits(
        self,
        pod: model.PodInfo,
        *,
        generation: int,
        elsewhere: Sequence[policy_installs.Elsewhere] = (),
    ) -> bool:
        """Whether ``pod`` may be decided by this run: the same class, policies and
        cluster generation, and the same policies of other installs."""
        return (
            generation == self.generation
            and tuple(elsewhere) == self.elsewhere
            and same_class(pod, self.template)
        )

    def decide(
        self,
        pod: model.PodInfo,
        inputs: cycle.Inputs,
        *,
        rr_counter: int = 0,
        detail: bool = True,
    ) -> model.Decision:
        """``cycle.decide``'s decision for ``pod`` (one the run ``admits``) on ``inputs``
        (its snapshot with the previous pods of the run assumed in it); the run's policy
        choice and memo stand for those of ``inputs``."""
        self.decided += 1
        return cycle.decide_prepared(
            pod=pod,
            prepared=self.prepared,
            snapshot=inputs.snapshot,
            table=inputs.table,
            metrics=inputs.metrics,
            now=inputs.now,
            rr_counter=rr_counter,
            seed=cycle.seed_of(pod),
            detail=detail,
            namespace_labels=inputs.namespace_labels,
            memo=self.memo,
            find=self._find,
        )

    def _find(self, state: framework.CycleState) -> framework.FilterOutcome:
        """``profile.find_feasible``, redoing only the rows changed since the previous pod
        when the class and the snapshot allow it (module docstring)."""
        table, snapshot = state.table, state.snapshot
        previous, self.filtered = self.filtered, None
        if not self.local or snapshot.nominated or snapshot.reserved:
            return profile.find_feasible(state)
        if table.has_anti_affinity.any():
            return profile.find_feasible(state)
        if (
            previous is None
            or previous.table is not table
            or previous.node_version != table.node_version
            or previous.rules is not snapshot.rules
            or previous.device_classes is not snapshot.device_class_resources
        ):
            found = profile.find_feasible(state)
        else:
            found = _refiltered(state, previous)
        if not found.refusal:
            self.filtered = _Filtered(
                table=table,
                stamp=table.stamp,
                node_version=table.node_version,
                rules=snapshot.rules,
                device_classes=snapshot.device_class_resources,
                outcome=found,
            )
        return found


def _refiltered(state: framework.CycleState, previous: _Filtered) -> framework.FilterOutcome:
    """The previous outcome with the rows updated since run through the filters again."""
    table = state.table
    changed = np.flatnonzero(table.row_stamp > previous.stamp)
    if not len(changed):
        return previous.outcome
    part = framework.run_filters(state, profile.FILTERS, only=changed)
    if part.refusal:
        return part
    names = table.names
    moved = {names[row] for row in changed.tolist()}
    rejected = {
        name: reasons for name, reasons in previous.outcome.rejected.items() if name not in moved
    }
    rejected.update(part.rejected)
    passed = np.zeros(len(table), dtype=np.bool_)
    passed[previous.outcome.feasible] = True
    passed[changed] = False
    passed[part.feasible] = True
    return framework.FilterOutcome("", np.flatnonzero(passed), rejected)
