"""Columnar node state: one numpy array per per-node quantity the cycle reads.

A ``NodeTable`` holds the nodes of a snapshot in name order (row i is ``names[i]``) with
their allocatable and requested resources, cordon, taint and host-port flags and the time
of their last bind, each as one array. Filters and scores that are arithmetic over nodes
(NodeResourcesFit, NodeUnschedulable, LeastAllocated, BalancedAllocation, the metric
columns, the burst counts) are vector operations on these arrays; what needs a node's
labels or pods (affinity, spread) reads ``states[row]``.

A table sits beside the snapshot it was made for, never inside it: it names the mapping
of node states it mirrors (``source``, the snapshot's ``nodes``) and that mapping's version
(``version``, the snapshot's ``nodes_version``), and ``table_of`` hands the cycle a table
only if both are the snapshot's, else builds one. So a snapshot made with other nodes, or
one the maker's mapping has moved past, is never read from a stale table. The runtime
cache keeps one table up to date as nodes and pods change (``TableKeeper``: ``update``
rewrites one row in place; a node added or removed rebuilds the table at the next read);
``NodeTable.of`` builds one from a snapshot for callers without a cache (tests,
``explain``), and ``replace_state`` makes a dry run's snapshot and table with one node's
state replaced.

``node_version`` counts changes to what the node-local filters read of a node (labels,
taints, cordon, allocatable, the set of nodes): results that depend on nothing else (a
pod class's node affinity, see ``core.framework``) stay valid while it stays the same.

Purely computational: no I/O, no clocks.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from metricsched.core import model

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]
Objects = npt.NDArray[np.object_]

RECENT_HORIZON_S = 3600.0
"""Pods bound this long before a node's newest are not kept as recent (the longest
settle time a policy may set)."""
RECENT_DEPTH = 64
"""At most this many of a node's most recent pods are kept as recent."""

_FILTERED_EFFECTS = frozenset({model.TaintEffect.NO_SCHEDULE, model.TaintEffect.NO_EXECUTE})
_NEVER = -np.inf
_ROW_ARRAYS = (
    "nonzero_cpu",
    "nonzero_memory",
    "unschedulable",
    "tainted",
    "soft_tainted",
    "has_ports",
    "has_pods",
    "has_anti_affinity",
    "has_affinity_terms",
    "last_bind",
    "bind_times",
    "row_stamp",
)


@dataclasses.dataclass(slots=True)
class ResourceColumns:
    """cpu (millicores), memory, ephemeral storage (bytes) and pods, one row per node."""

    milli_cpu: Ints
    memory: Ints
    ephemeral_storage: Ints
    pods: Ints

    @classmethod
    def zeros(cls, size: int) -> ResourceColumns:
        return cls(*(np.zeros(size, dtype=np.int64) for _ in range(4)))

    def copy(self) -> ResourceColumns:
        return ResourceColumns(
            self.milli_cpu.copy(),
            self.memory.copy(),
            self.ephemeral_storage.copy(),
            self.pods.copy(),
        )

    def set(self, row: int, value: model.Resources) -> None:
        self.milli_cpu[row] = value.milli_cpu
        self.memory[row] = value.memory
        self.ephemeral_storage[row] = value.ephemeral_storage
        self.pods[row] = value.pods


@dataclasses.dataclass(slots=True)
class RecentPods:
    """Each node's recently bound pods (whichever scheduler bound them), as k-major
    arrays: ``at[k, row]`` is when the row's k-th recent pod was bound (-inf past its
    last), beside that pod's cpu and memory requests and limits and its workload's number
    (``workloads``; 0: none). What the metric estimates read (``core.estimate``)."""

    at: Floats
    cpu: Floats  # millicores requested
    cpu_limit: Floats
    memory: Floats  # bytes requested
    memory_limit: Floats
    workload: Ints
    workloads: dict[str, int]  # workload -> number, growing while the table lives
    workload_names: list[str]  # number -> workload
    # the pod's "namespace/name" and its ``usage_workload`` (object arrays of str, "" past
    # the last): what ``estimate.from: Measured`` looks up in the measured usage
    key: Objects
    usage_workload: Objects
    # Bumped for a row each time it is laid out again (``fill``): what a consumer derived
    # from a row (``derived``, e.g. core.estimate's measured amounts per slot) is current
    # while the version it saw is the row's.
    row_version: Ints = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    derived: dict[object, typing.Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def empty(cls, depth: int, size: int) -> RecentPods:
        floats = [np.zeros((depth, size)) for _ in range(4)]
        return cls(
            at=np.full((depth, size), _NEVER),
            cpu=floats[0],
            cpu_limit=floats[1],
            memory=floats[2],
            memory_limit=floats[3],
            workload=np.zeros((depth, size), dtype=np.int64),
            workloads={"": 0},
            workload_names=[""],
            key=np.full((depth, size), "", dtype=object),
            usage_workload=np.full((depth, size), "", dtype=object),
            row_version=np.zeros(size, dtype=np.int64),
        )

    def copy(self) -> RecentPods:
        return RecentPods(
            self.at.copy(),
            self.cpu.copy(),
            self.cpu_limit.copy(),
            self.memory.copy(),
            self.memory_limit.copy(),
            self.workload.copy(),
            self.workloads,
            self.workload_names,
            self.key.copy(),
            self.usage_workload.copy(),
            self.row_version.copy(),
            {},  # derived anew on demand: the copy's rows may be rewritten (dry runs)
        )

    def fill(self, row: int, pods: Sequence[model.PodInfo]) -> None:
        """Lay out the recent ones of ``pods`` (a node's) in ``row``."""
        recent = _recent(pods)
        depth = self.at.shape[0]
        if len(recent) > depth:
            grown = max(len(recent), min(2 * depth, RECENT_DEPTH))
            for name in _RECENT_COLUMNS:
                old = getattr(self, name)
                blank = _NEVER if name == "at" else ("" if old.dtype == object else 0)
                new = np.full((grown, old.shape[1]), blank, old.dtype)
                new[:depth] = old
                setattr(self, name, new)
        self.at[:, row] = _NEVER
        if row >= len(self.row_version):
            grown_rows = np.zeros(max(row + 1, self.at.shape[1]), dtype=np.int64)
            grown_rows[: len(self.row_version)] = self.row_version
            self.row_version = grown_rows
        self.row_version[row] += 1
        for k, pod in enumerate(recent):
            self.at[k, row] = pod.bound_at
            self.cpu[k, row] = pod.requests.milli_cpu
            self.cpu_limit[k, row] = pod.limits.milli_cpu
            self.memory[k, row] = pod.requests.memory
            self.memory_limit[k, row] = pod.limits.memory
            self.workload[k, row] = self.number(pod.workload)
            self.key[k, row] = pod.key
            self.usage_workload[k, row] = pod.usage_workload

    def number(self, workload: str) -> int:
        found = self.workloads.get(workload)
        if found is None:
            found = self.workloads[workload] = len(self.workload_names)
            self.workload_names.append(workload)
        return found


_RECENT_COLUMNS = (
    "at",
    "cpu",
    "cpu_limit",
    "memory",
    "memory_limit",
    "workload",
    "key",
    "usage_workload",
)


def _recent(pods: Sequence[model.PodInfo]) -> list[model.PodInfo]:
    """The pods bound within ``RECENT_HORIZON_S`` of the newest, newest first, at most
    ``RECENT_DEPTH`` (the table has no clock: older ones are settled by then anyway)."""
    dated = [pod for pod in pods if pod.bound_at > 0]
    if not dated:
        return []
    dated.sort(key=lambda pod: pod.bound_at, reverse=True)
    since = dated[0].bound_at - RECENT_HORIZON_S
    return [pod for pod in dated[:RECENT_DEPTH] if pod.bound_at >= since]


@dataclasses.dataclass(slots=True)
class NodeTable:
    """The nodes of one snapshot as columns; see the module docstring."""

    names: tuple[model.NodeName, ...]
    rows: dict[model.NodeName, int]
    states: list[model.NodeState]
    allocatable: ResourceColumns
    requested: ResourceColumns
    # cpu and memory as kube-scheduler's scores count them (NodeState.nonzero_requested)
    nonzero_cpu: Ints
    nonzero_memory: Ints
    unschedulable: Bools
    tainted: Bools  # has a NoSchedule or NoExecute taint
    soft_tainted: Bools  # has a PreferNoSchedule taint
    has_ports: Bools  # some pod on the node uses a host port
    has_pods: Bools
    has_anti_affinity: Bools  # some pod on the node has required anti-affinity terms
    has_affinity_terms: Bools  # some pod has required affinity or preferred (anti-)affinity
    last_bind: Floats  # latest of the node's recent binds; -inf when none
    # bind_times[k, row]: the row's k-th recent bind (``NodeState.recent_binds``), -inf
    # past its last; as many k as the most any row has had (more added when a row needs
    # them). Laid out k-major so counting reduces over contiguous rows.
    bind_times: npt.NDArray[np.float64]
    # ``stamp`` counts row updates; ``row_stamp[row]`` is the stamp of the row's last one,
    # so whoever keeps a per-row result can redo just the rows changed since.
    row_stamp: Ints
    recent: RecentPods
    node_version: int = 0
    stamp: int = 0
    # The node states this table mirrors (a snapshot's ``nodes``, by identity) and their
    # version (the snapshot's ``nodes_version``); None: no snapshot's (``build`` alone).
    source: Mapping[model.NodeName, model.NodeState] | None = None
    version: int | None = None
    # extended resources by name -> (allocatable, requested), made on first use and then
    # kept up to date with the other columns
    _scalars: dict[str, tuple[Ints, Ints]] = dataclasses.field(default_factory=dict)
    # label key -> (node_version, each row's value as a number, value -> number)
    _labels: dict[str, tuple[int, Ints, dict[str, int]]] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, states: Iterable[model.NodeState], *, node_version: int = 0) -> NodeTable:
        ordered = sorted(states, key=lambda state: state.node.name)
        size = len(ordered)
        table = cls(
            names=tuple(state.node.name for state in ordered),
            rows={state.node.name: row for row, state in enumerate(ordered)},
            states=list(ordered),
            allocatable=ResourceColumns.zeros(size),
            requested=ResourceColumns.zeros(size),
            nonzero_cpu=np.zeros(size, dtype=np.int64),
            nonzero_memory=np.zeros(size, dtype=np.int64),
            unschedulable=np.zeros(size, dtype=np.bool_),
            tainted=np.zeros(size, dtype=np.bool_),
            soft_tainted=np.zeros(size, dtype=np.bool_),
            has_ports=np.zeros(size, dtype=np.bool_),
            has_pods=np.zeros(size, dtype=np.bool_),
            has_anti_affinity=np.zeros(size, dtype=np.bool_),
            has_affinity_terms=np.zeros(size, dtype=np.bool_),
            last_bind=np.full(size, _NEVER, dtype=np.float64),
            bind_times=np.full(
                (max((len(state.recent_binds) for state in ordered), default=0), size),
                _NEVER,
                dtype=np.float64,
            ),
            row_stamp=np.zeros(size, dtype=np.int64),
            recent=RecentPods.empty(0, size),  # deepened by _fill as rows need
            node_version=node_version,
        )
        for row, state in enumerate(ordered):
            table._fill(row, state)
        return table

    @classmethod
    def of(cls, snapshot: model.ClusterSnapshot) -> NodeTable:
        """A table of ``snapshot``'s nodes, mirroring that snapshot."""
        table = cls.build(snapshot.nodes.values())
        table.source, table.version = snapshot.nodes, snapshot.nodes_version
        return table

    def mirrors(self, snapshot: model.ClusterSnapshot) -> bool:
        """Whether this table holds ``snapshot``'s node states: made (or kept up to date)
        from the same mapping, at the same version."""
        return (
            self.source is snapshot.nodes
            and self.version == snapshot.nodes_version
            and len(self.names) == len(snapshot.nodes)
        )

    def __len__(self) -> int:
        return len(self.names)

    def update(self, state: model.NodeState) -> None:
        """Rewrite the row of an existing node (the caller rebuilds for new nodes)."""
        row = self.rows[state.node.name]
        if self.states[row].node is not state.node:
            self.node_version += 1
        self.states[row] = state
        self.stamp += 1
        self.row_stamp[row] = self.stamp
        self._fill(row, state)
        for name, (allocatable, requested) in self._scalars.items():
            allocatable[row] = state.node.allocatable.scalar.get(name, 0)
            requested[row] = state.requested.scalar.get(name, 0)

    def with_state(
        self,
        state: model.NodeState,
        *,
        source: Mapping[model.NodeName, model.NodeState] | None = None,
        version: int | None = None,
    ) -> NodeTable:
        """A copy of this table with one existing node's row replaced (dry runs), mirroring
        ``source`` at ``version`` (see ``replace_state``)."""
        copy = dataclasses.replace(
            self,
            source=source,
            version=version,
            rows=self.rows,
            states=list(self.states),
            allocatable=self.allocatable.copy(),
            requested=self.requested.copy(),
            **{field: getattr(self, field).copy() for field in _ROW_ARRAYS},
            _scalars={name: (a.copy(), r.copy()) for name, (a, r) in self._scalars.items()},
            _labels={},
            recent=self.recent.copy(),
        )
        copy.update(state)
        return copy

    def binds_since(self, since: float) -> Ints:
        """Each row's recent binds at or after ``since``."""
        # an empty slot holds -inf: never counted, even for since = -inf
        floor = max(since, float(np.finfo(np.float64).min))
        counts: Ints = (self.bind_times >= floor).sum(axis=0, dtype=np.int64)
        return counts

    def label_ids(self, key: str) -> tuple[Ints, Mapping[str, int]]:
        """Each row's value of label ``key`` as a number (0: no such label), and the
        numbers of the values; worked out once per node version."""
        found = self._labels.get(key)
        if found is None or found[0] != self.node_version:
            numbers: dict[str, int] = {}
            ids = np.fromiter(
                (
                    0
                    if (value := state.node.labels.get(key)) is None
                    else numbers.setdefault(value, len(numbers) + 1)
                    for state in self.states
                ),
                dtype=np.int64,
                count=len(self.states),
            )
            found = self._labels[key] = (self.node_version, ids, numbers)
        return found[1], found[2]

    def scalar(self, name: str) -> tuple[Ints, Ints]:
        """Allocatable and requested amounts of extended resource ``name``."""
        found = self._scalars.get(name)
        if found is None:
            allocatable = np.fromiter(
                (s.node.allocatable.scalar.get(name, 0) for s in self.states),
                dtype=np.int64,
                count=len(self.states),
            )
            requested = np.fromiter(
                (s.requested.scalar.get(name, 0) for s in self.states),
                dtype=np.int64,
                count=len(self.states),
            )
            found = self._scalars[name] = (allocatable, requested)
        return found

    def _fill(self, row: int, state: model.NodeState) -> None:
        node = state.node
        self.allocatable.set(row, node.allocatable)
        self.requested.set(row, state.requested)
        nonzero = state.requested if state.nonzero_requested is None else state.nonzero_requested
        self.nonzero_cpu[row] = nonzero.milli_cpu
        self.nonzero_memory[row] = nonzero.memory
        self.unschedulable[row] = node.unschedulable
        self.tainted[row] = any(t.effect in _FILTERED_EFFECTS for t in node.taints)
        self.soft_tainted[row] = any(
            t.effect == model.TaintEffect.PREFER_NO_SCHEDULE for t in node.taints
        )
        self.has_ports[row] = bool(state.used_ports)
        self.has_pods[row] = bool(state.pods)
        self.has_anti_affinity[row] = any(pod.pod_anti_affinity for pod in state.pods)
        self.has_affinity_terms[row] = any(
            pod.pod_affinity or pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity
            for pod in state.pods
        )
        binds = state.recent_binds
        self.last_bind[row] = max(binds, default=_NEVER)
        depth = self.bind_times.shape[0]
        if len(binds) > depth:
            deeper = np.full((max(len(binds), 2 * depth), len(self.names)), _NEVER)
            deeper[:depth] = self.bind_times
            self.bind_times = deeper
        self.bind_times[:, row] = _NEVER
        self.bind_times[: len(binds), row] = binds
        self.recent.fill(row, state.pods)


_Item = typing.TypeVar("_Item")


class Picked(Sequence[_Item]):
    """``items[rows[i]]`` for each i, read on demand: the names or states of some rows of
    a table without making a list of them (most readers need two, or none)."""

    __slots__ = ("_items", "_rows")

    def __init__(self, items: Sequence[_Item], rows: Rows) -> None:
        self._items = items
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @typing.overload
    def __getitem__(self, index: int) -> _Item: ...

    @typing.overload
    def __getitem__(self, index: slice) -> Sequence[_Item]: ...

    def __getitem__(self, index: int | slice) -> _Item | Sequence[_Item]:
        if isinstance(index, slice):
            return [self._items[row] for row in self._rows[index].tolist()]
        return self._items[int(self._rows[index])]


class TableKeeper:
    """Keeps a ``NodeTable`` in step with a changing mapping of node states (the runtime
    cache's): ``changed`` for a rebuilt state, ``removed``/new nodes rebuild lazily.
    ``version`` counts the changes: the snapshots made from the mapping carry it as their
    ``nodes_version``, and the table handed out mirrors it."""

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._stale = True
        self._node_version = 0
        self.version = 0

    def changed(self, state: model.NodeState) -> None:
        self.version += 1
        table = self._table
        if table is None or self._stale or state.node.name not in table.rows:
            self._stale = True
        else:
            table.update(state)
            table.version = self.version

    def removed(self) -> None:
        self.version += 1
        self._stale = True

    def table(self, states: Mapping[model.NodeName, model.NodeState]) -> NodeTable:
        """The table for ``states`` (the same mapping every ``changed`` call came from)."""
        if self._stale or self._table is None:
            if self._table is not None:
                self._node_version = self._table.node_version + 1
            self._table = NodeTable.build(states.values(), node_version=self._node_version)
            self._stale = False
        self._table.source, self._table.version = states, self.version
        return self._table


def table_of(snapshot: model.ClusterSnapshot, table: NodeTable | None = None) -> NodeTable:
    """The node table of ``snapshot``: ``table`` (handed out beside it) if it mirrors the
    snapshot, else one built now. Never a table of other nodes or another state of them."""
    if table is not None and table.mirrors(snapshot):
        return table
    return NodeTable.of(snapshot)


def replace_state(
    snapshot: model.ClusterSnapshot, table: NodeTable | None, state: model.NodeState
) -> tuple[model.ClusterSnapshot, NodeTable | None]:
    """``snapshot`` with one existing node's state replaced (dry runs), and beside it
    ``table`` with that row rewritten (None when ``table`` does not mirror ``snapshot``:
    the cycle then builds one)."""
    nodes = {**snapshot.nodes, state.node.name: state}
    trial = dataclasses.replace(snapshot, nodes=nodes, nodes_version=None)
    if table is None or not table.mirrors(snapshot):
        return trial, None
    return trial, table.with_state(state, source=nodes)
