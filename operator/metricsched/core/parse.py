"""Raw Kubernetes bodies (camelCase JSON dicts) to the cycle's typed views.

``pod_from_body`` and ``node_from_body`` are the only places that read raw pod and node
bodies; everything after them works on ``model`` dataclasses. They never raise on user
input except ``ParseError``, whose message names the offending field, so the operator
can turn it into an Event. Missing fields get the defaults the API server would apply.

A pod's effective request (kube-scheduler's ``resource.PodRequests``) is
``core.pod_resources``'s arithmetic; the readers that turn a field of the wrong type into
a ``ParseError`` naming it are ``core.body_fields``'.

Snapshots built from these views (node state from the pods on each node) are
``core.node_state``'s.

Purely computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import orjson

from metricsched.core import (
    body_fields,
    decision_record,
    kubelet_rejection,
    model,
    pod_resources,
    quantity,
    versions,
)

ParseError = body_fields.ParseError  # what every reader of a raw body raises

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
VOLUME_TOPOLOGY: Final = "volume topology"
DEFAULT_SCHEDULER: Final = "default-scheduler"

_BIND_ALL: Final = "0.0.0.0"


# --- the API server -------------------------------------------------------------------


@body_fields.boundary
def server_version_from_body(body: Mapping[str, Any]) -> versions.ServerVersion:
    """The API server's ``/version`` answer: ``major`` and ``minor`` are strings and a
    provider's build may add a ``+`` ("36+"); ``gitVersion`` ("v1.36.3-eks-1") is the
    fallback when they are empty."""
    if not isinstance(body, Mapping):
        raise body_fields.ParseError("<version>", "must be an object")
    git = body_fields.string(body, "gitVersion", "gitVersion")
    major = body_fields.string(body, "major", "major").rstrip("+")
    minor = body_fields.string(body, "minor", "minor").rstrip("+")
    if not (major.isdigit() and minor.isdigit()):
        numbers = git.removeprefix("v").split("-", 1)[0].split(".")
        if len(numbers) < 2 or not (numbers[0].isdigit() and numbers[1].isdigit()):
            raise body_fields.ParseError("minor", f"no version number in {body!r:.200}")
        major, minor = numbers[0], numbers[1]
    return versions.ServerVersion(major=int(major), minor=int(minor), git_version=git)


# --- pods ------------------------------------------------------------------------------


@body_fields.boundary
def pod_from_body(
    body: Mapping[str, Any], *, rules: versions.Rules = versions.DEFAULT
) -> model.PodInfo:
    """The typed view of a raw pod body, its requests as kube-scheduler of ``rules`` counts
    them; raises ``body_fields.ParseError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise body_fields.ParseError("<pod>", "must be an object")
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    status = body_fields.mapping(body, "status", "status")

    containers = body_fields.containers(spec, "containers")
    init_containers = body_fields.containers(spec, "initContainers")
    node_name = body_fields.interned(body_fields.string(spec, "nodeName", "spec.nodeName"))
    phase = body_fields.interned(body_fields.string(status, "phase", "status.phase") or "Pending")

    affinity = body_fields.mapping(spec, "affinity", "spec.affinity")
    node_affinity = body_fields.mapping(affinity, "nodeAffinity", "spec.affinity.nodeAffinity")
    required = body_fields.mapping(
        node_affinity,
        "requiredDuringSchedulingIgnoredDuringExecution",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )

    return model.PodInfo(
        namespace=body_fields.interned(
            body_fields.string(meta, "namespace", "metadata.namespace") or "default"
        ),
        name=body_fields.string(meta, "name", "metadata.name"),
        uid=body_fields.string(meta, "uid", "metadata.uid"),
        labels=body_fields.string_map(meta, "labels", "metadata.labels", shared=True),
        scheduler_name=body_fields.interned(
            body_fields.string(spec, "schedulerName", "spec.schedulerName") or DEFAULT_SCHEDULER
        ),
        node_name=node_name,
        requests=pod_resources.pod_requests(
            spec,
            status,
            containers=pod_resources.Containers(containers, init_containers),
            rules=rules,
        ),
        host_ports=_host_ports(containers, init_containers),
        node_selector=body_fields.string_map(
            spec, "nodeSelector", "spec.nodeSelector", shared=True
        ),
        required_node_affinity=body_fields.raw_list(
            required,
            "nodeSelectorTerms",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms",
        ),
        tolerations=_tolerations(spec),
        scheduling_gates=_scheduling_gates(spec),
        topology_spread=body_fields.raw_list(
            spec, "topologySpreadConstraints", "spec.topologySpreadConstraints"
        ),
        pod_affinity=_pod_affinity_terms(affinity, "podAffinity"),
        pod_anti_affinity=_pod_affinity_terms(affinity, "podAntiAffinity"),
        unsupported=_unsupported(spec),
        creation_timestamp=body_fields.timestamp(
            meta, "creationTimestamp", "metadata.creationTimestamp"
        ),
        deleting=meta.get("deletionTimestamp") is not None,
        phase=phase,
        priority=_priority(spec),
        **_parity_fields(
            spec,
            status,
            rules=rules,
            pod_name=body_fields.string(meta, "name", "metadata.name"),
            containers=containers,
            init_containers=init_containers,
        ),
        **_score_fields(meta, affinity, node_affinity),
        limits=pod_resources.pod_limits(pod_resources.Containers(containers, init_containers)),
        bound_at=_bound_at(status) if node_name else 0.0,
        placed_by=_placed_by(meta),
        nominated_node=""
        if node_name
        else body_fields.interned(
            body_fields.string(status, "nominatedNodeName", "status.nominatedNodeName")
        ),
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
    # What in-place resize reports, as ``pod_resources.container_statuses`` keeps it (the
    # last status of each name; one without resources says nothing); the rest is the
    # kubelet's news.
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
        node_name=body_fields.interned(digest.node_name),
        phase=body_fields.interned(digest.phase),
        bound_at=digest.bound_at,
        placed_by=body_fields.interned(digest.placed_by),
        nominated_node=body_fields.interned(digest.nominated_node),
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


@body_fields.boundary
def kubelet_rejection_from_body(
    body: Mapping[str, Any],
) -> kubelet_rejection.KubeletRejection | None:
    """The kubelet's admission rejection a bound pod's status reports (``status.phase:
    Failed`` with an admission ``status.reason``), or None: not bound, not failed, or
    failed for another reason (evicted, deadline exceeded...)."""
    if not isinstance(body, Mapping):
        raise body_fields.ParseError("<pod>", "must be an object")
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    status = body_fields.mapping(body, "status", "status")
    node = body_fields.string(spec, "nodeName", "spec.nodeName")
    reason = body_fields.string(status, "reason", "status.reason")
    if (
        not node
        or body_fields.string(status, "phase", "status.phase") != "Failed"
        or not kubelet_rejection.is_admission_reason(reason)
    ):
        return None
    return kubelet_rejection.KubeletRejection(
        namespace=body_fields.string(meta, "namespace", "metadata.namespace") or "default",
        name=body_fields.string(meta, "name", "metadata.name"),
        uid=body_fields.string(meta, "uid", "metadata.uid"),
        node=node,
        reason=reason,
        message=body_fields.string(status, "message", "status.message"),
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
    return body_fields.interned(decision_record.policy_of(text)) if isinstance(text, str) else ""


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
        raise body_fields.ParseError("spec.priority", "must be an integer")
    return value


def _host_ports(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    init_containers: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[model.HostPort, ...]:
    # kube-scheduler (util.GetHostPorts) counts sidecars, which run for the pod's whole
    # life, but not regular init containers, which are gone before the app starts.
    running = [(p, c) for p, c in init_containers if pod_resources.is_sidecar(c, p)] + list(
        containers
    )
    ports: list[model.HostPort] = []
    for path, container in running:
        for index, port in enumerate(body_fields.list_of(container, "ports", f"{path}.ports")):
            field = f"{path}.ports[{index}]"
            if not isinstance(port, Mapping):
                raise body_fields.ParseError(field, "must be an object")
            host_port = body_fields.integer(port, "hostPort", f"{field}.hostPort")
            if host_port <= 0:
                continue
            ports.append(
                model.HostPort(
                    protocol=body_fields.string(port, "protocol", f"{field}.protocol") or "TCP",
                    host_ip=body_fields.string(port, "hostIP", f"{field}.hostIP") or _BIND_ALL,
                    port=host_port,
                )
            )
    return tuple(ports)


def _tolerations(spec: Mapping[str, Any]) -> tuple[model.Toleration, ...]:
    found: list[model.Toleration] = []
    for index, item in enumerate(body_fields.list_of(spec, "tolerations", "spec.tolerations")):
        field = f"spec.tolerations[{index}]"
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(field, "must be an object")
        operator = body_fields.string(item, "operator", f"{field}.operator") or "Equal"
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
                key=body_fields.interned(body_fields.string(item, "key", f"{field}.key")),
                operator=op,
                value=body_fields.interned(body_fields.string(item, "value", f"{field}.value")),
                effect=body_fields.interned(body_fields.string(item, "effect", f"{field}.effect")),
            )
        )
    return tuple(found)


def _scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    gates: list[str] = []
    for index, item in enumerate(
        body_fields.list_of(spec, "schedulingGates", "spec.schedulingGates")
    ):
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(f"spec.schedulingGates[{index}]", "must be an object")
        gates.append(body_fields.string(item, "name", f"spec.schedulingGates[{index}].name"))
    return tuple(gates)


def _pod_affinity_terms(affinity: Mapping[str, Any], kind: str) -> tuple[model.RawBody, ...]:
    section = body_fields.mapping(affinity, kind, f"spec.affinity.{kind}")
    return body_fields.raw_list(
        section,
        "requiredDuringSchedulingIgnoredDuringExecution",
        f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution",
    )


_POD_GROUP_FIELDS: Final = ("workloadRef", "schedulingGroup")
"""A pod of a gang (KEP-4671's Workload API, 1.35's spec.workloadRef; KEP-5832's
spec.schedulingGroup from 1.36): its group must be placed all or nothing, which a
scheduler placing one pod at a time cannot promise."""


def _unsupported(spec: Mapping[str, Any]) -> tuple[str, ...]:
    for index, volume in enumerate(body_fields.list_of(spec, "volumes", "spec.volumes")):
        if not isinstance(volume, Mapping):
            raise body_fields.ParseError(f"spec.volumes[{index}]", "must be an object")
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
        rules = body_fields.list_of(container, "restartPolicyRules", f"{path}.restartPolicyRules")
        if any(isinstance(r, Mapping) and r.get("action") == "RestartAllContainers" for r in rules):
            needed.append(RESTART_ALL_CONTAINERS)
            break
    for path, container in (
        *containers,
        *init_containers,
        *body_fields.containers(spec, "ephemeralContainers"),
    ):
        mounts = body_fields.list_of(container, "volumeMounts", f"{path}.volumeMounts")
        if any(isinstance(m, Mapping) and m.get("bindMountOptions") for m in mounts):
            needed.append(VOLUME_BIND_MOUNT_OPTIONS)
            break
    return tuple(sorted(needed))


# kube-scheduler's requests for containers that request nothing, in its scores
# (pkg/scheduler/util DefaultMilliCPURequest, DefaultMemoryRequest).
_NON_ZERO_DEFAULTS: Final[Mapping[str, Any]] = {
    pod_resources.CPU: "100m",
    pod_resources.MEMORY: "200Mi",
}


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
    for index, item in enumerate(
        body_fields.list_of(spec, "resourceClaims", "spec.resourceClaims")
    ):
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(f"spec.resourceClaims[{index}]", "must be an object")
        claims.append(body_fields.string(item, "name", f"spec.resourceClaims[{index}].name"))
    policy = body_fields.interned(
        body_fields.string(spec, "preemptionPolicy", "spec.preemptionPolicy")
    )
    volume_claims = []
    ephemeral_claims = []
    for index, volume in enumerate(body_fields.list_of(spec, "volumes", "spec.volumes")):
        if not isinstance(volume, Mapping):
            raise body_fields.ParseError(f"spec.volumes[{index}]", "must be an object")
        field = f"spec.volumes[{index}]"
        claim = body_fields.mapping(
            volume, "persistentVolumeClaim", f"{field}.persistentVolumeClaim"
        )
        if claim:
            volume_claims.append(
                body_fields.string(claim, "claimName", f"{field}.persistentVolumeClaim.claimName")
            )
        elif volume.get("ephemeral") is not None:
            # A generic ephemeral volume's claim is named after the pod and the volume.
            volume_claims.append(
                f"{pod_name}-{body_fields.string(volume, 'name', f'{field}.name')}"
            )
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
        asked = pod_level.union(*(pod_resources.container_requests(c, p) for p, c in containers))
        asked = asked.union(*(pod_resources.container_requests(c, p) for p, c in init_containers))
        asked = asked.union(_resized_request_names(status, containers, init_containers))
        asked = asked.union(
            body_fields.quantity_map(spec, "overhead", "spec.overhead")
        )  # in the sum too
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
        or (rules.resize_max_of_sums and pod_resources.resize_infeasible(status))
    ):
        nonzero = pod_resources.pod_requests(
            spec,
            status,
            containers=pod_resources.Containers(defaulted, defaulted_init),
            rules=rules,
            defaults=defaults,
        )
        nonzero_requests = model.Resources(milli_cpu=nonzero.milli_cpu, memory=nonzero.memory)
    # NodeResourcesFit's score of the pod being placed reads it without pod-level
    # resources or resize status (kube-scheduler v1.35 gives the LeastAllocated and
    # MostAllocated scorers neither feature gate): every container's missing request
    # counts the default.
    fit_score_requests = None
    if body_fields.mapping(spec, "resources", "spec.resources"):
        without = {key: value for key, value in spec.items() if key != "resources"}
        fit = pod_resources.pod_requests(
            without,
            {},
            containers=pod_resources.Containers(
                [(p, _with_default_requests(c, _NON_ZERO_DEFAULTS)) for p, c in containers],
                [(p, _with_default_requests(c, _NON_ZERO_DEFAULTS)) for p, c in init_containers],
            ),
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
    resources = body_fields.mapping(spec, "resources", "spec.resources")
    limits = body_fields.mapping(resources, "limits", "spec.resources.limits")
    if not limits:
        return spec
    requests = dict(body_fields.mapping(resources, "requests", "spec.resources.requests"))
    asked = set().union(*(pod_resources.container_requests(c, p) for p, c in containers))
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
    statuses = pod_resources.container_statuses(status)
    infeasible = pod_resources.resize_infeasible(status)
    running = [*containers, *((p, c) for p, c in init_containers if pod_resources.is_sidecar(c, p))]
    names: set[str] = set()
    for _path, container in running:
        names.update(
            pod_resources.status_requests(statuses, container, infeasible=infeasible) or ()
        )
    return names


def _pod_level_request_names(spec: Mapping[str, Any]) -> set[str]:
    """The pod-level requests kube-scheduler honours (IsPodLevelRequestsSet's)."""
    resources = body_fields.mapping(spec, "resources", "spec.resources")
    requests = body_fields.mapping(resources, "requests", "spec.resources.requests")
    return {name for name in requests if _pod_level_resource(name)}


def _pod_level_resource(name: str) -> bool:
    return name in (pod_resources.CPU, pod_resources.MEMORY) or name.startswith(
        pod_resources.HUGEPAGES_PREFIX
    )


def _with_default_requests(
    container: Mapping[str, Any], defaults: Mapping[str, Any]
) -> Mapping[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        resources = {}
    requests = resources.get("requests")
    if (
        isinstance(requests, Mapping)
        and pod_resources.CPU in requests
        and pod_resources.MEMORY in requests
    ):
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
        "preferred_node_affinity": body_fields.raw_list(
            node_affinity, _PREFERRED, f"spec.affinity.nodeAffinity.{_PREFERRED}"
        ),
    }
    for kind, key in (
        ("podAffinity", "preferred_pod_affinity"),
        ("podAntiAffinity", "preferred_pod_anti_affinity"),
    ):
        section = body_fields.mapping(affinity, kind, f"spec.affinity.{kind}")
        fields[key] = body_fields.raw_list(
            section, _PREFERRED, f"spec.affinity.{kind}.{_PREFERRED}"
        )
    controller = controlled_by = ""
    for index, owner in enumerate(
        body_fields.list_of(meta, "ownerReferences", "metadata.ownerReferences")
    ):
        field = f"metadata.ownerReferences[{index}]"
        if not isinstance(owner, Mapping):
            raise body_fields.ParseError(field, "must be an object")
        kind = body_fields.string(owner, "kind", f"{field}.kind")
        if owner.get("controller") is True:
            controlled_by = body_fields.interned(
                f"{kind}/{body_fields.string(owner, 'name', f'{field}.name')}"
            )
            if kind in _SPREAD_OWNERS:
                controller = body_fields.interned(
                    f"{kind}/{body_fields.string(owner, 'uid', f'{field}.uid')}"
                )
    fields["controller"] = controller
    fields["owner"] = controlled_by
    return fields


@body_fields.boundary
def claim_from_body(body: Mapping[str, Any]) -> model.ClaimInfo:
    """A PersistentVolumeClaim as VolumeBinding reads it."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    annotations = body_fields.string_map(meta, "annotations", "metadata.annotations")
    status = body_fields.mapping(body, "status", "status")
    return model.ClaimInfo(
        namespace=body_fields.string(meta, "namespace", "metadata.namespace"),
        name=body_fields.string(meta, "name", "metadata.name"),
        volume_name=body_fields.string(spec, "volumeName", "spec.volumeName"),
        deleting=meta.get("deletionTimestamp") is not None,
        storage_class=annotations.get(
            _BETA_CLASS_ANNOTATION,
            body_fields.string(spec, "storageClassName", "spec.storageClassName"),
        ),
        bind_completed=_BIND_COMPLETED in annotations,
        lost=body_fields.string(status, "phase", "status.phase") == "Lost",
        controller_uid=_controller_uid(meta),
    )


def _controller_uid(meta: Mapping[str, Any]) -> str:
    for index, owner in enumerate(
        body_fields.list_of(meta, "ownerReferences", "metadata.ownerReferences")
    ):
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return body_fields.string(owner, "uid", f"metadata.ownerReferences[{index}].uid")
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


@body_fields.boundary
def volume_from_body(body: Mapping[str, Any]) -> model.VolumeInfo:
    """A PersistentVolume as VolumeBinding (node affinity) and VolumeZone (labels) read it."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    affinity = body_fields.mapping(spec, "nodeAffinity", "spec.nodeAffinity")
    required = body_fields.mapping(affinity, "required", "spec.nodeAffinity.required")
    labels = body_fields.string_map(meta, "labels", "metadata.labels")
    csi = body_fields.mapping(spec, "csi", "spec.csi")
    return model.VolumeInfo(
        name=body_fields.string(meta, "name", "metadata.name"),
        node_affinity=(
            body_fields.raw_list(
                required, "nodeSelectorTerms", "spec.nodeAffinity.required.nodeSelectorTerms"
            )
            if required
            else None
        ),
        zone_labels={key: value for key, value in labels.items() if key in _ZONE_LABELS},
        csi_driver=body_fields.string(csi, "driver", "spec.csi.driver"),
        csi_handle=body_fields.string(csi, "volumeHandle", "spec.csi.volumeHandle"),
    )


@body_fields.boundary
def storage_class_from_body(body: Mapping[str, Any]) -> model.StorageClassInfo:
    """A StorageClass: its provisioner and binding mode (the API server defaults the mode
    to Immediate)."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    return model.StorageClassInfo(
        name=body_fields.string(meta, "name", "metadata.name"),
        provisioner=body_fields.string(body, "provisioner", "provisioner"),
        wait_for_first_consumer=(
            body_fields.string(body, "volumeBindingMode", "volumeBindingMode")
            == "WaitForFirstConsumer"
        ),
    )


@body_fields.boundary
def volume_attachment_from_body(body: Mapping[str, Any]) -> model.VolumeAttachmentInfo:
    """A VolumeAttachment: which driver attaches which PersistentVolume to which node."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    source = body_fields.mapping(spec, "source", "spec.source")
    return model.VolumeAttachmentInfo(
        name=body_fields.string(meta, "name", "metadata.name"),
        attacher=body_fields.string(spec, "attacher", "spec.attacher"),
        node_name=body_fields.string(spec, "nodeName", "spec.nodeName"),
        volume_name=body_fields.string(
            source, "persistentVolumeName", "spec.source.persistentVolumeName"
        ),
    )


@body_fields.boundary
def csi_node_from_body(body: Mapping[str, Any]) -> model.CSINodeInfo:
    """A CSINode: the attach limit (allocatable.count) of each of its drivers that has one."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    limits: dict[str, int] = {}
    for index, driver in enumerate(body_fields.list_of(spec, "drivers", "spec.drivers")):
        field = f"spec.drivers[{index}]"
        if not isinstance(driver, Mapping):
            raise body_fields.ParseError(field, "must be an object")
        allocatable = body_fields.mapping(driver, "allocatable", f"{field}.allocatable")
        if allocatable.get("count") is not None:
            name = body_fields.string(driver, "name", f"{field}.name")
            limits[name] = body_fields.integer(allocatable, "count", f"{field}.allocatable.count")
    return model.CSINodeInfo(name=body_fields.string(meta, "name", "metadata.name"), limits=limits)


@body_fields.boundary
def device_class_from_body(body: Mapping[str, Any]) -> model.DeviceClassInfo:
    """A DeviceClass: its name and the extended resource it serves, if any."""
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    return model.DeviceClassInfo(
        name=body_fields.string(meta, "name", "metadata.name"),
        extended_resource_name=body_fields.string(
            spec, "extendedResourceName", "spec.extendedResourceName"
        ),
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


@body_fields.boundary
def node_from_body(body: Mapping[str, Any]) -> model.NodeInfo:
    """The typed view of a raw node body; raises ``body_fields.ParseError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise body_fields.ParseError("<node>", "must be an object")
    meta = body_fields.mapping(body, "metadata", "metadata")
    spec = body_fields.mapping(body, "spec", "spec")
    status = body_fields.mapping(body, "status", "status")

    annotations = body_fields.string_map(meta, "annotations", "metadata.annotations")
    if LAST_APPLIED in annotations:
        # It can be as big as the node itself and nothing in the cycle reads it.
        annotations = {k: v for k, v in annotations.items() if k != LAST_APPLIED}

    taints: list[model.Taint] = []
    for index, item in enumerate(body_fields.list_of(spec, "taints", "spec.taints")):
        field = f"spec.taints[{index}]"
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(field, "must be an object")
        taints.append(
            model.Taint(
                key=body_fields.interned(body_fields.string(item, "key", f"{field}.key")),
                value=body_fields.interned(body_fields.string(item, "value", f"{field}.value")),
                effect=body_fields.interned(body_fields.string(item, "effect", f"{field}.effect")),
            )
        )

    addresses: list[str] = []
    for index, item in enumerate(body_fields.list_of(status, "addresses", "status.addresses")):
        if not isinstance(item, Mapping):
            raise body_fields.ParseError(f"status.addresses[{index}]", "must be an object")
        address = body_fields.string(item, "address", f"status.addresses[{index}].address")
        if address:
            addresses.append(address)

    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise body_fields.ParseError("spec.unschedulable", "must be a boolean")

    allocatable = body_fields.quantity_map(status, "allocatable", "status.allocatable")
    return model.NodeInfo(
        name=model.NodeName(
            body_fields.interned(body_fields.string(meta, "name", "metadata.name"))
        ),
        labels=body_fields.string_map(meta, "labels", "metadata.labels", shared=True),
        annotations=annotations,
        taints=tuple(taints),
        unschedulable=unschedulable,
        # A node without allocatable pods admits none, as in kube-scheduler.
        allocatable=pod_resources.resources(
            allocatable, pods=quantity.nano_to_int(allocatable.get(pod_resources.PODS, 0))
        ),
        addresses=tuple(addresses),
        declared_features=frozenset(
            body_fields.string_list(status, "declaredFeatures", "status.declaredFeatures")
        ),
    )
