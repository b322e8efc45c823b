"""The registry of kube-scheduler's default score plugins, blended into a policy's score.

A SchedulingPolicy means "kube-scheduler plus my metrics": besides its metrics, a node's
score counts what kube-scheduler's default profile would score it, each plugin with the
weight ``spec.kubeScores`` gives it (kube-scheduler's own weights by default). Each
plugin's score is one module with its name and one contract comment, beside its filter
where it has one, and returns 0..100 per node as kube-scheduler normalises it (v1.35
semantics), or None where kube-scheduler's PreScore skips the plugin for the pod:

- NodeResourcesFit: LeastAllocated (cpu, memory; also the fallback's arithmetic),
  ``plugins.node_resources_fit.scoring``
- NodeResourcesBalancedAllocation: ``plugins.balanced_allocation``
- TaintToleration: PreferNoSchedule taints the pod does not tolerate,
  ``plugins.taint_toleration.scoring``
- NodeAffinity: preferred node affinity terms, ``plugins.node_affinity.scoring``
- InterPodAffinity: preferred pod (anti-)affinity, both ways, and placed pods' required
  affinity towards the pod, ``plugins.inter_pod_affinity.scoring``
- PodTopologySpread: ScheduleAnyway constraints and the system default spreading,
  ``plugins.pod_topology_spread.scoring``

(``plugins.normalize`` is kube-scheduler's shared score normalisation.) ImageLocality is
not computed: node image lists are not kept in the cluster cache.

``REGISTRY`` is the one table of them: one ``ScorePlugin`` record per plugin (its name,
the short name events use, kube-scheduler's default weight, its scorer), in the order of
kube-scheduler's default profile; ``PLUGINS``, ``SHORT_NAMES`` and ``DEFAULT_WEIGHTS``
are read from it. A new plugin is one module (or one ``scoring`` module beside its
filter) and one record here.

``score_terms`` runs the enabled plugins for one pod over the nodes to score; how the
terms are blended with the metric scores is ``core.scoring.score_nodes``'s rule.
``normalised_scores`` runs the same scorers for every plugin, unweighted: what the
differential oracle (tests/parity) compares with kube-scheduler's own scores. Purely
computational, like the rest of ``core``: no I/O, no clocks, no module-level state; work
derived from unchanged pods and nodes is kept in the cycle's memo (``core.framework.Memo``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model, scoring
from metricsched.core.plugins import (
    balanced_allocation,
    inter_pod_affinity,
    node_affinity,
    node_resources_fit,
    pod_topology_spread,
    taint_toleration,
)

_TIMES: Final = "\N{MULTIPLICATION SIGN}"


def term_text(term: model.KubeScore, *, named: bool = True) -> str:
    """A blended term as events and ``explain`` show it: score times weight, with a
    multiplication sign, after the plugin's short name (``LeastAllocated 62x1``)."""
    text = f"{scoring.format_score(term.score)}{_TIMES}{term.weight}"
    return f"{SHORT_NAMES.get(term.plugin, term.plugin)} {text}" if named else text


_Scorer = Callable[[framework.CycleState, columns.Rows], columns.Floats | None]


def _states(cycle: framework.CycleState, rows: columns.Rows) -> Sequence[model.NodeState]:
    return columns.Picked(cycle.table.states, rows)


def _inter_pod_affinity(cycle: framework.CycleState, rows: columns.Rows) -> columns.Floats | None:
    found = inter_pod_affinity.scoring.score(
        pod=cycle.pod,
        nodes=_states(cycle, rows),
        snapshot=cycle.snapshot,
        table=cycle.table,
        memo=cycle.memo,
    )
    return None if found is None else np.array(found, dtype=np.float64)


@dataclasses.dataclass(frozen=True, slots=True)
class ScorePlugin:
    """One of kube-scheduler's default score plugins as metricsched blends it."""

    name: str  # kube-scheduler's (spec.kubeScores' key)
    short_name: str  # what events and ``explain`` call its term (LeastAllocated)
    default_weight: int  # its weight in kube-scheduler's default profile (v1.35)
    score: _Scorer  # 0..100 per node of the rows, None where PreScore skips it


REGISTRY: Final = (
    ScorePlugin(
        taint_toleration.scoring.NAME,
        taint_toleration.scoring.SHORT_NAME,
        taint_toleration.scoring.DEFAULT_WEIGHT,
        taint_toleration.scoring.score,
    ),
    ScorePlugin(
        node_affinity.scoring.NAME,
        node_affinity.scoring.SHORT_NAME,
        node_affinity.scoring.DEFAULT_WEIGHT,
        node_affinity.scoring.score,
    ),
    ScorePlugin(
        node_resources_fit.scoring.NAME,
        node_resources_fit.scoring.SHORT_NAME,
        node_resources_fit.scoring.DEFAULT_WEIGHT,
        node_resources_fit.scoring.score,
    ),
    ScorePlugin(
        pod_topology_spread.scoring.NAME,
        pod_topology_spread.scoring.SHORT_NAME,
        pod_topology_spread.scoring.DEFAULT_WEIGHT,
        pod_topology_spread.scoring.score,
    ),
    ScorePlugin(
        inter_pod_affinity.scoring.NAME,
        inter_pod_affinity.scoring.SHORT_NAME,
        inter_pod_affinity.scoring.DEFAULT_WEIGHT,
        _inter_pod_affinity,
    ),
    ScorePlugin(
        balanced_allocation.NAME,
        balanced_allocation.SHORT_NAME,
        balanced_allocation.DEFAULT_WEIGHT,
        balanced_allocation.score,
    ),
)
"""The plugins, in the order of kube-scheduler's default profile (and of explanations)."""

PLUGINS: Final = tuple(p.name for p in REGISTRY)
SHORT_NAMES: Final[Mapping[str, str]] = {p.name: p.short_name for p in REGISTRY}
DEFAULT_WEIGHTS: Final[Mapping[str, int]] = {p.name: p.default_weight for p in REGISTRY}
_SCORERS: Final[Mapping[str, _Scorer]] = {p.name: p.score for p in REGISTRY}


def score_terms(
    *,
    cycle: framework.CycleState,
    rows: columns.Rows,
    weights: Sequence[tuple[str, int]],
) -> tuple[scoring.KubeTerm, ...]:
    """One term per plugin of positive weight that kube-scheduler would run for the
    cycle's pod, each with a score per node of ``rows`` (the nodes to score, in order)."""
    terms = []
    for name, weight in weights:
        scorer = _SCORERS.get(name)
        if weight <= 0 or scorer is None:
            continue
        scores = scorer(cycle, rows)
        if scores is not None:
            terms.append(scoring.KubeTerm(plugin=name, weight=weight, scores=scores))
    return tuple(terms)


def normalised_scores(
    *, cycle: framework.CycleState, rows: columns.Rows
) -> dict[str, columns.Floats]:
    """Each plugin's normalised score (0..100, before any weight) for the cycle's pod on
    each node of ``rows`` (the nodes to score, in order), by the scorers ``score_terms``
    blends; a plugin kube-scheduler's PreScore would skip for the pod is absent."""
    every = [(name, 1) for name in PLUGINS]
    return {term.plugin: term.scores for term in score_terms(cycle=cycle, rows=rows, weights=every)}
