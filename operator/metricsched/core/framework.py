"""The scheduling framework: the filter plugins' contract, the per-cycle state, the runner.

Modelled on kube-scheduler's framework. A filter plugin is one unit in
``core/plugins/<name>.py`` with a ``NAME``, its reason constants and one object that
satisfies ``FilterPlugin``:

- ``pre_filter(cycle)`` runs once per cycle: it may refuse the pod for every node (a
  reason string), restrict the nodes to evaluate (``rows``), skip the plugin for this pod
  (nothing to check), and keep what it worked out in ``cycle.data[NAME]``.
- ``filter(cycle, rows)`` answers for many nodes at once (rows of the cycle's
  ``core.columns.NodeTable``): which pass, and for those that do not, kube-scheduler's
  reasons. Plugins that are arithmetic over nodes answer with vector operations; the
  others loop over the rows they are given.

``run_filters`` runs a profile (a sequence of plugins, ``core.profile``) the way the
framework does: every PreFilter in order (the first refusal decides), then the filters in
order, each seeing only the nodes every earlier filter passed, so the first filter that
rejects a node gives its reasons.

Per-cycle state lives in ``CycleState``, made by the caller for one pod. What outlives a
cycle (terms parsed from an existing pod, pods counted on an unchanged node, a pod class's
node-affinity mask) lives in a ``Memo`` the caller owns and passes in: the runtime keeps
one per scheduler, ``explain`` and tests make a fresh one. Nothing is cached at module
level. Purely computational: no I/O, no clocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from metricsched.core import columns, model, node_state, versions

_Value = TypeVar("_Value")
_Column = TypeVar("_Column", columns.Ints, columns.Floats)

# Nodes a PreFilter left out (NodeAffinity's matchFields on metadata.name).
REASON_NOT_IN_PREFILTER_RESULT: Final = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


class Memo:
    """Values derived from immutable objects (pods, node states, a table's node version),
    kept across cycles by whoever owns the scheduler.

    Snapshots share unchanged PodInfo and NodeState objects from one cycle to the next,
    so work derived from them is done once, not once per pending pod. Entries are keyed
    by the object's identity and hold the object, so an id cannot be reused by another
    object while the entry lives. Bounded, since it holds the objects: a full memo is
    cleared and refills (the default keeps a few entries per node of a 5,000-node
    cluster without holding on to many superseded node states). The columns kept row by
    row (``per_row``, ``per_rows``: one per pod class and meaning, as long as the table)
    are bounded by their cells too, the least recently used going first: many classes of
    pods (say, each with its own requests) cost at most ``row_cells`` numbers, 32 MB by
    default, and a class whose column went is computed in full again.
    """

    __slots__ = ("_by_row", "_by_table", "_entries", "_limit", "_row_cells", "_row_cells_held")

    def __init__(self, *, limit: int = 50_000, row_cells: int = 4_000_000) -> None:
        self._limit = limit
        self._row_cells = row_cells
        self._row_cells_held = 0
        self._entries: dict[tuple[str, int], tuple[object, object]] = {}
        # (kind, key) -> (table, its node_version, source, value)
        self._by_table: dict[tuple[str, Hashable], tuple[object, int, object, object]] = {}
        # (kind, key) -> (table, the table's stamp when last brought up to date, values)
        self._by_row: dict[tuple[str, Hashable], tuple[object, int, npt.NDArray[Any]]] = {}

    def derived(self, kind: str, source: object, compute: Callable[[], _Value]) -> _Value:
        """``compute()``'s value for ``source`` under ``kind``, computed once per source.
        Each ``kind`` names one meaning ("<Plugin>/<what>"): two uses never share one."""
        key = (kind, id(source))
        entry = self._entries.get(key)
        if entry is not None and entry[0] is source:
            return entry[1]  # type: ignore[return-value]
        value = compute()
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = (source, value)
        return value

    def per_table(
        self,
        kind: str,
        key: Hashable,
        table: columns.NodeTable,
        compute: Callable[[], _Value],
        *,
        source: object = None,
    ) -> _Value:
        """``compute()``'s value for ``key`` (a pod class's terms, a metric), valid while
        ``table``'s nodes are unchanged (same table, same ``node_version``) and, if given,
        ``source`` is the same object: what a node-local filter answers for every row, or a
        metric's values laid out by row, worked out once instead of once per pod."""
        entry = self._by_table.get((kind, key))
        if (
            entry is not None
            and entry[0] is table
            and entry[1] == table.node_version
            and entry[2] is source
        ):
            return entry[3]  # type: ignore[return-value]
        value = compute()
        if len(self._by_table) >= self._limit:
            self._by_table.clear()
        self._by_table[(kind, key)] = (table, table.node_version, source, value)
        return value

    def per_row(
        self,
        kind: str,
        key: Hashable,
        table: columns.NodeTable,
        compute: Callable[[model.NodeState], int],
    ) -> columns.Ints:
        """``compute(state)`` for every row of ``table``, kept up to date incrementally:
        only rows updated since the last call are computed again (pods matching one
        workload's selector, per node: the same answer for every replica, changed only
        where a pod landed). The array is the memo's: read it, do not keep it."""
        states = table.states
        return self.per_rows(
            kind,
            key,
            table,
            lambda rows: np.fromiter(
                (compute(states[row]) for row in rows.tolist()), dtype=np.int64, count=len(rows)
            ),
        )

    def per_rows(
        self,
        kind: str,
        key: Hashable,
        table: columns.NodeTable,
        compute: Callable[[columns.Rows], _Column],
    ) -> _Column:
        """A column over every row of ``table``, ``compute(rows)`` giving its values for
        the rows asked (in that order) from the table's arrays, kept up to date
        incrementally: the first call for a table computes every row, later ones only the
        rows updated since (``row_stamp``). A pod class's score column (``key``: what of
        the pod the score reads) is the same for every replica and changes only on the
        node where the previous one was placed. The array is the memo's: read it, do not
        keep it."""
        # Taken out and put back last: the dictionary's order is the order of last use.
        entry = self._by_row.pop((kind, key), None)
        if entry is not None and entry[0] is table:
            _, stamp, values = entry
            if stamp != table.stamp:
                changed = np.flatnonzero(table.row_stamp > stamp)
                values[changed] = compute(changed)
        else:
            if entry is not None:
                self._row_cells_held -= len(entry[2])
            values = compute(np.arange(len(table), dtype=np.intp))
            self._row_cells_held += len(values)
            while self._by_row and (
                self._row_cells_held > self._row_cells or len(self._by_row) >= self._limit
            ):
                self._row_cells_held -= len(self._by_row.pop(next(iter(self._by_row)))[2])
        self._by_row[(kind, key)] = (table, table.stamp, values)
        return values

    def per_state(self, kind: str, state: object) -> dict[Hashable, object]:
        """A dictionary for answers about one unchanged ``state`` (one per kind)."""
        return self.derived(kind, state, dict)


@dataclasses.dataclass(slots=True)
class CycleState:
    """One pod's cycle: its inputs and what each plugin's PreFilter found."""

    pod: model.PodInfo
    snapshot: model.ClusterSnapshot
    table: columns.NodeTable
    memo: Memo
    data: dict[str, object] = dataclasses.field(default_factory=dict)

    @classmethod
    def start(
        cls,
        pod: model.PodInfo,
        snapshot: model.ClusterSnapshot,
        *,
        table: columns.NodeTable | None = None,
        memo: Memo | None = None,
    ) -> CycleState:
        """The cycle of ``pod`` on ``snapshot``, read through ``table`` (the node table
        handed out beside the snapshot) if it mirrors the snapshot, else a table built now."""
        return cls(
            pod, snapshot, columns.table_of(snapshot, table), Memo() if memo is None else memo
        )

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]] | None:
        return self.snapshot.namespace_labels

    @property
    def rules(self) -> versions.Rules:
        """kube-scheduler's rules of the cluster's version, for plugins that differ by it."""
        return self.snapshot.rules


@dataclasses.dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter's answer; the default lets the plugin's filter run on every node."""

    refusal: str = ""  # rules out every node, with this reason
    skip: bool = False  # nothing to check for this pod: the filter is not run
    rows: columns.Rows | None = None  # only these nodes are evaluated (None: all)


PASS: Final = PreFilterResult()
SKIP: Final = PreFilterResult(skip=True)


def refuse(reason: str) -> PreFilterResult:
    return PreFilterResult(refusal=reason)


@dataclasses.dataclass(frozen=True, slots=True)
class Filtered:
    """A filter's answer for the rows it was given: ``passed[i]`` for ``rows[i]``; the
    rejected rows' reasons are ``reason`` for all, or ``each`` (one tuple per rejected
    row, in row order)."""

    passed: columns.Bools
    reason: tuple[str, ...] = ()
    each: Sequence[tuple[str, ...]] | None = None


class FilterPlugin(Protocol):
    """kube-scheduler's PreFilter and Filter extension points, for many nodes at once."""

    @property
    def name(self) -> str: ...

    def pre_filter(self, cycle: CycleState) -> PreFilterResult: ...

    def filter(self, cycle: CycleState, rows: columns.Rows) -> Filtered: ...


def all_pass(rows: columns.Rows) -> Filtered:
    return Filtered(np.ones(len(rows), dtype=np.bool_))


def rejected_where(failed: columns.Bools, reason: str) -> Filtered:
    """Rows where ``failed`` holds are rejected with ``reason``."""
    return Filtered(~failed, (reason,))


def scalar_filter(
    rows: columns.Rows, table: columns.NodeTable, check: Callable[[model.NodeState], str]
) -> Filtered:
    """A filter that needs each node's state: ``check`` returns "" or the reason."""
    states = table.states
    passed = np.ones(len(rows), dtype=np.bool_)
    each: list[tuple[str, ...]] = []
    for position, row in enumerate(rows.tolist()):
        if reason := check(states[row]):
            passed[position] = False
            each.append((reason,))
    return Filtered(passed, each=each)


@dataclasses.dataclass(frozen=True, slots=True)
class FilterOutcome:
    """What the filters found: a refusal for every node, or the nodes that passed."""

    refusal: str  # a PreFilter's reason that rules out every node ("" when none)
    feasible: columns.Rows  # table rows that passed every filter, in name order
    rejected: Mapping[model.NodeName, tuple[str, ...]]  # the others, with their reasons
    # the plugins whose PreFilter said Skip (their Filter did not run)
    skipped: frozenset[str] = frozenset()


def run_filters(
    cycle: CycleState, plugins: Sequence[FilterPlugin], *, only: columns.Rows | None = None
) -> FilterOutcome:
    """Run ``plugins``' PreFilters then Filters for ``cycle.pod`` over every node (or the
    rows ``only`` names: the others are left out of the outcome)."""
    table = cycle.table
    names = table.names
    active: list[FilterPlugin] = []
    skipped: set[str] = set()
    allowed: columns.Rows | None = None  # the rows the PreFilters leave (None: all)
    for plugin in plugins:
        result = plugin.pre_filter(cycle)
        if result.refusal:
            return FilterOutcome(result.refusal, np.empty(0, dtype=np.intp), {})
        if result.rows is not None:
            allowed = result.rows if allowed is None else np.intersect1d(allowed, result.rows)
        if result.skip:
            skipped.add(plugin.name)
        else:
            active.append(plugin)
    rejected: dict[model.NodeName, tuple[str, ...]] = {}
    rows = np.arange(len(table), dtype=np.intp) if only is None else only
    if allowed is not None:
        allowed = allowed if only is None else np.intersect1d(only, allowed)
        absent = (REASON_NOT_IN_PREFILTER_RESULT,)
        for row in np.setdiff1d(rows, allowed).tolist():
            rejected[names[row]] = absent
        rows = allowed
    for plugin in active:
        if not len(rows):
            break
        filtered = plugin.filter(cycle, rows)
        if filtered.passed.all():
            continue
        dropped = rows[~filtered.passed].tolist()
        if filtered.each is None:
            rejected.update(dict.fromkeys([names[row] for row in dropped], filtered.reason))
        else:
            for row, reasons in zip(dropped, filtered.each, strict=True):
                rejected[names[row]] = reasons
        rows = rows[filtered.passed]
    return FilterOutcome("", rows, rejected, frozenset(skipped))


def nominated_counted(
    pod: model.PodInfo, pods: Sequence[model.PodInfo]
) -> tuple[model.PodInfo, ...]:
    """The nominated ``pods`` (of one node) that ``pod`` must yield to: those of equal or
    higher priority, the pod itself aside (kube-scheduler's ``addGENominatedPods``)."""
    return tuple(p for p in pods if p.priority >= pod.priority and p.uid != pod.uid)


def with_nominated(state: model.NodeState, counted: Sequence[model.PodInfo]) -> model.NodeState:
    """``state`` with the ``counted`` nominated pods as if bound there (kube-scheduler's
    ``AddPodInfo`` on a copy of the node)."""
    name = state.node.name
    for other in counted:
        state = node_state.add_pod(state, dataclasses.replace(other, node_name=name))
    return state


def run_filters_with_nominated(cycle: CycleState, plugins: Sequence[FilterPlugin]) -> FilterOutcome:
    """``run_filters`` with the nominated pods counted as kube-scheduler counts them
    (``RunFilterPluginsWithNominatedPods`` and ``addGENominatedPods``).

    A node that unbound pods of equal or higher priority than the cycle's pod are
    nominated to (``snapshot.nominated``; the pod itself aside) is filtered twice: first as
    if those pods ran there (their requests, ports and labels, so that the PreFilters'
    counts of pod affinity and topology spread include them too), then as it is. The node
    passes only if both pass; a failure of the first pass gives its reasons. The second
    pass is the plain run: a nominated pod may end up elsewhere, so an affinity that holds
    only thanks to it does not hold. Pods nominated to other nodes are not counted while
    one node is evaluated, as in kube-scheduler, which adds them per node.

    A plugin whose PreFilter said Skip for the pod stays skipped in the first pass:
    kube-scheduler decides the skips once, in the PreFilter run without the nominated
    pods, then adds them only to the plugins that did not skip (``RunPreFilterExtension
    AddPod`` and ``RunFilterPlugins`` pass over ``SkipFilterPlugins``). So a nominated
    pod's required anti-affinity counts only when InterPodAffinity runs for the pod anyway
    (the pod has terms, or a bound pod's anti-affinity matches it)."""
    found = run_filters(cycle, plugins)
    nominated = cycle.snapshot.nominated
    if found.refusal or not nominated:
        return found
    unskipped = [plugin for plugin in plugins if plugin.name not in found.skipped]
    pod = cycle.pod
    table = cycle.table
    index = {name: row for row, name in enumerate(table.names)}
    feasible = found.feasible
    rejected = dict(found.rejected)
    for name, pods in sorted(nominated.items()):
        row = index.get(name)
        if row is None or rejected.get(name) == (REASON_NOT_IN_PREFILTER_RESULT,):
            continue  # a node not known, or one the PreFilters left out anyway
        counted = nominated_counted(pod, pods)
        if not counted:
            continue
        state = with_nominated(cycle.snapshot.nodes[name], counted)
        trial, trial_table = columns.replace_state(cycle.snapshot, table, state)
        first = run_filters(
            CycleState.start(pod, trial, table=trial_table, memo=cycle.memo),
            unskipped,
            only=np.array([row], dtype=np.intp),
        )
        if first.refusal:
            # A PreFilter refusing the pod only with the nominated pods counted: this
            # node cannot take the pod beside them.
            rejected[name] = (first.refusal,)
        elif name in first.rejected:
            rejected[name] = first.rejected[name]
        else:
            continue
        feasible = feasible[feasible != row]
    return FilterOutcome("", feasible, rejected, found.skipped)
