"""InterPodAffinity (Filter): required pod affinity and anti-affinity, both directions.

Contract: the node's topology domain holds pods matching every required affinity term of
the pod (or the pod is the first of its group: no pod anywhere matches yet and the pod
matches its own terms), no pod matching one of its anti-affinity terms, and no existing
pod there has an anti-affinity term matching this pod.

PreFilter parses the pod's terms (an invalid one refuses the pod with kube-scheduler's
``parsing pod`` text) and walks the nodes once to find the domains that hold matching
pods; Filter looks the node's domains up. Parsed terms of existing pods, and whether an
unchanged node holds a match, are kept in the memo. For a namespace whose labels are
unknown the answer is the restrictive one (anti-affinity assumed to apply, affinity
assumed not to), so no pod is placed where kube-scheduler would refuse it. Its score half
(preferred terms) is ``inter_pod_affinity.scoring``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, selectors, versions

NAME: Final = "InterPodAffinity"
REASON_POD_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

Terms = tuple[selectors.PodAffinityTerm, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class PodTerms:
    """The incoming pod's required terms, as kube-scheduler uses them (``terms_of``)."""

    affinity: Terms
    anti_affinity: Terms


def terms_of(pod: model.PodInfo, rules: versions.Rules) -> PodTerms | str:
    """The pod's required (anti-)affinity terms as kube-scheduler of ``rules`` uses them, or
    its refusal text."""
    try:
        affinity = selectors.affinity_terms(
            pod.pod_affinity, owner_namespace=pod.namespace, where="podAffinity"
        )
        anti_affinity = selectors.affinity_terms(
            pod.pod_anti_affinity, owner_namespace=pod.namespace, where="podAntiAffinity"
        )
    except selectors.InvalidSpecError as error:
        return f"parsing pod: {error}"
    return PodTerms(
        tuple(selectors.as_merged_by_kube(term, rules) for term in affinity),
        tuple(selectors.as_merged_by_kube(term, rules) for term in anti_affinity),
    )


def existing_anti_affinity(memo: framework.Memo, pod: model.PodInfo) -> Terms:
    """A placed pod's anti-affinity terms (none when they cannot be parsed: kube-scheduler
    drops the terms of an existing pod it cannot parse)."""

    def parse() -> Terms:
        try:
            return selectors.affinity_terms(
                pod.pod_anti_affinity, owner_namespace=pod.namespace, where=""
            )
        except selectors.InvalidSpecError:
            return ()

    return memo.derived("existing-anti-affinity", pod, parse)


def node_anti_affinity(memo: framework.Memo, state: model.NodeState) -> Terms:
    """The anti-affinity terms of every pod on a node; most nodes have none."""
    return memo.derived(
        "node-anti-affinity",
        state,
        lambda: tuple(
            term
            for p in state.pods
            if p.pod_anti_affinity
            for term in existing_anti_affinity(memo, p)
        ),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _TermIndex:
    """A node's placed anti-affinity terms by a label pair each requires (the first of its
    selector's ``key == value`` requirements): a term requiring ``app=x`` cannot match a
    pod without that label, so a pod is tested only against the terms its labels could
    meet (``rest``: terms requiring no one pair). A bound pod of another scheduler with
    1,000 terms then costs a new pod class a few dictionary lookups, not 1,000 tests."""

    by_pair: dict[tuple[str, str], Terms]
    rest: Terms

    def candidates(self, labels: Mapping[str, str]) -> list[selectors.PodAffinityTerm]:
        found = list(self.rest)
        by_pair = self.by_pair
        if len(by_pair) < len(labels):
            for pair, terms in by_pair.items():
                if labels.get(pair[0]) == pair[1]:
                    found.extend(terms)
        else:
            for pair in labels.items():
                found.extend(by_pair.get(pair, ()))
        return found


def node_anti_affinity_for(
    memo: framework.Memo, state: model.NodeState, pod: model.PodInfo
) -> list[selectors.PodAffinityTerm]:
    """The anti-affinity terms of the pods on a node that could match ``pod``'s labels
    (a superset of those that do: each is still tested with ``matches``)."""

    def index() -> _TermIndex:
        by_pair: dict[tuple[str, str], list[selectors.PodAffinityTerm]] = {}
        rest: list[selectors.PodAffinityTerm] = []
        for term in node_anti_affinity(memo, state):
            if term.selector.nothing:
                continue  # selects no pod
            if term.selector.equal:
                by_pair.setdefault(term.selector.equal[0], []).append(term)
            else:
                rest.append(term)
        return _TermIndex({k: tuple(v) for k, v in by_pair.items()}, tuple(rest))

    return memo.derived("InterPodAffinity/anti-affinity-index", state, index).candidates(pod.labels)


def _match_key(
    terms: Terms, namespace_labels: selectors.NamespaceLabels | None, *, unknown: bool
) -> selectors.MemoKey | None:
    """The memo key of a question about ``terms``, or None when the answer depends on
    namespace labels (which are not part of the key)."""
    if namespace_labels is not None and not all(
        t.namespace_selector.nothing or t.namespace_selector.empty for t in terms
    ):
        return None
    return selectors.MemoKey((terms, unknown))


def _node_has_match(
    memo: framework.Memo,
    state: model.NodeState,
    terms: Terms,
    namespace_labels: selectors.NamespaceLabels | None,
    *,
    unknown: bool,
    key: selectors.MemoKey | None,
) -> bool:
    """Whether some pod on the node is in scope of every one of ``terms``."""
    answers = None if key is None else memo.per_state("affinity-match", state)
    if answers is not None and (found := answers.get(key)) is not None:
        assert isinstance(found, bool)
        return found
    found = any(
        all(t.matches(other, namespace_labels, unknown=unknown) for t in terms)
        for other in state.pods
    )
    if answers is not None:
        answers[key] = found
    return found


@dataclasses.dataclass(slots=True)
class _Repelled:
    """The (topology key, value) pairs where placed pods' anti-affinity terms repel one pod
    class, kept up to date row by row: only rows updated since the last cycle are looked
    at again (rows whose terms read namespace labels are looked at every cycle)."""

    stamp: int = -1
    by_row: dict[int, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)
    volatile: set[int] = dataclasses.field(default_factory=set)
    tally: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def domains(
        self,
        pod: model.PodInfo,
        table: columns.NodeTable,
        memo: framework.Memo,
        namespace_labels: selectors.NamespaceLabels | None,
    ) -> dict[str, set[str]]:
        if self.stamp < 0:
            rows = table.has_anti_affinity.nonzero()[0].tolist()
        else:
            changed = np.flatnonzero(table.row_stamp > self.stamp).tolist()
            rows = sorted(set(changed) | self.volatile)
        self.stamp = table.stamp
        for row in rows:
            for pair in self.by_row.pop(row, ()):
                self.tally[pair] -= 1
            self.volatile.discard(row)
            if not table.has_anti_affinity[row]:
                continue
            state = table.states[row]
            labels = state.node.labels
            found = []
            for term in node_anti_affinity_for(memo, state, pod):
                if not (term.namespace_selector.nothing or term.namespace_selector.empty):
                    self.volatile.add(row)  # namespace labels may change between cycles
                value = labels.get(term.topology_key)
                if value is not None and term.matches(pod, namespace_labels, unknown=True):
                    found.append((term.topology_key, value))
            if found:
                self.by_row[row] = tuple(found)
                for pair in found:
                    self.tally[pair] = self.tally.get(pair, 0) + 1
        existing: dict[str, set[str]] = {}
        for (key, value), count in self.tally.items():
            if count > 0:
                existing.setdefault(key, set()).add(value)
        return existing


@dataclasses.dataclass(slots=True)
class AffinityState:
    """Topology domains where existing pods meet the incoming pod's terms, and vice versa."""

    affinity_terms: Terms
    anti_affinity_terms: Terms
    affinity_domains: set[tuple[str, str]]  # pods matching all affinity terms live here
    anti_affinity_domains: set[tuple[str, str]]  # pods matching an anti-affinity term
    existing_anti_affinity: dict[str, set[str]]  # key -> values repelling the pod
    matches_itself: bool  # the first-pod-of-a-group exception applies

    @classmethod
    def build(
        cls,
        pod: model.PodInfo,
        terms: PodTerms,
        *,
        table: columns.NodeTable,
        memo: framework.Memo,
        namespace_labels: selectors.NamespaceLabels | None,
    ) -> AffinityState:
        affinity_terms = terms.affinity
        anti_terms = terms.anti_affinity
        affinity_domains: set[tuple[str, str]] = set()
        anti_domains: set[tuple[str, str]] = set()
        existing: dict[str, set[str]] = {}
        scan_every_pod = bool(affinity_terms or anti_terms)
        affinity_key = _match_key(affinity_terms, namespace_labels, unknown=False)
        anti_keys = [_match_key((t,), namespace_labels, unknown=True) for t in anti_terms]
        states = table.states
        if not scan_every_pod:
            # Without terms of its own the pod only asks where placed pods repel it: the
            # answer for its class is kept, and updated for the nodes that changed.
            tally = memo.per_table(
                "InterPodAffinity/repelled",
                (pod.namespace, tuple(sorted(pod.labels.items()))),
                table,
                _Repelled,
            )
            existing = tally.domains(pod, table, memo, namespace_labels)
        # With terms of its own, every node with pods is looked at (answers per unchanged
        # node are kept).
        repelling = table.has_anti_affinity
        rows = table.has_pods.nonzero()[0].tolist() if scan_every_pod else ()
        for row in rows:
            state = states[row]
            labels = state.node.labels
            for term in node_anti_affinity_for(memo, state, pod) if repelling[row] else ():
                value = labels.get(term.topology_key)
                if value is not None and term.matches(pod, namespace_labels, unknown=True):
                    existing.setdefault(term.topology_key, set()).add(value)
            # Some pod here matches all affinity terms: the node's domains have the group.
            if affinity_terms and _node_has_match(
                memo, state, affinity_terms, namespace_labels, unknown=False, key=affinity_key
            ):
                for term in affinity_terms:
                    value = labels.get(term.topology_key)
                    if value is not None:
                        affinity_domains.add((term.topology_key, value))
            for term, anti_key in zip(anti_terms, anti_keys, strict=True):
                value = labels.get(term.topology_key)
                if value is not None and _node_has_match(
                    memo, state, (term,), namespace_labels, unknown=True, key=anti_key
                ):
                    anti_domains.add((term.topology_key, value))
        matches_itself = bool(affinity_terms) and all(
            t.matches(pod, namespace_labels, unknown=False) for t in affinity_terms
        )
        return cls(
            affinity_terms, anti_terms, affinity_domains, anti_domains, existing, matches_itself
        )

    @property
    def trivial(self) -> bool:
        return not (self.affinity_terms or self.anti_affinity_terms or self.existing_anti_affinity)

    def check(self, state: model.NodeState) -> str:
        labels = state.node.labels
        pods_exist = True
        for term in self.affinity_terms:
            value = labels.get(term.topology_key)
            if value is None:
                return REASON_POD_AFFINITY  # all topology labels must exist on the node
            if (term.topology_key, value) not in self.affinity_domains:
                pods_exist = False
        # The first pod of a group whose affinity selects itself may start anywhere that
        # has the topology keys, as long as no pod anywhere matches the terms yet.
        if not pods_exist and not (not self.affinity_domains and self.matches_itself):
            return REASON_POD_AFFINITY
        for term in self.anti_affinity_terms:
            value = labels.get(term.topology_key)
            if value is not None and (term.topology_key, value) in self.anti_affinity_domains:
                return REASON_POD_ANTI_AFFINITY
        for key, values in self.existing_anti_affinity.items():
            if labels.get(key) in values:
                return REASON_EXISTING_ANTI_AFFINITY
        return ""


class InterPodAffinity:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        pod = cycle.pod
        rules = cycle.rules
        terms = cycle.memo.derived(
            f"InterPodAffinity/terms/{rules.name}", pod, lambda: terms_of(pod, rules)
        )
        if isinstance(terms, str):
            return framework.refuse(terms)
        state = AffinityState.build(
            pod,
            terms,
            table=cycle.table,
            memo=cycle.memo,
            namespace_labels=cycle.namespace_labels,
        )
        if state.trivial:
            return framework.SKIP
        cycle.data[NAME] = state
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        state = cycle.data[NAME]
        assert isinstance(state, AffinityState)
        if state.affinity_terms or state.anti_affinity_terms:
            return framework.scalar_filter(rows, cycle.table, state.check)
        # Only placed pods' anti-affinity applies: a node fails when its value of a
        # repelling key is one of the repelled values (vector, per key).
        failed = np.zeros(len(rows), dtype=np.bool_)
        for key, values in state.existing_anti_affinity.items():
            ids, numbers = cycle.table.label_ids(key)
            repelled = [numbers[value] for value in values if value in numbers]
            failed |= np.isin(ids[rows], repelled)
        return framework.rejected_where(failed, REASON_EXISTING_ANTI_AFFINITY)


PLUGIN: Final[framework.FilterPlugin] = InterPodAffinity()
