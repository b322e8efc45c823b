"""NodeResourcesFit (Filter): a free pod slot and room for every resource requested.

Contract: a node passes when ``pods + 1 <= allocatable pods`` and, for each resource the
pod requests (request > 0), the request fits in allocatable minus requested; a node that
fails reports one reason per shortfall, in kube-scheduler's order (Too many pods, cpu,
memory, ephemeral-storage, then extended resources by name). Only what the pod asks for
is checked, so an over-committed node (allocatable shrank below what is requested) still
takes pods that do not need it. Vector: each check is one comparison over the rows; a
node's reasons are the bits of a code, rendered once per distinct code. A node's code
reads only its row and the pod's requests: in the cycle the codes are a pod class's
column, kept in the memo per node table and computed again only for the rows updated since.

DRA-backed extended resources (KEP-5004; the rules of v1.36 and later): an extended
resource that a DeviceClass maps (``spec.extendedResourceName``, or
``deviceclass.resource.kubernetes.io/<class>``) and that the node does not list in
allocatable is not checked here in kube-scheduler (``shouldDelegateResourceToDRA``): its
DynamicResources plugin allocates a device for it. metricsched does not allocate claims,
so such a node is refused for the pod with ``REASON_DRA_BACKED``, which says what to do,
instead of ``Insufficient`` (false: the node may well have the devices). A node that
lists the resource (a device plugin) is checked as before.

Its score half (LeastAllocated) is ``node_resources_fit.scoring``.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns, framework, model

NAME: Final = "NodeResourcesFit"
REASON_TOO_MANY_PODS: Final = "Too many pods"
REASON_INSUFFICIENT_CPU: Final = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY: Final = "Insufficient memory"
REASON_INSUFFICIENT_EPHEMERAL: Final = "Insufficient ephemeral-storage"


def dra_backed_reason(resource: str) -> str:
    """The reason for a node that would serve ``resource`` through DRA."""
    return (
        f"node(s) serve {resource} through DRA (a DeviceClass maps it), which metricsched "
        "does not allocate: set spec.schedulerName to default-scheduler for this pod"
    )


def insufficient_reason(resource: str) -> str:
    """The reason for one resource, e.g. ``Insufficient cpu``."""
    return f"Insufficient {resource}"


def shortfalls(
    request: model.Resources, state: model.NodeState, *, dra: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """The reasons ``state``'s node cannot take a pod requesting ``request`` (empty: it
    can), for one node outside a cycle (preemption's dry runs); ``dra`` as ``dra_backed``."""
    table = columns.NodeTable.build([state])
    filtered = _fit(request, table, np.zeros(1, dtype=np.intp), dra)
    if filtered.passed[0]:
        return ()
    assert filtered.each is not None
    return filtered.each[0]


def requested_scalars(request: model.Resources) -> tuple[str, ...]:
    # Zero requests are never short (kube-scheduler skips them); names sorted for a stable
    # order, where kube-scheduler follows Go's random map order.
    return tuple(sorted(name for name, amount in request.scalar.items() if amount > 0))


def dra_backed(request: model.Resources, snapshot: model.ClusterSnapshot) -> frozenset[str]:
    """The pod's requested extended resources that DRA may serve under the snapshot's
    rules (empty before v1.36, or without a DeviceClass mapping them)."""
    if not snapshot.rules.dra_extended_resources or not snapshot.device_class_resources:
        return frozenset()
    return frozenset(requested_scalars(request)) & snapshot.device_class_resources


class NodeResourcesFit:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        return framework.PASS

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        request = cycle.pod.requests
        table = cycle.table
        dra = dra_backed(request, cycle.snapshot)
        # A node's code reads only its row and the request: a pod class's column, kept per
        # table and computed again only for the rows updated since.
        key = (
            request.milli_cpu,
            request.memory,
            request.ephemeral_storage,
            tuple(sorted(request.scalar.items())),
            tuple(sorted(dra)),
        )
        codes = cycle.memo.per_rows(
            f"{NAME}/codes", key, table, lambda changed: _codes(request, table, changed, dra)
        )
        return _filtered(request, codes[rows], rows, dra)


def _fit(
    request: model.Resources,
    table: columns.NodeTable,
    rows: columns.Rows,
    dra: frozenset[str] = frozenset(),
) -> framework.Filtered:
    return _filtered(request, _codes(request, table, rows, dra), rows, dra)


def _codes(
    request: model.Resources,
    table: columns.NodeTable,
    rows: columns.Rows,
    dra: frozenset[str] = frozenset(),
) -> columns.Ints:
    """Each row's shortfalls as the bits of a code (0: the pod fits), in ``_reasons`` order:
    too many pods, cpu, memory, ephemeral-storage, each requested scalar short, then each
    requested scalar that DRA would serve on the node (``dra``: mapped by a DeviceClass;
    a node without it in allocatable)."""
    allocatable, used = table.allocatable, table.requested
    code = (used.pods[rows] + 1 > allocatable.pods[rows]).astype(np.int64)
    checks = (
        (request.milli_cpu, allocatable.milli_cpu, used.milli_cpu),
        (request.memory, allocatable.memory, used.memory),
        (request.ephemeral_storage, allocatable.ephemeral_storage, used.ephemeral_storage),
    )
    for bit, (amount, have, taken) in enumerate(checks, start=1):
        if amount > 0:
            code |= (amount > have[rows] - taken[rows]).astype(np.int64) << bit
    scalars = requested_scalars(request)
    delegable = _delegable(request, dra)
    for bit, scalar in enumerate(scalars, start=len(checks) + 1):
        have, taken = table.scalar(scalar)
        short = request.scalar[scalar] > have[rows] - taken[rows]
        if scalar in dra:
            # kube-scheduler's shouldDelegateResourceToDRA: not in the node's allocatable
            # means DRA's, not this check's; here, a node metricsched cannot serve.
            delegated = have[rows] <= 0
            dra_bit = len(checks) + 1 + len(scalars) + delegable.index(scalar)
            code |= delegated.astype(np.int64) << dra_bit
            short &= ~delegated
        code |= short.astype(np.int64) << bit
    return code


def _delegable(request: model.Resources, dra: frozenset[str]) -> list[str]:
    return [scalar for scalar in requested_scalars(request) if scalar in dra]


def _reasons(request: model.Resources) -> list[str]:
    names = [REASON_TOO_MANY_PODS, REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY]
    names.append(REASON_INSUFFICIENT_EPHEMERAL)
    names.extend(insufficient_reason(scalar) for scalar in requested_scalars(request))
    return names


def _filtered(
    request: model.Resources,
    code: columns.Ints,
    rows: columns.Rows,
    dra: frozenset[str] = frozenset(),
) -> framework.Filtered:
    failed = code != 0
    if not failed.any():
        return framework.all_pass(rows)
    names = _reasons(request) + [dra_backed_reason(s) for s in _delegable(request, dra)]
    rendered: dict[int, tuple[str, ...]] = {}
    each = []
    for value in code[failed].tolist():
        reasons = rendered.get(value)
        if reasons is None:
            reasons = rendered[value] = tuple(
                name for bit, name in enumerate(names) if value >> bit & 1
            )
        each.append(reasons)
    return framework.Filtered(~failed, each=each)


PLUGIN: Final[framework.FilterPlugin] = NodeResourcesFit()
