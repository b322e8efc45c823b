"""Builders shared by the unit tests: raw pod and node bodies as the API server sends
them (camelCase JSON), their typed views, and cluster snapshots.

Each fixture returns a small builder function, so a test reads as a scene:
``cluster(nodes=[node("n1", cpu="2")], pods=[pod("old", node_name="n1", cpu="1")])``.
The fixtures are session-scoped (they are stateless) so hypothesis tests can use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from metricsched.core import model, node_state, parse, scoring

Body = dict[str, Any]


def build_container(
    name: str = "app",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    ephemeral: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
) -> Body:
    wanted: dict[str, Any] = dict(requests or {})
    for key, value in (("cpu", cpu), ("memory", memory), ("ephemeral-storage", ephemeral)):
        if value is not None:
            wanted[key] = value
    resources: dict[str, Any] = {}
    if wanted:
        resources["requests"] = wanted
    if limits:
        resources["limits"] = dict(limits)
    container: Body = {"name": name, "image": "registry.example/app:1"}
    if resources:
        container["resources"] = resources
    if ports:
        container["ports"] = [dict(p) for p in ports]
    if restart_policy is not None:
        container["restartPolicy"] = restart_policy
    return container


def build_pod_body(
    name: str = "web-1",
    *,
    namespace: str = "shop",
    labels: Mapping[str, str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    ephemeral: str | None = None,
    requests: Mapping[str, Any] | None = None,
    containers: Sequence[Body] | None = None,
    init_containers: Sequence[Body] = (),
    host_ports: Sequence[Mapping[str, Any]] = (),
    node_name: str = "",
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    node_affinity: Sequence[Mapping[str, Any]] | None = None,
    pod_affinity: Sequence[Mapping[str, Any]] = (),
    pod_anti_affinity: Sequence[Mapping[str, Any]] = (),
    spread: Sequence[Mapping[str, Any]] = (),
    gates: Sequence[str] = (),
    overhead: Mapping[str, str] | None = None,
    volumes: Sequence[Mapping[str, Any]] = (),
    phase: str = "Pending",
    deleting: bool = False,
    created: str = "2024-05-01T10:00:00Z",
    scheduler: str = "metricsched",
) -> Body:
    if containers is None:
        containers = [
            build_container(
                cpu=cpu, memory=memory, ephemeral=ephemeral, requests=requests, ports=host_ports
            )
        ]
    metadata: Body = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
        "creationTimestamp": created,
    }
    if deleting:
        metadata["deletionTimestamp"] = "2024-05-01T11:00:00Z"
    spec: Body = {"schedulerName": scheduler, "containers": list(containers)}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if node_name:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    affinity: Body = {}
    if node_affinity is not None:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [dict(t) for t in node_affinity]
            }
        }
    if pod_affinity:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [dict(t) for t in pod_affinity]
        }
    if pod_anti_affinity:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [dict(t) for t in pod_anti_affinity]
        }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if overhead:
        spec["overhead"] = dict(overhead)
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": phase},
    }


def build_node_body(
    name: str = "node-1",
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    ephemeral: str = "100Gi",
    pods: str = "110",
    extended: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    addresses: Sequence[str] = ("10.0.0.1",),
) -> Body:
    allocatable = {"cpu": cpu, "memory": memory, "ephemeral-storage": ephemeral, "pods": pods}
    allocatable.update(extended or {})
    spec: Body = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "addresses": [{"type": "InternalIP", "address": a} for a in addresses],
        },
    }


def build_cluster(
    *,
    nodes: Iterable[model.NodeInfo],
    pods: Iterable[model.PodInfo] = (),
    recent_binds: Mapping[model.NodeName, Sequence[float]] | None = None,
) -> model.ClusterSnapshot:
    return node_state.snapshot(nodes, pods, recent_binds)


@pytest.fixture(scope="session")
def container() -> Callable[..., Body]:
    """Builds a raw container (``cpu="500m"``, ``limits={...}``, ``restart_policy=...``)."""
    return build_container


@pytest.fixture(scope="session")
def pod_body() -> Callable[..., Body]:
    """Builds a raw pod body; keyword arguments name the pod's features."""
    return build_pod_body


@pytest.fixture(scope="session")
def node_body() -> Callable[..., Body]:
    """Builds a raw node body with allocatable resources, labels and taints."""
    return build_node_body


@pytest.fixture(scope="session")
def pod() -> Callable[..., model.PodInfo]:
    """Builds a parsed pod: ``pod("web-2", cpu="1", node_name="n1")``."""

    def make(name: str = "web-1", **features: Any) -> model.PodInfo:
        return parse.pod_from_body(build_pod_body(name, **features))

    return make


@pytest.fixture(scope="session")
def node() -> Callable[..., model.NodeInfo]:
    """Builds a parsed node: ``node("n1", cpu="2", labels={"zone": "a"})``."""

    def make(name: str = "node-1", **features: Any) -> model.NodeInfo:
        return parse.node_from_body(build_node_body(name, **features))

    return make


@pytest.fixture(scope="session")
def cluster() -> Callable[..., model.ClusterSnapshot]:
    """Builds a snapshot from parsed nodes and (bound) pods."""
    return build_cluster


# --- cycle core: typed nodes, policies, metric views and one decision ------------------
# Used by tests/unit/{policy,scoring,cycle,explain}. Built straight from the model's
# dataclasses, so these tests state only what matters to them (no raw bodies, no parsing).

NOW = 1_700_000_000.0
"""The clock of every test decision (unix seconds)."""

GIB = 1024**3
SCHEDULER = "metricsched"


def build_node_state(
    name: str,
    *,
    cpu: int = 4000,  # millicores allocatable
    memory: int = 8 * GIB,
    requested_cpu: int = 0,
    requested_memory: int = 0,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    recent_binds: Sequence[float] = (),
) -> model.NodeState:
    """A ready node with room for 110 pods and nothing on it unless requested_* say so
    (then one unlabelled pod, bound there, requests exactly that much)."""
    info = model.NodeInfo(
        name=model.NodeName(name),
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        annotations=dict(annotations or {}),
        taints=(),
        unschedulable=unschedulable,
        allocatable=model.Resources(
            milli_cpu=cpu, memory=memory, ephemeral_storage=100 * GIB, pods=110
        ),
        addresses=(name,),
    )
    load = ()
    if requested_cpu or requested_memory:
        # Requests set explicitly (0 included), so kube-scheduler's scores count them as
        # they are: no 100m / 200Mi defaults.
        requested = model.Resources(milli_cpu=requested_cpu, memory=requested_memory, pods=1)
        load = (
            dataclasses.replace(
                build_pod_info(f"{name}-load", labels={}, node_name=name),
                requests=requested,
                nonzero_requests=requested,
                phase="Running",
            ),
        )
    return node_state.build(info, load, recent_binds=recent_binds)


def build_snapshot(*nodes: model.NodeState) -> model.ClusterSnapshot:
    return model.ClusterSnapshot(nodes={state.node.name: state for state in nodes})


def build_pod_info(
    name: str = "web-7d4",
    *,
    namespace: str = "shop",
    labels: Mapping[str, str] | None = None,
    scheduler_name: str = SCHEDULER,
    cpu: int = 100,
    memory: int = 128 * 1024**2,
    node_name: str = "",
    scheduling_gates: Sequence[str] = (),
    unsupported: Sequence[str] = (),
    deleting: bool = False,
) -> model.PodInfo:
    """A pending pod of ``metricsched`` with small requests and no constraints."""
    return model.PodInfo(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict({"app": "web"} if labels is None else labels),
        scheduler_name=scheduler_name,
        node_name=node_name,
        requests=model.Resources(milli_cpu=cpu, memory=memory, pods=1),
        host_ports=(),
        node_selector={},
        required_node_affinity=(),
        tolerations=(),
        scheduling_gates=tuple(scheduling_gates),
        topology_spread=(),
        pod_affinity=(),
        pod_anti_affinity=(),
        unsupported=tuple(unsupported),
        creation_timestamp=NOW - 10,
        deleting=deleting,
        phase="Pending",
    )


def build_metric_spec(
    name: str,
    *,
    annotation: str | None = None,
    query: str = "up",
    weight: int = 1,
    goal: model.Goal = model.Goal.MINIMIZE,
    threshold_min: float | None = None,
    threshold_max: float | None = None,
    on_missing: model.OnMissing = model.OnMissing.NEUTRAL,
    tolerance: float = 0.0,
    tolerance_percent: float = 5.0,
    value_range: float | None = None,
) -> model.MetricSpec:
    """A Prometheus metric, or a node-annotation one when ``annotation`` is given."""
    source: model.PrometheusSource | model.AnnotationSource
    if annotation is not None:
        source = model.AnnotationSource(annotation=annotation)
    else:
        source = model.PrometheusSource(query=query, node_label="node")
    return model.MetricSpec(
        name=name,
        source=source,
        weight=weight,
        goal=goal,
        threshold_min=threshold_min,
        threshold_max=threshold_max,
        on_missing=on_missing,
        tolerance=tolerance,
        tolerance_percent=tolerance_percent,
        value_range=value_range,
    )


def build_policy(
    name: str = "web-latency",
    *,
    namespace: str = "shop",
    metrics: Sequence[model.MetricSpec] = (),
    priority: int = 0,
    created: float = NOW - 3600,
    match_labels: Mapping[str, str] | None = None,
    match_expressions: Sequence[tuple[str, str, tuple[str, ...]]] = (),
    max_metric_age_s: float = 120.0,
    burst_penalty: float = 0.0,
    burst_window_s: float = 60.0,
    fallback: model.FallbackStrategy = model.FallbackStrategy.LEAST_ALLOCATED,
) -> model.Policy:
    """A policy of namespace ``shop`` selecting every pod, without a burst penalty unless
    asked; its one metric is ``latency`` (Prometheus) unless ``metrics`` are given."""
    return model.Policy(
        namespace=namespace,
        name=name,
        generation=1,
        creation_timestamp=created,
        priority=priority,
        pod_selector=model.LabelSelector(
            match_labels=dict(match_labels or {}), match_expressions=tuple(match_expressions)
        ),
        metrics=tuple(metrics) or (build_metric_spec("latency"),),
        max_metric_age_s=max_metric_age_s,
        burst_penalty=burst_penalty,
        burst_window_s=burst_window_s,
        fallback=fallback,
    )


def build_metric_view(
    policy: model.Policy,
    values: Mapping[str, Mapping[str, float]],
    *,
    refreshed_at: float = NOW - 5,
    errors: Mapping[str, tuple[model.QueryErrorKind, str]] | None = None,
) -> model.MetricView:
    """The refresher's view for ``policy``: ``values[metric][node]``, all refreshed at once.

    ``errors[metric]`` marks that metric's last refresh as failed (its values stay).
    """
    errors = errors or {}
    view: dict[model.MetricKey, model.MetricSeries] = {}
    for metric in policy.metrics:
        if metric.name not in values and metric.name not in errors:
            continue
        error = errors.get(metric.name)
        view[model.MetricKey(policy=policy.key, metric=metric.name)] = model.MetricSeries(
            values={
                model.NodeName(node): model.MetricSample(value=value, refreshed_at=refreshed_at)
                for node, value in values.get(metric.name, {}).items()
            },
            last_refresh=refreshed_at,
            error=None if error is None else error[0],
            error_message="" if error is None else error[1],
        )
    return view


def run_cycle(
    *,
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    policies: Sequence[model.Policy] = (),
    metrics: model.MetricView | None = None,
    default_fallback: model.FallbackStrategy = model.FallbackStrategy.LEAST_ALLOCATED,
    now: float = NOW,
    rr_counter: int = 0,
    seed: int = 0,
    elsewhere: Sequence[Any] = (),
    table: Any = None,
    detail: bool = True,
    memo: Any = None,
) -> model.Decision:
    """``cycle.schedule_one`` with the test clock and ``metricsched`` as the scheduler
    (``table``, ``detail`` and ``memo`` as the operator may pass them)."""
    from metricsched.core import cycle  # late: tests that never decide need not import it

    return cycle.schedule_one(
        pod=pod,
        snapshot=snapshot,
        table=table,
        detail=detail,
        memo=memo,
        policies=policies,
        metrics=metrics or {},
        default_fallback=default_fallback,
        now=now,
        scheduler_names=frozenset({SCHEDULER}),
        elsewhere=elsewhere,
        rr_counter=rr_counter,
        seed=seed,
    )


@pytest.fixture(scope="session")
def now() -> float:
    """The clock of every test decision."""
    return NOW


@pytest.fixture(scope="session")
def make_node() -> Callable[..., model.NodeState]:
    """Builds a node with what is on it: ``make_node("node-1", cpu=2000, requested_cpu=500)``."""
    return build_node_state


@pytest.fixture(scope="session")
def make_cluster() -> Callable[..., model.ClusterSnapshot]:
    """Builds a snapshot of the given node states: ``make_cluster(make_node("node-1"))``."""
    return build_snapshot


@pytest.fixture(scope="session")
def make_pod() -> Callable[..., model.PodInfo]:
    """Builds a pending pod of shop: ``make_pod("web-1", labels={"app": "web"}, cpu=500)``."""
    return build_pod_info


@pytest.fixture(scope="session")
def make_metric() -> Callable[..., model.MetricSpec]:
    """Builds a metric: ``make_metric("latency", weight=3, threshold_max=0.5)``."""
    return build_metric_spec


@pytest.fixture(scope="session")
def make_policy() -> Callable[..., model.Policy]:
    """Builds a policy of shop: ``make_policy("web", metrics=[...], burst_penalty=5)``."""
    return build_policy


@pytest.fixture(scope="session")
def make_view() -> Callable[..., model.MetricView]:
    """Builds the metric view of a policy: ``make_view(policy, {"latency": {"node-1": 0.2}})``."""
    return build_metric_view


@pytest.fixture(scope="session")
def schedule() -> Callable[..., model.Decision]:
    """Decides for one pod: ``schedule(pod=..., snapshot=..., policies=[...], metrics=...)``."""
    return run_cycle


def as_lists(scores: scoring.Scores) -> tuple[object, ...]:
    """Every field of ``scores``, arrays as lists (to compare two results exactly)."""
    return (
        [column.tolist() for column in scores.per_metric],
        scores.burst_counts.tolist(),
        scores.penalties.tolist(),
        scores.totals.tolist(),
        [(term.plugin, term.weight, term.scores.tolist()) for term in scores.kube],
    )
