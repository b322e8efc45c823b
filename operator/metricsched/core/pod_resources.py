"""A pod's effective requests and limits, as kube-scheduler computes them.

kube-scheduler's ``resource.PodRequests`` (k8s.io/component-helpers, used by
NodeResourcesFit and by the scheduler cache): regular containers are summed; a sidecar
(init container with ``restartPolicy: Always``) adds to that sum and stays running for
later init containers; each regular init container needs its own request plus the
sidecars started before it, and the pod needs the maximum of all that; pod-level
``spec.resources.requests`` replace the container total for cpu, memory and hugepages;
``spec.overhead`` is added last. A container whose status reports resources (in-place
resize) counts the largest of its spec, actuated and allocated requests, resource by
resource (from v1.37, the largest of the three sums: ``versions.Rules``). Quantities are
summed exactly and rounded up once per pod, as the scheduler does. Also the component-wise
sum of ``model.Resources`` and which names kube-scheduler tracks as scalars.

Read by ``core.parse`` (a pod's body); the field readers are ``core.body_fields``'.
Purely computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from metricsched.core import body_fields, model, quantity, versions

Container = tuple[str, Mapping[str, Any]]  # a container's JSON path and body


@dataclasses.dataclass(frozen=True, slots=True)
class Containers:
    """A pod's containers (``spec.containers``) and init containers, each with its path."""

    regular: Sequence[Container]
    init: Sequence[Container] = ()


CPU: Final = "cpu"


MEMORY: Final = "memory"


_EPHEMERAL: Final = "ephemeral-storage"


PODS: Final = "pods"


HUGEPAGES_PREFIX: Final = "hugepages-"


_ATTACHABLE_PREFIX: Final = "attachable-volumes-"


def pod_limits(
    containers: Containers,
) -> model.Resources:
    """cpu and memory limits summed as requests are (a container without a limit counts
    its request): the most the pod's containers may use, for ``estimate.from: Limits``."""

    def limits_of(path: str, container: Mapping[str, Any]) -> body_fields.Requests:
        resources = body_fields.mapping(container, "resources", f"{path}.resources")
        found = body_fields.quantity_map(resources, "limits", f"{path}.resources.limits")
        for name, amount in container_requests(container, path).items():
            found.setdefault(name, amount)
        return {name: found[name] for name in (CPU, MEMORY) if name in found}

    total = _aggregate(containers, limits_of)
    return model.Resources(
        milli_cpu=quantity.nano_to_milli(total.get(CPU, 0)),
        memory=quantity.nano_to_int(total.get(MEMORY, 0)),
    )


def pod_requests(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    *,
    containers: Containers,
    rules: versions.Rules = versions.DEFAULT,
    defaults: Mapping[str, Any] | None = None,
) -> model.Resources:
    """``defaults``: the requests a container's status-derived list counts for a missing
    cpu / memory (NonMissingContainerRequests; the spec's are in ``containers`` already)."""
    specs = {
        path: container_requests(c, path) for path, c in (*containers.regular, *containers.init)
    }
    if rules.resize_max_of_sums:
        total = _max_of_sums(
            status,
            containers=containers,
            specs=specs,
            defaults=defaults or {},
            rules=rules,
        )
        _apply_pod_level(total, spec, status, rules, containers_request=specs.values())
        _add_into(total, body_fields.quantity_map(spec, "overhead", "spec.overhead"))
        return resources(total, pods=1)
    # In-place resize (resource.PodRequests with UseStatusResources): a container whose
    # status reports resources counts, per resource, the largest of its spec, actuated and
    # allocated requests, or, while the resize is Infeasible, of actuated and allocated
    # only. Regular init containers have finished and always count their spec.
    statuses = container_statuses(status)
    infeasible = resize_infeasible(status)
    effective = dict(specs)
    running = [*containers.regular, *((p, c) for p, c in containers.init if is_sidecar(c, p))]
    for path, container in running:
        reported = status_requests(statuses, container, infeasible=infeasible)
        if reported is not None:
            if not infeasible:
                _max_into(reported, specs[path])
            effective[path] = reported
    total = _aggregate(containers, lambda path, _c: effective[path])

    _apply_pod_level(total, spec, status, rules, containers_request=specs.values())
    overhead = body_fields.quantity_map(spec, "overhead", "spec.overhead")
    _add_into(total, overhead)
    return resources(total, pods=1)


def _max_of_sums(
    status: Mapping[str, Any],
    *,
    containers: Containers,
    specs: Mapping[str, body_fields.Requests],
    defaults: Mapping[str, Any],
    rules: versions.Rules,
) -> body_fields.Requests:
    """In-place resize from v1.37 (resource.AggregateContainerRequests): the pod's spec,
    actuated and allocated requests are each aggregated over all containers (init ones
    included), and the pod counts the largest of the three sums per resource (of actuated
    and allocated only while the resize is Infeasible). A container's allocated requests
    are its status's ``allocatedResources``, its actuated ones its status's
    ``resources.requests``, else its allocated ones; without them, its spec (nothing while
    Infeasible)."""
    statuses = container_statuses(status)
    infeasible = resize_infeasible(status)
    fallback = body_fields.quantity_map({"defaults": defaults}, "defaults", "defaults")

    def status_of(container: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
        name = str(container.get("name", ""))
        return f"status.containerStatuses[{name}]", statuses.get(name)

    def allocated(path: str, container: Mapping[str, Any]) -> body_fields.Requests:
        field, found = status_of(container)
        if found is not None and found.get("allocatedResources") is not None:
            own = body_fields.quantity_map(
                found, "allocatedResources", f"{field}.allocatedResources"
            )
            return {**fallback, **own}
        return dict(fallback) if infeasible else specs[path]

    def actuated(path: str, container: Mapping[str, Any]) -> body_fields.Requests:
        field, found = status_of(container)
        if found is not None:
            resources = body_fields.mapping(found, "resources", f"{field}.resources")
            if resources.get("requests") is not None:
                own = body_fields.quantity_map(resources, "requests", f"{field}.resources.requests")
                return {**fallback, **own}
        return allocated(path, container)

    pod_level = _pod_level_status(status) if rules.pod_level_resize else None
    if pod_level is not None and pod_level[1] is not None:
        # KEP-5419: the pod's own allocated and actuated requests stand for the sums
        total, actuated_total = dict(pod_level[1]), pod_level[0]
        _max_into(total, actuated_total)
    else:
        total = _aggregate(containers, allocated)
        _max_into(total, _aggregate(containers, actuated))
    if not infeasible:
        _max_into(total, _aggregate(containers, lambda path, _c: specs[path]))
    return total


def _aggregate(
    containers: Containers,
    requests_of: Callable[[str, Mapping[str, Any]], body_fields.Requests],
) -> body_fields.Requests:
    total: body_fields.Requests = {}
    for path, container in containers.regular:
        _add_into(total, requests_of(path, container))
    sidecars: body_fields.Requests = {}  # sidecars started so far keep running during later inits
    init_peak: body_fields.Requests = {}
    for path, container in containers.init:
        requests = requests_of(path, container)
        if is_sidecar(container, path):
            _add_into(total, requests)
            _add_into(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            during = dict(requests)
            _add_into(during, sidecars)
            _max_into(init_peak, during)
    _max_into(total, init_peak)
    return total


def container_requests(container: Mapping[str, Any], path: str) -> body_fields.Requests:
    resources = body_fields.mapping(container, "resources", f"{path}.resources")
    requests = body_fields.quantity_map(resources, "requests", f"{path}.resources.requests")
    limits = body_fields.quantity_map(resources, "limits", f"{path}.resources.limits")
    # The API server defaults each missing request to its limit; raw bodies may predate that.
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _pod_level_status(
    status: Mapping[str, Any],
) -> tuple[body_fields.Requests, body_fields.Requests | None] | None:
    """The pod's own actuated requests (``status.resources.requests``) and allocated ones
    (``status.allocatedResources``, None when absent) under KEP-5419's pod-level resize;
    None when the status reports no pod-level resources."""
    resources = body_fields.mapping(status, "resources", "status.resources")
    if status.get("resources") is None or resources.get("requests") is None:
        return None
    actuated = body_fields.quantity_map(resources, "requests", "status.resources.requests")
    if status.get("allocatedResources") is None:
        return actuated, None
    return actuated, body_fields.quantity_map(
        status, "allocatedResources", "status.allocatedResources"
    )


def _apply_pod_level(
    total: body_fields.Requests,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    rules: versions.Rules,
    *,
    containers_request: Iterable[body_fields.Requests],
) -> None:
    resources = body_fields.mapping(spec, "resources", "spec.resources")
    requests = body_fields.quantity_map(resources, "requests", "spec.resources.requests")
    limits = body_fields.quantity_map(resources, "limits", "spec.resources.limits")
    requested_by_containers: set[str] = set()
    for container in containers_request:
        requested_by_containers.update(container)
    for name, amount in limits.items():
        # API defaulting: a pod-level limit without a pod-level request becomes the
        # request only when no container asks for that resource itself.
        if name not in requests and name not in requested_by_containers:
            requests[name] = amount
    if requests and rules.pod_level_resize and status.get("resources") is not None:
        # KEP-5419 (v1.36+): pod-level requests resized in place count the largest of
        # spec, actuated and allocated (of the last two while the resize is Infeasible);
        # to v1.36 only for the resources the spec names
        resources_status = body_fields.mapping(status, "resources", "status.resources")
        effective = {} if resize_infeasible(status) else dict(requests)
        _max_into(
            effective, body_fields.quantity_map(resources_status, "requests", "status.resources")
        )
        _max_into(
            effective, body_fields.quantity_map(status, "allocatedResources", "status.allocated")
        )
        if not rules.resize_max_of_sums:
            effective = {name: effective.get(name, 0) for name in requests}
        requests = effective
    for name, amount in requests.items():
        if name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX):
            total[name] = amount


def container_statuses(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for index, item in enumerate(body_fields.list_of(status, key, f"status.{key}")):
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                found[item["name"]] = item
            elif not isinstance(item, Mapping):
                raise body_fields.ParseError(f"status.{key}[{index}]", "must be an object")
    return found


def resize_infeasible(status: Mapping[str, Any]) -> bool:
    # IsPodResizeInfeasible: the first PodResizePending condition decides.
    for index, item in enumerate(body_fields.list_of(status, "conditions", "status.conditions")):
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(f"status.conditions[{index}]", "must be an object")
        if item.get("type") == "PodResizePending":
            return item.get("reason") == "Infeasible"
    return False


def status_requests(
    statuses: Mapping[str, Mapping[str, Any]],
    container: Mapping[str, Any],
    *,
    infeasible: bool,
) -> body_fields.Requests | None:
    """max(actuated, allocated) of a container whose status reports ``resources``, else
    None (the status, if any, says nothing kube-scheduler reads)."""
    status = statuses.get(str(container.get("name", "")))
    if status is None or status.get("resources") is None:
        return None
    field = f"status.containerStatuses[{container.get('name')}]"
    resources = body_fields.mapping(status, "resources", f"{field}.resources")
    found = body_fields.quantity_map(resources, "requests", f"{field}.resources.requests")
    _max_into(
        found, body_fields.quantity_map(status, "allocatedResources", f"{field}.allocatedResources")
    )
    return found


def is_sidecar(container: Mapping[str, Any], path: str) -> bool:
    return body_fields.string(container, "restartPolicy", f"{path}.restartPolicy") == "Always"


def sum_resources(items: Iterable[model.Resources]) -> model.Resources:
    """The component-wise sum of resource amounts (scalar resources merged by name)."""
    milli_cpu = memory = ephemeral = pods = 0
    scalar: dict[str, int] = {}
    for item in items:
        milli_cpu += item.milli_cpu
        memory += item.memory
        ephemeral += item.ephemeral_storage
        pods += item.pods
        for name, amount in item.scalar.items():
            scalar[name] = scalar.get(name, 0) + amount
    return model.Resources(
        milli_cpu=milli_cpu,
        memory=memory,
        ephemeral_storage=ephemeral,
        pods=pods,
        scalar=scalar,
    )


def is_scalar_resource(name: str) -> bool:
    """Whether kube-scheduler tracks ``name`` as a scalar (extended, hugepages, ...)."""
    # schedutil.IsScalarResourceName: extended ("example.com/gpu"), prefixed native
    # ("kubernetes.io/..."), hugepages-* and attachable-volumes-*. Names without a
    # domain other than those (and cpu/memory/ephemeral-storage/pods) are ignored.
    if name.startswith((HUGEPAGES_PREFIX, _ATTACHABLE_PREFIX)):
        return True
    return "/" in name and not name.startswith("requests.")


def resources(amounts: Mapping[str, int], *, pods: int) -> model.Resources:
    scalar = {
        name: quantity.nano_to_int(amount)
        for name, amount in amounts.items()
        if amount and is_scalar_resource(name)
    }
    return model.Resources(
        milli_cpu=quantity.nano_to_milli(amounts.get(CPU, 0)),
        memory=quantity.nano_to_int(amounts.get(MEMORY, 0)),
        ephemeral_storage=quantity.nano_to_int(amounts.get(_EPHEMERAL, 0)),
        pods=pods,
        scalar=scalar,
    )


def _add_into(total: body_fields.Requests, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _max_into(total: body_fields.Requests, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, 0), amount)
