"""InterPodAffinity's score: preferred pod affinity and anti-affinity, both ways.

Contract (kube-scheduler v1.35, ``processExistingPod``): for every pod already placed on
a node with labels, each topology pair (key, the node's value) collects

- +weight for each preferred affinity term of the incoming pod the placed pod matches,
  and -weight for each preferred anti-affinity term it matches;
- +1 (``hardPodAffinityWeight``) for each required affinity term of the placed pod that
  the incoming pod matches, +weight / -weight for each of its preferred affinity /
  anti-affinity terms the incoming pod matches (kube's symmetry).

A node's raw score is the sum over the pairs its labels carry; scores are min-max
normalised over the scored nodes (``int(100 * (s - min) / (max - min))``, all 0 when
equal). Terms match exactly as the filter's do, namespaceSelector included (with the
namespace labels the snapshot has; unknown labels match nothing), and, as there, the
incoming pod's terms as kube-scheduler merges them (``selectors.as_merged_by_kube``: to
v1.36 a namespaceSelector that matches empty labels puts every namespace in scope; from
v1.37 it is matched against the namespaces' labels). A term that cannot be parsed counts
for nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from metricsched.core import columns, framework, model, selectors, versions
from metricsched.core.plugins.inter_pod_affinity import filtering

NAME: Final = filtering.NAME
SHORT_NAME: Final = NAME
DEFAULT_WEIGHT: Final = 2  # its weight in kube-scheduler's default profile (v1.35)
HARD_POD_AFFINITY_WEIGHT: Final = 1  # kube-scheduler's default InterPodAffinityArgs


@dataclasses.dataclass(frozen=True, slots=True)
class _Weighted:
    weight: int
    term: selectors.PodAffinityTerm


@dataclasses.dataclass(frozen=True, slots=True)
class _PodTerms:
    required_affinity: tuple[selectors.PodAffinityTerm, ...]
    affinity: tuple[_Weighted, ...]
    anti_affinity: tuple[_Weighted, ...]

    @property
    def empty(self) -> bool:
        return not (self.required_affinity or self.affinity or self.anti_affinity)


def _weighted(raw_terms: Sequence[model.RawBody], *, namespace: str) -> tuple[_Weighted, ...]:
    found = []
    for index, raw in enumerate(raw_terms):
        weight = raw.get("weight") if isinstance(raw, Mapping) else None
        if isinstance(weight, bool) or not isinstance(weight, int) or weight == 0:
            continue
        try:
            term = selectors.PodAffinityTerm.parse(
                raw.get("podAffinityTerm"), owner_namespace=namespace, where=f"[{index}]"
            )
        except selectors.InvalidSpecError:
            continue  # the API server rejects these; kube drops them for placed pods
        found.append(_Weighted(weight, term))
    return tuple(found)


def _terms_of(pod: model.PodInfo) -> _PodTerms:
    parsed = []
    for index, raw in enumerate(pod.pod_affinity):
        try:
            parsed.append(
                selectors.PodAffinityTerm.parse(
                    raw, owner_namespace=pod.namespace, where=f"[{index}]"
                )
            )
        except selectors.InvalidSpecError:
            continue
    return _PodTerms(
        required_affinity=tuple(parsed),
        affinity=_weighted(pod.preferred_pod_affinity, namespace=pod.namespace),
        anti_affinity=_weighted(pod.preferred_pod_anti_affinity, namespace=pod.namespace),
    )


def _as_merged_by_kube(terms: _PodTerms, rules: versions.Rules) -> _PodTerms:
    # Only the incoming pod's terms (PreScore's mergeAffinityTermNamespacesIfNotEmpty);
    # placed pods' terms are matched with the incoming pod's namespace labels.
    return dataclasses.replace(
        terms,
        affinity=tuple(
            _Weighted(w.weight, selectors.as_merged_by_kube(w.term, rules)) for w in terms.affinity
        ),
        anti_affinity=tuple(
            _Weighted(w.weight, selectors.as_merged_by_kube(w.term, rules))
            for w in terms.anti_affinity
        ),
    )


def _placed_terms(memo: framework.Memo, pod: model.PodInfo) -> _PodTerms:
    # Placed pods are immutable and shared from one snapshot to the next: parse them once.
    return memo.derived("InterPodAffinity/placed-terms", pod, lambda: _terms_of(pod))


def _node_pods_with_terms(
    memo: framework.Memo, state: model.NodeState
) -> tuple[tuple[model.PodInfo, _PodTerms], ...]:
    # kube-scheduler's NodeInfo.PodsWithAffinity: most nodes have none.
    return memo.derived(
        "pods-with-affinity",
        state,
        lambda: tuple(
            (p, terms)
            for p in state.pods
            if (p.pod_affinity or p.preferred_pod_affinity or p.preferred_pod_anti_affinity)
            and not (terms := _placed_terms(memo, p)).empty
        ),
    )


def topology_scores(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable,
    memo: framework.Memo,
) -> dict[str, dict[str, int]]:
    """Points per topology pair (key -> value -> points) from every placed pod."""
    incoming = _as_merged_by_kube(_terms_of(pod), snapshot.rules)
    has_terms = bool(incoming.affinity or incoming.anti_affinity)
    namespaces = snapshot.namespace_labels
    points: dict[str, dict[str, int]] = {}

    def add(key: str, labels: Mapping[str, str], weight: int) -> None:
        value = labels.get(key)
        if value is not None:
            pairs = points.setdefault(key, {})
            pairs[value] = pairs.get(value, 0) + weight

    # Only nodes with pods give points; without terms of its own, the pod gets points
    # only from placed pods with affinity terms.
    states = table.states
    for row in (table.has_pods if has_terms else table.has_affinity_terms).nonzero()[0].tolist():
        state = states[row]
        labels = state.node.labels
        if not labels:
            continue
        if has_terms:
            for placed in state.pods:
                for weighted in incoming.affinity:
                    if weighted.term.matches(placed, namespaces, unknown=False):
                        add(weighted.term.topology_key, labels, weighted.weight)
                for weighted in incoming.anti_affinity:
                    if weighted.term.matches(placed, namespaces, unknown=False):
                        add(weighted.term.topology_key, labels, -weighted.weight)
        for _placed, terms in _node_pods_with_terms(memo, state):
            for term in terms.required_affinity:
                if term.matches(pod, namespaces, unknown=False):
                    add(term.topology_key, labels, HARD_POD_AFFINITY_WEIGHT)
            for weighted in terms.affinity:
                if weighted.term.matches(pod, namespaces, unknown=False):
                    add(weighted.term.topology_key, labels, weighted.weight)
            for weighted in terms.anti_affinity:
                if weighted.term.matches(pod, namespaces, unknown=False):
                    add(weighted.term.topology_key, labels, -weighted.weight)
    return points


def score(
    *,
    pod: model.PodInfo,
    nodes: Sequence[model.NodeState],
    snapshot: model.ClusterSnapshot,
    table: columns.NodeTable,
    memo: framework.Memo,
) -> tuple[float, ...] | None:
    """InterPodAffinity for each of ``nodes``, normalised; None when no term applies."""
    points = topology_scores(pod=pod, snapshot=snapshot, table=table, memo=memo)
    if not points:
        return None

    def node_points(labels: Mapping[str, str]) -> int:
        return sum(pairs.get(labels[key], 0) for key, pairs in points.items() if key in labels)

    raw = [node_points(state.node.labels) for state in nodes]
    low, high = min(raw), max(raw)
    if high == low:
        return (0.0,) * len(nodes)
    return tuple(float(int(100 * ((value - low) / (high - low)))) for value in raw)
