"""Raw Kubernetes bodies (camelCase JSON dicts) to the cycle's typed views.

``pod_from_body`` and ``node_from_body`` are the only places that read raw pod and node
bodies; everything after them works on ``model`` dataclasses. They never raise on user
input except ``ParseError``, whose message names the offending field, so the operator can
turn it into an Event. Missing fields get the defaults the API server would apply.

A pod's effective request follows kube-scheduler (``resource.PodRequests`` in
k8s.io/component-helpers, used by NodeResourcesFit and by the scheduler cache):
regular containers are summed; a sidecar (init container with ``restartPolicy: Always``)
adds to that sum and stays running for later init containers; each regular init container
needs its own request plus the sidecars started before it, and the pod needs the maximum
of all that; pod-level ``spec.resources.requests`` replace the container total for cpu,
memory and hugepages; ``spec.overhead`` is added last. A container whose status reports
resources (in-place resize) counts the largest of its spec, actuated and allocated
requests, resource by resource. Quantities are summed exactly and
rounded up once per pod, as the scheduler does.

Snapshots built from these views (node state from the pods on each node) are
``core.node_state``'s.

Purely computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, ParamSpec, TypeVar

import orjson

from metricsched.core import decision_record, kubelet_rejection, model, quantity, versions

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
VOLUME_TOPOLOGY: Final = "volume topology"
DEFAULT_SCHEDULER: Final = "default-scheduler"

_CPU: Final = "cpu"
_MEMORY: Final = "memory"
_EPHEMERAL: Final = "ephemeral-storage"
_PODS: Final = "pods"
_HUGEPAGES_PREFIX: Final = "hugepages-"
_ATTACHABLE_PREFIX: Final = "attachable-volumes-"
_BIND_ALL: Final = "0.0.0.0"

_Requests = dict[str, int]  # resource name -> exact amount in nano-units


class ParseError(ValueError):
    """A raw body has a field the scheduler cannot read; ``field`` is its JSON path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


_Parsed = TypeVar("_Parsed")
_Args = ParamSpec("_Args")


def _boundary(read: Callable[_Args, _Parsed]) -> Callable[_Args, _Parsed]:
    """The parsing boundary of one kind: a body from the API is untrusted input (any pod
    author writes it), so whatever it holds ends as a ``ParseError`` for that one object,
    never as another exception that would end the watch or informer reading every object
    of its kind (a ``RecursionError`` from deep nesting, a ``TypeError`` from a field of
    an unexpected type that a reader missed)."""

    @functools.wraps(read)
    def bounded(*args: _Args.args, **kwargs: _Args.kwargs) -> _Parsed:
        try:
            return read(*args, **kwargs)
        except ParseError:
            raise
        except (
            RecursionError,
            ArithmeticError,
            AttributeError,
            LookupError,
            TypeError,
            ValueError,
        ) as e:
            kind = read.__name__.removesuffix("_from_body")
            raise ParseError(f"<{kind}>", f"unreadable ({type(e).__name__}: {str(e)[:200]})") from e

    return bounded


# --- the API server -------------------------------------------------------------------


@_boundary
def server_version_from_body(body: Mapping[str, Any]) -> versions.ServerVersion:
    """The API server's ``/version`` answer: ``major`` and ``minor`` are strings and a
    provider's build may add a ``+`` ("36+"); ``gitVersion`` ("v1.36.3-eks-1") is the
    fallback when they are empty."""
    if not isinstance(body, Mapping):
        raise ParseError("<version>", "must be an object")
    git = _string(body, "gitVersion", "gitVersion")
    major = _string(body, "major", "major").rstrip("+")
    minor = _string(body, "minor", "minor").rstrip("+")
    if not (major.isdigit() and minor.isdigit()):
        numbers = git.removeprefix("v").split("-", 1)[0].split(".")
        if len(numbers) < 2 or not (numbers[0].isdigit() and numbers[1].isdigit()):
            raise ParseError("minor", f"no version number in {body!r:.200}")
        major, minor = numbers[0], numbers[1]
    return versions.ServerVersion(major=int(major), minor=int(minor), git_version=git)


# --- pods ------------------------------------------------------------------------------


@_boundary
def pod_from_body(
    body: Mapping[str, Any], *, rules: versions.Rules = versions.DEFAULT
) -> model.PodInfo:
    """The typed view of a raw pod body, its requests as kube-scheduler of ``rules`` counts
    them; raises ``ParseError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise ParseError("<pod>", "must be an object")
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    status = _mapping(body, "status", "status")

    containers = _containers(spec, "containers")
    init_containers = _containers(spec, "initContainers")
    node_name = _shared(_string(spec, "nodeName", "spec.nodeName"))
    phase = _shared(_string(status, "phase", "status.phase") or "Pending")

    affinity = _mapping(spec, "affinity", "spec.affinity")
    node_affinity = _mapping(affinity, "nodeAffinity", "spec.affinity.nodeAffinity")
    required = _mapping(
        node_affinity,
        "requiredDuringSchedulingIgnoredDuringExecution",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )

    return model.PodInfo(
        namespace=_shared(_string(meta, "namespace", "metadata.namespace") or "default"),
        name=_string(meta, "name", "metadata.name"),
        uid=_string(meta, "uid", "metadata.uid"),
        labels=_string_map(meta, "labels", "metadata.labels", shared=True),
        scheduler_name=_shared(
            _string(spec, "schedulerName", "spec.schedulerName") or DEFAULT_SCHEDULER
        ),
        node_name=node_name,
        requests=_pod_requests(
            spec, status, containers=containers, init_containers=init_containers, rules=rules
        ),
        host_ports=_host_ports(containers, init_containers),
        node_selector=_string_map(spec, "nodeSelector", "spec.nodeSelector", shared=True),
        required_node_affinity=_raw_list(
            required,
            "nodeSelectorTerms",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms",
        ),
        tolerations=_tolerations(spec),
        scheduling_gates=_scheduling_gates(spec),
        topology_spread=_raw_list(
            spec, "topologySpreadConstraints", "spec.topologySpreadConstraints"
        ),
        pod_affinity=_pod_affinity_terms(affinity, "podAffinity"),
        pod_anti_affinity=_pod_affinity_terms(affinity, "podAntiAffinity"),
        unsupported=_unsupported(spec),
        creation_timestamp=_timestamp(meta, "creationTimestamp", "metadata.creationTimestamp"),
        deleting=meta.get("deletionTimestamp") is not None,
        phase=phase,
        priority=_priority(spec),
        **_parity_fields(
            spec,
            status,
            rules=rules,
            pod_name=_string(meta, "name", "metadata.name"),
            containers=containers,
            init_containers=init_containers,
        ),
        **_score_fields(meta, affinity, node_affinity),
        limits=_pod_limits(containers, init_containers),
        bound_at=_bound_at(status) if node_name else 0.0,
        placed_by=_placed_by(meta),
        nominated_node=""
        if node_name
        else _shared(_string(status, "nominatedNodeName", "status.nominatedNodeName")),
        required_features=_required_features(spec, containers, init_containers),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PodDigest:
    """What ``pod_from_body`` reads from a pod body, read cheaply, so that an event
    carrying nothing new (a resourceVersion bump, a status-only update) is not parsed
    again: ``rest`` hashes every part the parse reads except the few that change over a
    pod's life (its node, phase, bind time, decision record and nomination), which are
    read here exactly as the parse reads them. Two bodies of one pod with the same
    ``rest`` parse to ``PodInfo``s that differ at most in those fields
    (``restamped``)."""

    rest: int
    node_name: str
    phase: str
    bound_at: float
    placed_by: str
    nominated_node: str


_DIGEST_META: Final = (
    "namespace",
    "name",
    "uid",
    "labels",
    "creationTimestamp",
    "deletionTimestamp",
    "ownerReferences",
)
"""The metadata ``pod_from_body`` reads (annotations: only the decision record, a stamp)."""


def pod_digest(body: Mapping[str, Any]) -> PodDigest | None:
    """The ``PodDigest`` of a pod body; None for anything unusual (a part of an unexpected
    type, a value orjson cannot write), which the full parse then judges and names."""
    meta, spec, status = body.get("metadata"), body.get("spec"), _or(body, "status", {})
    if type(meta) is not dict or type(spec) is not dict or type(status) is not dict:
        return None
    node_name, phase = _or(spec, "nodeName", ""), _or(status, "phase", "")
    nominated = _or(status, "nominatedNodeName", "")
    if type(node_name) is not str or type(phase) is not str or type(nominated) is not str:
        return None
    # Every spec field but the node: a bound pod's spec parses as its pending copy did.
    rest: list[Any] = [{k: v for k, v in spec.items() if k != "nodeName"}]
    rest.extend(meta.get(key) for key in _DIGEST_META)
    conditions = _or(status, "conditions", [])
    if type(conditions) is not list:
        return None
    resize = None  # the first PodResizePending condition's reason (IsPodResizeInfeasible)
    for condition in conditions:
        if type(condition) is not dict:
            return None
        if resize is None and condition.get("type") == "PodResizePending":
            resize = str(condition.get("reason"))
    rest.append(resize)
    # What in-place resize reports, as ``_container_statuses`` keeps it (the last status
    # of each name; one without resources says nothing); the rest is the kubelet's news.
    reported: dict[str, Any] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = _or(status, key, [])
        if type(statuses) is not list:
            return None
        for item in statuses:
            if type(item) is not dict:
                return None
            name = item.get("name")
            if isinstance(name, str):
                reported.pop(name, None)  # the last status of a name is the one read
                # v1.37's rules read allocatedResources without resources too
                if item.get("resources") is not None or item.get("allocatedResources"):
                    reported[name] = (item.get("resources"), item.get("allocatedResources"))
    rest.append(reported)
    # KEP-5419's pod-level resize status (v1.36+ rules)
    rest.append((status.get("resources"), status.get("allocatedResources")))
    try:
        encoded = orjson.dumps(rest)
    except orjson.JSONEncodeError:
        return None
    return PodDigest(
        rest=hash(encoded),
        node_name=node_name,
        phase=phase or "Pending",
        bound_at=_bound_at(status) if node_name else 0.0,
        placed_by=_placed_by(meta),
        nominated_node="" if node_name else nominated,
    )


def _or(parent: Mapping[str, Any], key: str, default: Any) -> Any:
    """``parent[key]``, or ``default`` where it is missing or null (as the parse reads it:
    a value of another type, even a falsy one, is kept for the caller to refuse)."""
    value = parent.get(key)
    return default if value is None else value


def restamped(pod: model.PodInfo, digest: PodDigest) -> model.PodInfo:
    """``pod`` (parsed from a body with ``digest.rest``) as another body with the same
    ``rest`` parses: the same, with that body's node, phase, bind time, decision record
    and nomination."""
    return dataclasses.replace(
        pod,
        node_name=_shared(digest.node_name),
        phase=_shared(digest.phase),
        bound_at=digest.bound_at,
        placed_by=_shared(digest.placed_by),
        nominated_node=_shared(digest.nominated_node),
    )


def stamped_alike(pod: model.PodInfo, digest: PodDigest) -> bool:
    """Whether ``restamped(pod, digest)`` would be ``pod`` itself."""
    return (
        pod.node_name == digest.node_name
        and pod.phase == digest.phase
        and pod.bound_at == digest.bound_at
        and pod.placed_by == digest.placed_by
        and pod.nominated_node == digest.nominated_node
    )


@_boundary
def kubelet_rejection_from_body(
    body: Mapping[str, Any],
) -> kubelet_rejection.KubeletRejection | None:
    """The kubelet's admission rejection a bound pod's status reports (``status.phase:
    Failed`` with an admission ``status.reason``), or None: not bound, not failed, or
    failed for another reason (evicted, deadline exceeded...)."""
    if not isinstance(body, Mapping):
        raise ParseError("<pod>", "must be an object")
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    status = _mapping(body, "status", "status")
    node = _string(spec, "nodeName", "spec.nodeName")
    reason = _string(status, "reason", "status.reason")
    if (
        not node
        or _string(status, "phase", "status.phase") != "Failed"
        or not kubelet_rejection.is_admission_reason(reason)
    ):
        return None
    return kubelet_rejection.KubeletRejection(
        namespace=_string(meta, "namespace", "metadata.namespace") or "default",
        name=_string(meta, "name", "metadata.name"),
        uid=_string(meta, "uid", "metadata.uid"),
        node=node,
        reason=reason,
        message=_string(status, "message", "status.message"),
    )


def placed_by_us(body: Mapping[str, Any]) -> bool:
    """Whether a pod carries this scheduler's decision record: the Binding that placed it
    was ours (kube-apiserver copies a Binding's annotations onto the pod)."""
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(annotations, Mapping) and isinstance(
        annotations.get(decision_record.ANNOTATION), str
    )


def _placed_by(meta: Mapping[str, Any]) -> str:
    """The policy named by the pod's decision record ("" without one, or for the default
    policy); an unreadable record is not ours to judge and reads as none."""
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping):
        return ""
    text = annotations.get(decision_record.ANNOTATION)
    return _shared(decision_record.policy_of(text)) if isinstance(text, str) else ""


def _pod_limits(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> model.Resources:
    """cpu and memory limits summed as requests are (a container without a limit counts
    its request): the most the pod's containers may use, for ``estimate.from: Limits``."""

    def limits_of(path: str, container: Mapping[str, Any]) -> _Requests:
        resources = _mapping(container, "resources", f"{path}.resources")
        found = _quantity_map(resources, "limits", f"{path}.resources.limits")
        for name, amount in _container_requests(container, path).items():
            found.setdefault(name, amount)
        return {name: found[name] for name in (_CPU, _MEMORY) if name in found}

    total = _aggregate(containers, init_containers, limits_of)
    return model.Resources(
        milli_cpu=quantity.nano_to_milli(total.get(_CPU, 0)),
        memory=quantity.nano_to_int(total.get(_MEMORY, 0)),
    )


def _bound_at(status: Mapping[str, Any]) -> float:
    """When a bound pod started to load its node: the later of its PodScheduled
    condition's transition and ``status.startTime`` (0 when neither is readable; these
    times only date the estimates, so a bad one is ignored, never an error)."""
    times = [_lenient_time(status.get("startTime"))]
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        for condition in conditions:
            if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
                times.append(_lenient_time(condition.get("lastTransitionTime")))
    return max(times)


def _lenient_time(raw: object) -> float:
    if not isinstance(raw, str) or not raw:
        return 0.0
    try:
        moment = datetime.datetime.fromisoformat(raw)
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _priority(spec: Mapping[str, Any]) -> int:
    value = spec.get("priority")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError("spec.priority", "must be an integer")
    return value


def _pod_requests(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    *,
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
    rules: versions.Rules = versions.DEFAULT,
    defaults: Mapping[str, Any] | None = None,
) -> model.Resources:
    """``defaults``: the requests a container's status-derived list counts for a missing
    cpu / memory (NonMissingContainerRequests; the spec's are in ``containers`` already)."""
    specs = {path: _container_requests(c, path) for path, c in (*containers, *init_containers)}
    if rules.resize_max_of_sums:
        total = _max_of_sums(
            status,
            containers=containers,
            init_containers=init_containers,
            specs=specs,
            defaults=defaults or {},
            rules=rules,
        )
        _apply_pod_level(total, spec, status, rules, containers_request=specs.values())
        _add_into(total, _quantity_map(spec, "overhead", "spec.overhead"))
        return _resources(total, pods=1)
    # In-place resize (resource.PodRequests with UseStatusResources): a container whose
    # status reports resources counts, per resource, the largest of its spec, actuated and
    # allocated requests, or, while the resize is Infeasible, of actuated and allocated
    # only. Regular init containers have finished and always count their spec.
    statuses = _container_statuses(status)
    infeasible = _resize_infeasible(status)
    effective = dict(specs)
    running = [*containers, *((p, c) for p, c in init_containers if _is_sidecar(c, p))]
    for path, container in running:
        reported = _status_requests(statuses, container, infeasible=infeasible)
        if reported is not None:
            if not infeasible:
                _max_into(reported, specs[path])
            effective[path] = reported
    total = _aggregate(containers, init_containers, lambda path, _c: effective[path])

    _apply_pod_level(total, spec, status, rules, containers_request=specs.values())
    overhead = _quantity_map(spec, "overhead", "spec.overhead")
    _add_into(total, overhead)
    return _resources(total, pods=1)


def _max_of_sums(
    status: Mapping[str, Any],
    *,
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
    specs: Mapping[str, _Requests],
    defaults: Mapping[str, Any],
    rules: versions.Rules,
) -> _Requests:
    """In-place resize from v1.37 (resource.AggregateContainerRequests): the pod's spec,
    actuated and allocated requests are each aggregated over all containers (init ones
    included), and the pod counts the largest of the three sums per resource (of actuated
    and allocated only while the resize is Infeasible). A container's allocated requests
    are its status's ``allocatedResources``, its actuated ones its status's
    ``resources.requests``, else its allocated ones; without them, its spec (nothing while
    Infeasible)."""
    statuses = _container_statuses(status)
    infeasible = _resize_infeasible(status)
    fallback = _quantity_map({"defaults": defaults}, "defaults", "defaults")

    def status_of(container: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
        name = str(container.get("name", ""))
        return f"status.containerStatuses[{name}]", statuses.get(name)

    def allocated(path: str, container: Mapping[str, Any]) -> _Requests:
        field, found = status_of(container)
        if found is not None and found.get("allocatedResources") is not None:
            own = _quantity_map(found, "allocatedResources", f"{field}.allocatedResources")
            return {**fallback, **own}
        return dict(fallback) if infeasible else specs[path]

    def actuated(path: str, container: Mapping[str, Any]) -> _Requests:
        field, found = status_of(container)
        if found is not None:
            resources = _mapping(found, "resources", f"{field}.resources")
            if resources.get("requests") is not None:
                own = _quantity_map(resources, "requests", f"{field}.resources.requests")
                return {**fallback, **own}
        return allocated(path, container)

    pod_level = _pod_level_status(status) if rules.pod_level_resize else None
    if pod_level is not None and pod_level[1] is not None:
        # KEP-5419: the pod's own allocated and actuated requests stand for the sums
        total, actuated_total = dict(pod_level[1]), pod_level[0]
        _max_into(total, actuated_total)
    else:
        total = _aggregate(containers, init_containers, allocated)
        _max_into(total, _aggregate(containers, init_containers, actuated))
    if not infeasible:
        _max_into(total, _aggregate(containers, init_containers, lambda path, _c: specs[path]))
    return total


def _aggregate(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
    requests_of: Callable[[str, Mapping[str, Any]], _Requests],
) -> _Requests:
    total: _Requests = {}
    for path, container in containers:
        _add_into(total, requests_of(path, container))
    sidecars: _Requests = {}  # sidecars started so far keep running during later inits
    init_peak: _Requests = {}
    for path, container in init_containers:
        requests = requests_of(path, container)
        if _is_sidecar(container, path):
            _add_into(total, requests)
            _add_into(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            during = dict(requests)
            _add_into(during, sidecars)
            _max_into(init_peak, during)
    _max_into(total, init_peak)
    return total


def _container_requests(container: Mapping[str, Any], path: str) -> _Requests:
    resources = _mapping(container, "resources", f"{path}.resources")
    requests = _quantity_map(resources, "requests", f"{path}.resources.requests")
    limits = _quantity_map(resources, "limits", f"{path}.resources.limits")
    # The API server defaults each missing request to its limit; raw bodies may predate that.
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    return requests


def _pod_level_status(status: Mapping[str, Any]) -> tuple[_Requests, _Requests | None] | None:
    """The pod's own actuated requests (``status.resources.requests``) and allocated ones
    (``status.allocatedResources``, None when absent) under KEP-5419's pod-level resize;
    None when the status reports no pod-level resources."""
    resources = _mapping(status, "resources", "status.resources")
    if status.get("resources") is None or resources.get("requests") is None:
        return None
    actuated = _quantity_map(resources, "requests", "status.resources.requests")
    if status.get("allocatedResources") is None:
        return actuated, None
    return actuated, _quantity_map(status, "allocatedResources", "status.allocatedResources")


def _apply_pod_level(
    total: _Requests,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    rules: versions.Rules,
    *,
    containers_request: Iterable[_Requests],
) -> None:
    resources = _mapping(spec, "resources", "spec.resources")
    requests = _quantity_map(resources, "requests", "spec.resources.requests")
    limits = _quantity_map(resources, "limits", "spec.resources.limits")
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
        resources_status = _mapping(status, "resources", "status.resources")
        effective = {} if _resize_infeasible(status) else dict(requests)
        _max_into(effective, _quantity_map(resources_status, "requests", "status.resources"))
        _max_into(effective, _quantity_map(status, "allocatedResources", "status.allocated"))
        if not rules.resize_max_of_sums:
            effective = {name: effective.get(name, 0) for name in requests}
        requests = effective
    for name, amount in requests.items():
        if name in (_CPU, _MEMORY) or name.startswith(_HUGEPAGES_PREFIX):
            total[name] = amount


def _container_statuses(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for index, item in enumerate(_list(status, key, f"status.{key}")):
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                found[item["name"]] = item
            elif not isinstance(item, Mapping):
                raise ParseError(f"status.{key}[{index}]", "must be an object")
    return found


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    # IsPodResizeInfeasible: the first PodResizePending condition decides.
    for index, item in enumerate(_list(status, "conditions", "status.conditions")):
        if not isinstance(item, Mapping):
            raise ParseError(f"status.conditions[{index}]", "must be an object")
        if item.get("type") == "PodResizePending":
            return item.get("reason") == "Infeasible"
    return False


def _status_requests(
    statuses: Mapping[str, Mapping[str, Any]],
    container: Mapping[str, Any],
    *,
    infeasible: bool,
) -> _Requests | None:
    """max(actuated, allocated) of a container whose status reports ``resources``, else
    None (the status, if any, says nothing kube-scheduler reads)."""
    status = statuses.get(str(container.get("name", "")))
    if status is None or status.get("resources") is None:
        return None
    field = f"status.containerStatuses[{container.get('name')}]"
    resources = _mapping(status, "resources", f"{field}.resources")
    found = _quantity_map(resources, "requests", f"{field}.resources.requests")
    _max_into(found, _quantity_map(status, "allocatedResources", f"{field}.allocatedResources"))
    return found


def _is_sidecar(container: Mapping[str, Any], path: str) -> bool:
    return _string(container, "restartPolicy", f"{path}.restartPolicy") == "Always"


def _host_ports(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[model.HostPort, ...]:
    # kube-scheduler (util.GetHostPorts) counts sidecars, which run for the pod's whole
    # life, but not regular init containers, which are gone before the app starts.
    running = [(p, c) for p, c in init_containers if _is_sidecar(c, p)] + list(containers)
    ports: list[model.HostPort] = []
    for path, container in running:
        for index, port in enumerate(_list(container, "ports", f"{path}.ports")):
            field = f"{path}.ports[{index}]"
            if not isinstance(port, Mapping):
                raise ParseError(field, "must be an object")
            host_port = _integer(port, "hostPort", f"{field}.hostPort")
            if host_port <= 0:
                continue
            ports.append(
                model.HostPort(
                    protocol=_string(port, "protocol", f"{field}.protocol") or "TCP",
                    host_ip=_string(port, "hostIP", f"{field}.hostIP") or _BIND_ALL,
                    port=host_port,
                )
            )
    return tuple(ports)


def _tolerations(spec: Mapping[str, Any]) -> tuple[model.Toleration, ...]:
    found: list[model.Toleration] = []
    for index, item in enumerate(_list(spec, "tolerations", "spec.tolerations")):
        field = f"spec.tolerations[{index}]"
        if not isinstance(item, Mapping):
            raise ParseError(field, "must be an object")
        operator = _string(item, "operator", f"{field}.operator") or "Equal"
        op: Literal["Equal", "Exists"]
        if operator == "Equal":
            op = "Equal"
        elif operator == "Exists":
            op = "Exists"
        else:
            # Unknown operators (e.g. the alpha Gt/Lt) tolerate nothing, exactly like
            # dropping them: v1.Toleration.ToleratesTaint returns false for them.
            continue
        found.append(
            model.Toleration(
                key=_shared(_string(item, "key", f"{field}.key")),
                operator=op,
                value=_shared(_string(item, "value", f"{field}.value")),
                effect=_shared(_string(item, "effect", f"{field}.effect")),
            )
        )
    return tuple(found)


def _scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    gates: list[str] = []
    for index, item in enumerate(_list(spec, "schedulingGates", "spec.schedulingGates")):
        if not isinstance(item, Mapping):
            raise ParseError(f"spec.schedulingGates[{index}]", "must be an object")
        gates.append(_string(item, "name", f"spec.schedulingGates[{index}].name"))
    return tuple(gates)


def _pod_affinity_terms(affinity: Mapping[str, Any], kind: str) -> tuple[model.RawBody, ...]:
    section = _mapping(affinity, kind, f"spec.affinity.{kind}")
    return _raw_list(
        section,
        "requiredDuringSchedulingIgnoredDuringExecution",
        f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution",
    )


_POD_GROUP_FIELDS: Final = ("workloadRef", "schedulingGroup")
"""A pod of a gang (KEP-4671's Workload API, 1.35's spec.workloadRef; KEP-5832's
spec.schedulingGroup from 1.36): its group must be placed all or nothing, which a
scheduler placing one pod at a time cannot promise."""


def _unsupported(spec: Mapping[str, Any]) -> tuple[str, ...]:
    for index, volume in enumerate(_list(spec, "volumes", "spec.volumes")):
        if not isinstance(volume, Mapping):
            raise ParseError(f"spec.volumes[{index}]", "must be an object")
        # Claim-backed volumes are read into PodInfo.volume_claims and decided by
        # core.plugins.volume_binding.
    return tuple(
        f"pod groups placed all or nothing (spec.{field})"
        for field in _POD_GROUP_FIELDS
        if spec.get(field) is not None
    )


# --- pod fields for the parity plugins (core/plugins) ---------------------------------

# The node features a pod's spec needs (k8s.io/component-helpers nodedeclaredfeatures,
# v0.37: the registered features whose InferForScheduling can say yes); read by
# core.plugins.node_declared_features.
USER_NAMESPACES_HOST_NETWORK: Final = "UserNamespacesHostNetworkSupport"
RESTART_ALL_CONTAINERS: Final = "RestartAllContainersOnContainerExits"
VOLUME_BIND_MOUNT_OPTIONS: Final = "VolumeBindMountOptions"


def _required_features(
    spec: Mapping[str, Any],
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[str, ...]:
    """The features a node must declare for ``spec``: hostNetwork with ``hostUsers:
    false``; a container or init container restart rule with action RestartAllContainers;
    a volume mount with ``bindMountOptions`` (containers, init and ephemeral ones)."""
    needed: list[str] = []
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needed.append(USER_NAMESPACES_HOST_NETWORK)
    for path, container in (*containers, *init_containers):
        rules = _list(container, "restartPolicyRules", f"{path}.restartPolicyRules")
        if any(isinstance(r, Mapping) and r.get("action") == "RestartAllContainers" for r in rules):
            needed.append(RESTART_ALL_CONTAINERS)
            break
    for path, container in (
        *containers,
        *init_containers,
        *_containers(spec, "ephemeralContainers"),
    ):
        mounts = _list(container, "volumeMounts", f"{path}.volumeMounts")
        if any(isinstance(m, Mapping) and m.get("bindMountOptions") for m in mounts):
            needed.append(VOLUME_BIND_MOUNT_OPTIONS)
            break
    return tuple(sorted(needed))


# kube-scheduler's requests for containers that request nothing, in its scores
# (pkg/scheduler/util DefaultMilliCPURequest, DefaultMemoryRequest).
_NON_ZERO_DEFAULTS: Final[Mapping[str, Any]] = {_CPU: "100m", _MEMORY: "200Mi"}


def _parity_fields(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    *,
    rules: versions.Rules,
    pod_name: str,
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> dict[str, Any]:
    """PodInfo fields read for DynamicResources, PostFilter and the allocation scores."""
    claims = []
    for index, item in enumerate(_list(spec, "resourceClaims", "spec.resourceClaims")):
        if not isinstance(item, Mapping):
            raise ParseError(f"spec.resourceClaims[{index}]", "must be an object")
        claims.append(_string(item, "name", f"spec.resourceClaims[{index}].name"))
    policy = _shared(_string(spec, "preemptionPolicy", "spec.preemptionPolicy"))
    volume_claims = []
    ephemeral_claims = []
    for index, volume in enumerate(_list(spec, "volumes", "spec.volumes")):
        if not isinstance(volume, Mapping):
            raise ParseError(f"spec.volumes[{index}]", "must be an object")
        field = f"spec.volumes[{index}]"
        claim = _mapping(volume, "persistentVolumeClaim", f"{field}.persistentVolumeClaim")
        if claim:
            volume_claims.append(
                _string(claim, "claimName", f"{field}.persistentVolumeClaim.claimName")
            )
        elif volume.get("ephemeral") is not None:
            # A generic ephemeral volume's claim is named after the pod and the volume.
            volume_claims.append(f"{pod_name}-{_string(volume, 'name', f'{field}.name')}")
            ephemeral_claims.append(volume_claims[-1])
    # NonMissingContainerRequests (the scheduler's PodInfo.CalculateResource): the same
    # arithmetic as the filter's request, with each container's missing cpu / memory
    # request counted as the default; with pod-level requests, only for a resource absent
    # from the pod's whole request (pod level, containers' spec and resize status,
    # overhead). Worked out only when some container gets a default (None: the same as
    # the filter's request).
    spec = _with_pod_level_requests(spec, [*containers, *init_containers])
    defaults = _NON_ZERO_DEFAULTS
    if pod_level := _pod_level_request_names(spec):
        asked = pod_level.union(*(_container_requests(c, p) for p, c in containers))
        asked = asked.union(*(_container_requests(c, p) for p, c in init_containers))
        asked = asked.union(_resized_request_names(status, containers, init_containers))
        asked = asked.union(_quantity_map(spec, "overhead", "spec.overhead"))  # in the sum too
        defaults = {name: value for name, value in defaults.items() if name not in asked}
    defaulted = [(p, _with_default_requests(c, defaults)) for p, c in containers]
    defaulted_init = [(p, _with_default_requests(c, defaults)) for p, c in init_containers]
    nonzero_requests = None
    # From v1.37 an Infeasible resize drops a container without status to no requests at
    # all, which the defaults then fill.
    if (
        any(new is not old for (_, new), (_, old) in zip(defaulted, containers, strict=True))
        or any(
            new is not old
            for (_, new), (_, old) in zip(defaulted_init, init_containers, strict=True)
        )
        or (rules.resize_max_of_sums and _resize_infeasible(status))
    ):
        nonzero = _pod_requests(
            spec,
            status,
            containers=defaulted,
            init_containers=defaulted_init,
            rules=rules,
            defaults=defaults,
        )
        nonzero_requests = model.Resources(milli_cpu=nonzero.milli_cpu, memory=nonzero.memory)
    # NodeResourcesFit's score of the pod being placed reads it without pod-level
    # resources or resize status (kube-scheduler v1.35 gives the LeastAllocated and
    # MostAllocated scorers neither feature gate): every container's missing request
    # counts the default.
    fit_score_requests = None
    if _mapping(spec, "resources", "spec.resources"):
        without = {key: value for key, value in spec.items() if key != "resources"}
        fit = _pod_requests(
            without,
            {},
            containers=[(p, _with_default_requests(c, _NON_ZERO_DEFAULTS)) for p, c in containers],
            init_containers=[
                (p, _with_default_requests(c, _NON_ZERO_DEFAULTS)) for p, c in init_containers
            ],
        )
        fit_score_requests = model.Resources(milli_cpu=fit.milli_cpu, memory=fit.memory)
    return {
        "resource_claims": tuple(claims),
        "preemption_policy": policy,
        "volume_claims": tuple(volume_claims),
        "ephemeral_claims": tuple(ephemeral_claims),
        "nonzero_requests": nonzero_requests,
        "fit_score_requests": fit_score_requests,
    }


def _with_pod_level_requests(
    spec: Mapping[str, Any], containers: Sequence[tuple[str, Mapping[str, Any]]]
) -> Mapping[str, Any]:
    """``spec`` with the pod-level requests the API server defaults from pod-level limits
    (for a resource no container requests), so that defaulting the containers' missing
    requests afterwards does not hide them."""
    resources = _mapping(spec, "resources", "spec.resources")
    limits = _mapping(resources, "limits", "spec.resources.limits")
    if not limits:
        return spec
    requests = dict(_mapping(resources, "requests", "spec.resources.requests"))
    asked = set().union(*(_container_requests(c, p) for p, c in containers))
    for name, amount in limits.items():
        if name not in requests and name not in asked and _pod_level_resource(name):
            requests[name] = amount
    return {**spec, "resources": {**resources, "requests": requests}}


def _resized_request_names(
    status: Mapping[str, Any],
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> set[str]:
    """Resources the running containers' status reports requests of (in-place resize):
    they are in the pod's requests though the spec does not ask for them."""
    statuses = _container_statuses(status)
    infeasible = _resize_infeasible(status)
    running = [*containers, *((p, c) for p, c in init_containers if _is_sidecar(c, p))]
    names: set[str] = set()
    for _path, container in running:
        names.update(_status_requests(statuses, container, infeasible=infeasible) or ())
    return names


def _pod_level_request_names(spec: Mapping[str, Any]) -> set[str]:
    """The pod-level requests kube-scheduler honours (IsPodLevelRequestsSet's)."""
    resources = _mapping(spec, "resources", "spec.resources")
    requests = _mapping(resources, "requests", "spec.resources.requests")
    return {name for name in requests if _pod_level_resource(name)}


def _pod_level_resource(name: str) -> bool:
    return name in (_CPU, _MEMORY) or name.startswith(_HUGEPAGES_PREFIX)


def _with_default_requests(
    container: Mapping[str, Any], defaults: Mapping[str, Any]
) -> Mapping[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        resources = {}
    requests = resources.get("requests")
    if isinstance(requests, Mapping) and _CPU in requests and _MEMORY in requests:
        return container  # the common case: nothing to default
    limits = resources.get("limits")
    given = set(requests) if isinstance(requests, Mapping) else set()
    given |= set(limits) if isinstance(limits, Mapping) else set()  # a limit defaults the request
    missing = {name: value for name, value in defaults.items() if name not in given}
    if not missing:
        return container
    merged = {**(requests if isinstance(requests, Mapping) else {}), **missing}
    return {**container, "resources": {**resources, "requests": merged}}


# --- pod fields for kube-scheduler's score plugins (core/plugins/kube_scores) ----------

# Controllers whose pods kube-scheduler's default spreading counts together (its
# DefaultSelector reads Services, ReplicationControllers, ReplicaSets and StatefulSets).
_SPREAD_OWNERS: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


def _score_fields(
    meta: Mapping[str, Any], affinity: Mapping[str, Any], node_affinity: Mapping[str, Any]
) -> dict[str, Any]:
    """PodInfo fields read by the score plugins: preferred terms and the controller."""
    fields: dict[str, Any] = {
        "preferred_node_affinity": _raw_list(
            node_affinity, _PREFERRED, f"spec.affinity.nodeAffinity.{_PREFERRED}"
        ),
    }
    for kind, key in (
        ("podAffinity", "preferred_pod_affinity"),
        ("podAntiAffinity", "preferred_pod_anti_affinity"),
    ):
        section = _mapping(affinity, kind, f"spec.affinity.{kind}")
        fields[key] = _raw_list(section, _PREFERRED, f"spec.affinity.{kind}.{_PREFERRED}")
    controller = controlled_by = ""
    for index, owner in enumerate(_list(meta, "ownerReferences", "metadata.ownerReferences")):
        field = f"metadata.ownerReferences[{index}]"
        if not isinstance(owner, Mapping):
            raise ParseError(field, "must be an object")
        kind = _string(owner, "kind", f"{field}.kind")
        if owner.get("controller") is True:
            controlled_by = _shared(f"{kind}/{_string(owner, 'name', f'{field}.name')}")
            if kind in _SPREAD_OWNERS:
                controller = _shared(f"{kind}/{_string(owner, 'uid', f'{field}.uid')}")
    fields["controller"] = controller
    fields["owner"] = controlled_by
    return fields


@_boundary
def claim_from_body(body: Mapping[str, Any]) -> model.ClaimInfo:
    """A PersistentVolumeClaim as VolumeBinding reads it."""
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    annotations = _string_map(meta, "annotations", "metadata.annotations")
    status = _mapping(body, "status", "status")
    return model.ClaimInfo(
        namespace=_string(meta, "namespace", "metadata.namespace"),
        name=_string(meta, "name", "metadata.name"),
        volume_name=_string(spec, "volumeName", "spec.volumeName"),
        deleting=meta.get("deletionTimestamp") is not None,
        storage_class=annotations.get(
            _BETA_CLASS_ANNOTATION, _string(spec, "storageClassName", "spec.storageClassName")
        ),
        bind_completed=_BIND_COMPLETED in annotations,
        lost=_string(status, "phase", "status.phase") == "Lost",
        controller_uid=_controller_uid(meta),
    )


def _controller_uid(meta: Mapping[str, Any]) -> str:
    for index, owner in enumerate(_list(meta, "ownerReferences", "metadata.ownerReferences")):
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return _string(owner, "uid", f"metadata.ownerReferences[{index}].uid")
    return ""


# The PV controller's marks on a claim, read as kube-scheduler reads them.
_BETA_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"
_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"


_ZONE_LABELS: Final = frozenset(
    {
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


@_boundary
def volume_from_body(body: Mapping[str, Any]) -> model.VolumeInfo:
    """A PersistentVolume as VolumeBinding (node affinity) and VolumeZone (labels) read it."""
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    affinity = _mapping(spec, "nodeAffinity", "spec.nodeAffinity")
    required = _mapping(affinity, "required", "spec.nodeAffinity.required")
    labels = _string_map(meta, "labels", "metadata.labels")
    csi = _mapping(spec, "csi", "spec.csi")
    return model.VolumeInfo(
        name=_string(meta, "name", "metadata.name"),
        node_affinity=(
            _raw_list(required, "nodeSelectorTerms", "spec.nodeAffinity.required.nodeSelectorTerms")
            if required
            else None
        ),
        zone_labels={key: value for key, value in labels.items() if key in _ZONE_LABELS},
        csi_driver=_string(csi, "driver", "spec.csi.driver"),
        csi_handle=_string(csi, "volumeHandle", "spec.csi.volumeHandle"),
    )


@_boundary
def storage_class_from_body(body: Mapping[str, Any]) -> model.StorageClassInfo:
    """A StorageClass: its provisioner and binding mode (the API server defaults the mode
    to Immediate)."""
    meta = _mapping(body, "metadata", "metadata")
    return model.StorageClassInfo(
        name=_string(meta, "name", "metadata.name"),
        provisioner=_string(body, "provisioner", "provisioner"),
        wait_for_first_consumer=(
            _string(body, "volumeBindingMode", "volumeBindingMode") == "WaitForFirstConsumer"
        ),
    )


@_boundary
def volume_attachment_from_body(body: Mapping[str, Any]) -> model.VolumeAttachmentInfo:
    """A VolumeAttachment: which driver attaches which PersistentVolume to which node."""
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    source = _mapping(spec, "source", "spec.source")
    return model.VolumeAttachmentInfo(
        name=_string(meta, "name", "metadata.name"),
        attacher=_string(spec, "attacher", "spec.attacher"),
        node_name=_string(spec, "nodeName", "spec.nodeName"),
        volume_name=_string(source, "persistentVolumeName", "spec.source.persistentVolumeName"),
    )


@_boundary
def csi_node_from_body(body: Mapping[str, Any]) -> model.CSINodeInfo:
    """A CSINode: the attach limit (allocatable.count) of each of its drivers that has one."""
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    limits: dict[str, int] = {}
    for index, driver in enumerate(_list(spec, "drivers", "spec.drivers")):
        field = f"spec.drivers[{index}]"
        if not isinstance(driver, Mapping):
            raise ParseError(field, "must be an object")
        allocatable = _mapping(driver, "allocatable", f"{field}.allocatable")
        if allocatable.get("count") is not None:
            name = _string(driver, "name", f"{field}.name")
            limits[name] = _integer(allocatable, "count", f"{field}.allocatable.count")
    return model.CSINodeInfo(name=_string(meta, "name", "metadata.name"), limits=limits)


@_boundary
def device_class_from_body(body: Mapping[str, Any]) -> model.DeviceClassInfo:
    """A DeviceClass: its name and the extended resource it serves, if any."""
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    return model.DeviceClassInfo(
        name=_string(meta, "name", "metadata.name"),
        extended_resource_name=_string(spec, "extendedResourceName", "spec.extendedResourceName"),
    )


def device_class_resources(classes: Iterable[model.DeviceClassInfo]) -> frozenset[str]:
    """The extended resource names the classes map (kube-scheduler's DeviceClassResolver):
    each class's ``extendedResourceName`` and its implicit
    ``deviceclass.resource.kubernetes.io/<name>``."""
    names: set[str] = set()
    for device_class in classes:
        names.add(model.DEVICE_CLASS_RESOURCE_PREFIX + device_class.name)
        if device_class.extended_resource_name:
            names.add(device_class.extended_resource_name)
    return frozenset(names)


# --- nodes -----------------------------------------------------------------------------


@_boundary
def node_from_body(body: Mapping[str, Any]) -> model.NodeInfo:
    """The typed view of a raw node body; raises ``ParseError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise ParseError("<node>", "must be an object")
    meta = _mapping(body, "metadata", "metadata")
    spec = _mapping(body, "spec", "spec")
    status = _mapping(body, "status", "status")

    annotations = _string_map(meta, "annotations", "metadata.annotations")
    if LAST_APPLIED in annotations:
        # It can be as big as the node itself and nothing in the cycle reads it.
        annotations = {k: v for k, v in annotations.items() if k != LAST_APPLIED}

    taints: list[model.Taint] = []
    for index, item in enumerate(_list(spec, "taints", "spec.taints")):
        field = f"spec.taints[{index}]"
        if not isinstance(item, Mapping):
            raise ParseError(field, "must be an object")
        taints.append(
            model.Taint(
                key=_shared(_string(item, "key", f"{field}.key")),
                value=_shared(_string(item, "value", f"{field}.value")),
                effect=_shared(_string(item, "effect", f"{field}.effect")),
            )
        )

    addresses: list[str] = []
    for index, item in enumerate(_list(status, "addresses", "status.addresses")):
        if not isinstance(item, Mapping):
            raise ParseError(f"status.addresses[{index}]", "must be an object")
        address = _string(item, "address", f"status.addresses[{index}].address")
        if address:
            addresses.append(address)

    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise ParseError("spec.unschedulable", "must be a boolean")

    allocatable = _quantity_map(status, "allocatable", "status.allocatable")
    return model.NodeInfo(
        name=model.NodeName(_shared(_string(meta, "name", "metadata.name"))),
        labels=_string_map(meta, "labels", "metadata.labels", shared=True),
        annotations=annotations,
        taints=tuple(taints),
        unschedulable=unschedulable,
        # A node without allocatable pods admits none, as in kube-scheduler.
        allocatable=_resources(allocatable, pods=quantity.nano_to_int(allocatable.get(_PODS, 0))),
        addresses=tuple(addresses),
        declared_features=frozenset(
            _string_list(status, "declaredFeatures", "status.declaredFeatures")
        ),
    )


# --- resource arithmetic ---------------------------------------------------------------


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
    if name.startswith((_HUGEPAGES_PREFIX, _ATTACHABLE_PREFIX)):
        return True
    return "/" in name and not name.startswith("requests.")


# --- small readers that turn type mismatches into ParseError ---------------------------


def _resources(amounts: Mapping[str, int], *, pods: int) -> model.Resources:
    scalar = {
        name: quantity.nano_to_int(amount)
        for name, amount in amounts.items()
        if amount and is_scalar_resource(name)
    }
    return model.Resources(
        milli_cpu=quantity.nano_to_milli(amounts.get(_CPU, 0)),
        memory=quantity.nano_to_int(amounts.get(_MEMORY, 0)),
        ephemeral_storage=quantity.nano_to_int(amounts.get(_EPHEMERAL, 0)),
        pods=pods,
        scalar=scalar,
    )


def _add_into(total: _Requests, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _max_into(total: _Requests, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, 0), amount)


def _quantity_map(parent: Mapping[str, Any], key: str, field: str) -> _Requests:
    raw = _mapping(parent, key, field)
    found: _Requests = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise ParseError(field, "resource names must be strings")
        try:
            nanos = quantity.parse_nano(value)
        except quantity.QuantityError as error:
            raise ParseError(f"{field}.{name}", str(error)) from None
        if nanos < 0:
            raise ParseError(f"{field}.{name}", f"{value!r} must not be negative")
        found[name] = nanos
    return found


def _containers(spec: Mapping[str, Any], key: str) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for index, item in enumerate(_list(spec, key, f"spec.{key}")):
        path = f"spec.{key}[{index}]"
        if not isinstance(item, Mapping):
            raise ParseError(path, "must be an object")
        found.append((path, item))
    return found


def _mapping(parent: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(field, "must be an object")
    return value


def _list(parent: Mapping[str, Any], key: str, field: str) -> Sequence[Any]:
    value = parent.get(key)
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ParseError(field, "must be a list")
    return value


def _string(parent: Mapping[str, Any], key: str, field: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ParseError(field, "must be a string")
    return value


def _string_list(parent: Mapping[str, Any], key: str, field: str) -> tuple[str, ...]:
    items = _list(parent, key, field)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise ParseError(f"{field}[{index}]", "must be a string")
    return tuple(_shared(item) for item in items)


def _integer(parent: Mapping[str, Any], key: str, field: str) -> int:
    value = parent.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(field, "must be an integer")
    return value


def _string_map(
    parent: Mapping[str, Any], key: str, field: str, *, shared: bool = False
) -> dict[str, str]:
    """``shared``: keys and values as ``_shared`` strings (labels and selectors, which
    repeat across the pods of a template and the nodes of a pool)."""
    raw = _mapping(parent, key, field)
    found: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ParseError(field, "must map strings to strings")
        if shared:
            found[_shared(name)] = _shared(value)
        else:
            found[name] = value
    return found


def _shared(text: str) -> str:
    """``text`` as the one string object of its value (``sys.intern``), for strings kept
    in parsed objects that many objects have equal (namespaces, scheduler and node names,
    labels, tolerations): one copy instead of one per pod, and the body it was read from
    is not pinned in memory by it. Interned strings go when nothing refers to them."""
    return sys.intern(text) if type(text) is str else text


def _raw_list(parent: Mapping[str, Any], key: str, field: str) -> tuple[model.RawBody, ...]:
    items: list[model.RawBody] = []
    for index, item in enumerate(_list(parent, key, field)):
        if not isinstance(item, Mapping):
            raise ParseError(f"{field}[{index}]", "must be an object")
        # A plain deep copy: kopf hands out live views of its bodies.
        items.append(_plain(item))
    return tuple(items)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _timestamp(parent: Mapping[str, Any], key: str, field: str) -> float:
    text = _string(parent, key, field)
    if not text:
        return 0.0
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ParseError(field, f"{text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        # metav1.Time is always UTC on the wire; a zone-less value is read as UTC too.
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()
