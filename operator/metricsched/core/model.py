"""Typed, immutable views of what the scheduling cycle reads and decides.

Raw API bodies (dicts from watches) are converted once, at the edge, into these compact
frozen dataclasses by ``pod_from_body`` / ``node_from_body`` (in ``metricsched.core.parse``)
and ``policy_from_body`` (in ``metricsched.core.policy``). The cycle never touches raw bodies.
No I/O here.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, NewType, Protocol, runtime_checkable

from metricsched.core import versions

NodeName = NewType("NodeName", str)
PodKey = NewType("PodKey", str)  # "namespace/name"
PolicyKey = NewType("PolicyKey", str)  # "namespace/name"

RawBody = Mapping[str, Any]


# --- resources -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Resources:
    """Resource amounts in kube-scheduler's units: millicores, bytes, pod count."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: Mapping[str, int] = dataclasses.field(default_factory=dict)  # extended resources


# --- nodes and pods --------------------------------------------------------------------


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclasses.dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # a TaintEffect value; kept as str so unknown effects survive parsing


@dataclasses.dataclass(frozen=True, slots=True)
class Toleration:
    key: str  # "" with operator Exists tolerates everything
    operator: Literal["Equal", "Exists"]
    value: str
    effect: str  # "" = all effects


@dataclasses.dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str  # TCP | UDP | SCTP
    host_ip: str  # "" or "0.0.0.0" = all addresses
    port: int


@dataclasses.dataclass(frozen=True, slots=True)
class NodeInfo:
    name: NodeName
    labels: Mapping[str, str]
    annotations: Mapping[str, str]  # without kubectl's last-applied-configuration
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Resources
    addresses: tuple[str, ...]  # status.addresses[*].address (InternalIP, Hostname, ...)
    # status.declaredFeatures: what the node's kubelet says it supports (KEP-5328)
    declared_features: frozenset[str] = frozenset()


TERMINAL_PHASES: Final = ("Succeeded", "Failed")
"""A pod in one of these phases has finished: it holds nothing on its node (kube-scheduler's
pod informer skips it), waits for no node and is nominated to none. The one terminal-phase
rule: the watches' field selectors, the cache and the snapshot all read it (``finished``)."""


def finished(phase: str) -> bool:
    """Whether a pod in ``phase`` has finished (``TERMINAL_PHASES``)."""
    return phase in TERMINAL_PHASES


@dataclasses.dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    scheduler_name: str
    node_name: str  # "" while unbound
    requests: Resources  # effective request: max(sum(containers), max(init)) + overhead; pods=1
    host_ports: tuple[HostPort, ...]
    node_selector: Mapping[str, str]
    required_node_affinity: tuple[RawBody, ...]  # nodeSelectorTerms (ORed), raw
    tolerations: tuple[Toleration, ...]
    scheduling_gates: tuple[str, ...]
    topology_spread: tuple[RawBody, ...]  # topologySpreadConstraints, raw
    pod_affinity: tuple[RawBody, ...]  # required podAffinity terms, raw
    pod_anti_affinity: tuple[RawBody, ...]  # required podAntiAffinity terms, raw
    unsupported: tuple[str, ...]  # features out of scope (e.g. "volume topology"); explained
    creation_timestamp: float  # unix seconds; 0 if unknown
    deleting: bool  # metadata.deletionTimestamp set
    phase: str
    priority: int = 0  # spec.priority (set by the API server from priorityClassName)
    # --- read for the parity plugins (core/plugins) ---
    preemption_policy: str = ""  # spec.preemptionPolicy ("" = PreemptLowerPriority)
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims[*].name (DRA)
    # cpu and memory as kube-scheduler's scores count them: a container without a request
    # counts 100m / 200Mi (NodeResourcesFit's LeastAllocated/MostAllocated, not its filter)
    nonzero_requests: Resources | None = None  # None: same as ``requests``
    # ... and as NodeResourcesFit's score counts the pod it places: without pod-level
    # spec.resources (kube-scheduler v1.35 builds that scorer without the PodLevelResources
    # gate, which its filter, BalancedAllocation and placed pods' sums honour); set only
    # for pods with pod-level resources (None: ``nonzero_requests``)
    fit_score_requests: Resources | None = None
    # PersistentVolumeClaims the pod's volumes use (persistentVolumeClaim.claimName, and
    # "<pod>-<volume>" for generic ephemeral volumes), in the pod's namespace
    volume_claims: tuple[str, ...] = ()
    ephemeral_claims: tuple[str, ...] = ()  # those of generic ephemeral volumes
    # --- read for kube-scheduler's score plugins (core/plugins/kube_scores) ---
    # preferredDuringSchedulingIgnoredDuringExecution terms, raw: {weight, preference} for
    # nodes, {weight, podAffinityTerm} for pod (anti-)affinity
    preferred_node_affinity: tuple[RawBody, ...] = ()
    preferred_pod_affinity: tuple[RawBody, ...] = ()
    preferred_pod_anti_affinity: tuple[RawBody, ...] = ()
    # "<Kind>/<uid>" of the controller ownerReference when it is a ReplicaSet, StatefulSet
    # or ReplicationController (the owners of kube-scheduler's default spreading); "" else
    controller: str = ""
    # --- read for the metric estimates (core/estimate.py) ---
    # cpu and memory limits as a pod would use them at most: each container's limit, or
    # its request where it sets none (init containers as in ``requests``)
    limits: Resources = Resources()
    # unix time the pod was bound (the later of its PodScheduled transition and its
    # start; our own bind time while assumed); 0: unknown or unbound
    bound_at: float = 0.0
    # --- read for rebalancing (core/rebalance.py) ---
    # "<Kind>/<name>" of the pod's controller ownerReference, whichever kind it is ("")
    owner: str = ""
    # the policy ("namespace/name") named by the pod's metricsched.io/decision
    # annotation: the policy metricsched placed it under; "" when not placed by a policy
    placed_by: str = ""
    # status.nominatedNodeName of an unbound pod: the node a scheduler reserved for it
    # (preemption, or a binding cycle under way); "" when none
    nominated_node: str = ""
    # the node features the pod needs, inferred from its spec as kube-scheduler's
    # NodeDeclaredFeatures plugin does (KEP-5328); sorted, () for most pods
    required_features: tuple[str, ...] = ()

    @property
    def owner_kind(self) -> str:
        """The kind of the pod's controller ("" without one)."""
        return self.owner.partition("/")[0]

    @property
    def workload(self) -> str:
        """What learned estimates are kept per: the controller, else the namespace and
        the ``app`` label (or ``app.kubernetes.io/name``), else "" (no workload)."""
        if self.controller:
            return self.controller
        app = self.labels.get("app") or self.labels.get("app.kubernetes.io/name")
        return f"{self.namespace}/{app}" if app else ""

    @property
    def usage_workload(self) -> str:
        """Whose measured usage estimates this pod (``estimate.from: Measured``): the
        Deployment across its revisions (a ReplicaSet named after it with the
        pod-template-hash), else the controller (StatefulSet, Job, DaemonSet, ...), else
        the namespace's bare pods with the same labels."""
        kind, _, name = self.owner.partition("/")
        if kind == "ReplicaSet":
            template = self.labels.get("pod-template-hash")
            if template and name.endswith("-" + template):
                return f"{self.namespace}/Deployment/{name[: -len(template) - 1]}"
        if kind:
            return f"{self.namespace}/{self.owner}"
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.namespace}/Pod/{{{labels}}}"

    @property
    def key(self) -> PodKey:
        return PodKey(f"{self.namespace}/{self.name}")


@dataclasses.dataclass(frozen=True, slots=True)
class NodeState:
    """A node with what is already placed on it (bound pods plus assumed ones)."""

    node: NodeInfo
    requested: Resources  # sum of effective requests of pods on the node; .pods = pod count
    used_ports: frozenset[HostPort]
    pods: tuple[PodInfo, ...]  # for inter-pod affinity and topology spread
    recent_binds: tuple[float, ...] = ()  # unix times this scheduler bound pods here (burst)
    nonzero_requested: Resources | None = None  # sum of pods' nonzero_requests; None: requested


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A PersistentVolumeClaim, as VolumeBinding reads it."""

    namespace: str
    name: str
    volume_name: str  # spec.volumeName; "" while unbound
    deleting: bool
    # --- read for WaitForFirstConsumer vs Immediate and NodeVolumeLimits ---
    # its class: the beta annotation volume.beta.kubernetes.io/storage-class, else
    # spec.storageClassName ("" = none)
    storage_class: str = ""
    # the PV controller finished binding (annotation pv.kubernetes.io/bind-completed): a
    # claim with spec.volumeName but without it is pre-bound, which kube-scheduler counts
    # as unbound
    bind_completed: bool = False
    lost: bool = False  # status.phase Lost: its volume is gone
    controller_uid: str = ""  # uid of its controlling owner (a generic ephemeral's pod)


@dataclasses.dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A PersistentVolume, as VolumeBinding and VolumeZone read it."""

    name: str
    node_affinity: tuple[RawBody, ...] | None  # spec.nodeAffinity.required terms; None: any
    zone_labels: Mapping[str, str]  # its topology.kubernetes.io/zone|region labels (and beta)
    csi_driver: str = ""  # spec.csi.driver ("" = not a CSI volume)
    csi_handle: str = ""  # spec.csi.volumeHandle


@dataclasses.dataclass(frozen=True, slots=True)
class StorageClassInfo:
    """A StorageClass, as VolumeBinding (binding mode) and NodeVolumeLimits read it."""

    name: str
    provisioner: str
    wait_for_first_consumer: bool  # volumeBindingMode WaitForFirstConsumer (else Immediate)


@dataclasses.dataclass(frozen=True, slots=True)
class VolumeAttachmentInfo:
    """A VolumeAttachment, as NodeVolumeLimits reads it: a volume attached (or attaching,
    or detaching) on a node, whether or not a pod there still uses it."""

    name: str
    attacher: str  # spec.attacher: the CSI driver
    node_name: str  # spec.nodeName
    volume_name: str  # spec.source.persistentVolumeName ("" = an inline volume)


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    """A DeviceClass (resource.k8s.io), as DRA-backed extended resources (KEP-5004) read it."""

    name: str
    extended_resource_name: str = ""  # spec.extendedResourceName ("" = none)


DEVICE_CLASS_RESOURCE_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
"""Every DeviceClass may be asked for as the extended resource ``<prefix><class name>``."""


@dataclasses.dataclass(frozen=True, slots=True)
class CSINodeInfo:
    """A CSINode (named after its node), as NodeVolumeLimits reads it."""

    name: str
    # spec.drivers[].allocatable.count by driver name; a driver without a count has no limit
    limits: Mapping[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything the cycle knows about the cluster at one instant."""

    nodes: Mapping[NodeName, NodeState]
    # Labels of each namespace (from the Namespace watch), for namespaceSelector in pod
    # (anti-)affinity; None: not known, and the filters answer restrictively.
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    # PersistentVolumeClaims by "namespace/name" and PersistentVolumes by name, from their
    # watches; None: not known yet (pods with claims wait).
    claims: Mapping[str, ClaimInfo] | None = None
    volumes: Mapping[str, VolumeInfo] | None = None
    # StorageClasses and CSINodes by name, from their watches; None or absent: none known
    # (claims without a known class are Immediate; nodes without a CSINode have no limit).
    storage_classes: Mapping[str, StorageClassInfo] | None = None
    csi_nodes: Mapping[str, CSINodeInfo] | None = None
    # VolumeAttachments by the node they are for (NodeVolumeLimits); None: none known
    volume_attachments: Mapping[str, tuple[VolumeAttachmentInfo, ...]] | None = None
    # Which state of ``nodes`` this is, when its maker changes the mapping in place (the
    # runtime cache: a new number with every change); None: ``nodes`` never changes. A
    # node table (core.columns), handed out beside the snapshot, names the mapping and the
    # version it mirrors, so a table of another state is never read as this one's.
    nodes_version: int | None = None
    # Unbound pods with status.nominatedNodeName, by that node (any scheduler's): they
    # occupy it in Filter for pods of equal or lower priority, as kube-scheduler counts
    # its own nominated pods (framework.run_filters_with_nominated).
    nominated: Mapping[NodeName, tuple[PodInfo, ...]] = dataclasses.field(default_factory=dict)
    # kube-scheduler's rules of the cluster's minor version (the API server's /version,
    # read at start); the oracle's pinned v1.35 unless the maker says otherwise
    rules: versions.Rules = versions.DEFAULT
    # Extended resource names a DeviceClass maps (its spec.extendedResourceName, and
    # deviceclass.resource.kubernetes.io/<class> for every class): with the rules'
    # dra_extended_resources, such a resource on a node without it in allocatable is
    # served by DRA (plugins.node_resources_fit)
    device_class_resources: frozenset[str] = frozenset()
    # Rebalancing's target reservations (core.reservation): placeholders of evicted pods,
    # by the node their replacement is to go to. Each is also one of that node's pods
    # (counted there for every pod); a pod of the same workload sees its room free.
    reserved: Mapping[NodeName, tuple[PodInfo, ...]] = dataclasses.field(default_factory=dict)


# --- policies --------------------------------------------------------------------------


class Goal(enum.StrEnum):
    MINIMIZE = "Minimize"
    MAXIMIZE = "Maximize"


class OnMissing(enum.StrEnum):
    NEUTRAL = "Neutral"  # score 50
    EXCLUDE = "Exclude"  # node infeasible
    WORST = "Worst"  # score 0


class PolicyMode(enum.StrEnum):
    ACTIVE = "Active"  # metricsched places the pods the policy governs
    SHADOW = "Shadow"  # other schedulers place them; metricsched only says what it would do


class ThresholdMode(enum.StrEnum):
    """What a metric's threshold does when it would leave a pod no node."""

    HARD = "Hard"  # the pod stays pending (FailedScheduling names the threshold)
    SOFT = "Soft"  # the threshold is lifted for that decision: the nodes are scored


class DaemonSetPods(enum.StrEnum):
    """Whether a DaemonSet's pod meets the policy's thresholds (and onMissing: Exclude)."""

    EXEMPT = "Exempt"  # never: its one node is the DaemonSet's, a threshold only strands it
    FILTER = "Filter"  # like any pod


DEFAULT_SHADOW_SCHEDULERS: tuple[str, ...] = ("default-scheduler",)


class FallbackStrategy(enum.StrEnum):
    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    ROUND_ROBIN = "RoundRobin"
    RANDOM = "Random"
    WAIT = "Wait"


class EstimateFrom(enum.StrEnum):
    """Where a metric's estimate of a placed pod's effect comes from (``estimate.from``)."""

    REQUESTS = "Requests"  # the pod's requests of ``resource`` x factor / allocatable
    LIMITS = "Limits"  # its limits (requests where none) x factor / allocatable
    AMOUNT = "Amount"  # a stated amount per pod / allocatable
    # what the pod's workload's running pods measurably use (per-pod usage from
    # Prometheus), else a declared amount, else max(requests, limits) x factor, else a floor
    MEASURED = "Measured"
    LEARNED = "Learned"  # a per-pod increment learned from how past binds moved it
    NONE = "None"  # no estimate: the burst penalty stands in


class EstimateResource(enum.StrEnum):
    CPU = "cpu"
    MEMORY = "memory"


@runtime_checkable
class MetricSource(Protocol):
    """Where a metric's per-node values come from: what the cycle, the estimates, the
    refresher and status ask of a source without asking which one it is
    (``spec.metrics[]`` has exactly one of ``prometheus``, ``nodeAnnotation``,
    ``metricsServer``). Each member answers one question; a new source answers them all
    (mypy checks every ``AnySource`` where a ``MetricSource`` is taken, and
    ``tests/unit/policy/test_metric_source_protocol.py`` checks each against the others)."""

    # The CRD field that declares it; also the source's name in logs and status.
    field: ClassVar[str]
    # Values come from the refresher through the metric store, refreshed and aging
    # (False: read off the node objects, always current).
    refreshed: ClassVar[bool]
    # A placed pod moves its values before the samples show it: an estimate applies.
    moves_with_binds: ClassVar[bool]
    # How the Scheduled event names the source after the metric ("" : not named, the
    # policy's default kind of source).
    event_label: ClassVar[str]
    # The estimate of a thresholded utilisation metric that declares none: Measured where
    # Prometheus can measure the pods, Requests where the cluster may have no Prometheus
    # (``core.policy_estimate``); None where values never move with binds.
    default_estimate: ClassVar[EstimateFrom]

    @property
    def node_annotation(self) -> str | None:
        """The node annotation its values are read from (None: not read off the nodes)."""
        ...

    @property
    def prometheus(self) -> PrometheusSource | None:
        """The query (and node label) a Prometheus round fetches it with (None: not
        fetched from Prometheus)."""
        ...

    @property
    def node_metrics(self) -> EstimateResource | None:
        """The resource of ``metrics.k8s.io`` NodeMetrics it is the utilisation of, read
        by the refresher's one LIST (None: not read there)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class PrometheusSource:
    field: ClassVar[str] = "prometheus"
    refreshed: ClassVar[bool] = True
    moves_with_binds: ClassVar[bool] = True
    event_label: ClassVar[str] = ""
    default_estimate: ClassVar[EstimateFrom] = EstimateFrom.MEASURED

    query: str
    node_label: str  # label naming the node (node name or address / host:port)

    @property
    def node_annotation(self) -> None:
        return None

    @property
    def prometheus(self) -> PrometheusSource:
        return self

    @property
    def node_metrics(self) -> None:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class AnnotationSource:
    field: ClassVar[str] = "nodeAnnotation"
    refreshed: ClassVar[bool] = False
    moves_with_binds: ClassVar[bool] = False
    event_label: ClassVar[str] = ""
    default_estimate: ClassVar[EstimateFrom] = EstimateFrom.NONE

    annotation: str

    @property
    def node_annotation(self) -> str:
        return self.annotation

    @property
    def prometheus(self) -> None:
        return None

    @property
    def node_metrics(self) -> None:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class MetricsServerSource:
    """A node's usage of ``resource`` in ``metrics.k8s.io`` NodeMetrics over its
    allocatable: a utilisation ratio (0.5 = half the allocatable in use)."""

    field: ClassVar[str] = "metricsServer"
    refreshed: ClassVar[bool] = True
    moves_with_binds: ClassVar[bool] = True
    event_label: ClassVar[str] = "metrics-server"
    default_estimate: ClassVar[EstimateFrom] = EstimateFrom.REQUESTS

    resource: EstimateResource  # cpu or memory, the resources NodeMetrics carries

    @property
    def node_annotation(self) -> None:
        return None

    @property
    def prometheus(self) -> None:
        return None

    @property
    def node_metrics(self) -> EstimateResource:
        return self.resource


# Every source there is (the parser builds one; ``MetricSource`` is what callers ask).
AnySource = PrometheusSource | AnnotationSource | MetricsServerSource


@dataclasses.dataclass(frozen=True, slots=True)
class EstimateSpec:
    """How a placed pod moves a metric before the samples show it (DESIGN "Scoring
    semantics" 6; ``spec.metrics[].estimate``)."""

    source: EstimateFrom
    settle_s: float  # a pod counts until a sample refreshed this long after its bind
    resource: EstimateResource | None = None  # Requests, Limits, Amount
    factor: float = 1.0  # Requests, Limits
    amount: int = 0  # Amount: millicores (cpu) or bytes (memory) per pod
    learn: bool = False  # correct a declared amount from past binds (per workload)
    declared: bool = True  # written in the policy (not the default for a threshold)
    factor_declared: bool = False  # ``factor`` written in the policy (Measured's fallback)

    @property
    def measured_factor(self) -> float | None:
        """Measured's factor of max(requests, limits) for a workload not measured yet:
        the stated one, else None (the resource's default, ``core.usage``)."""
        return self.factor if self.factor_declared else None

    @property
    def active(self) -> bool:
        return self.source is not EstimateFrom.NONE


NO_ESTIMATE: Final = EstimateSpec(source=EstimateFrom.NONE, settle_s=0.0, declared=False)


@dataclasses.dataclass(frozen=True, slots=True)
class ThresholdOverride:
    """A metric's bounds on the nodes ``node_selector`` matches (the first match wins)."""

    node_selector: LabelSelector
    threshold_min: float | None
    threshold_max: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    source: AnySource
    weight: int
    goal: Goal
    threshold_min: float | None
    threshold_max: float | None
    on_missing: OnMissing
    # Normalisation (DESIGN "Scoring semantics", README "No herding"): values within
    # max(tolerance, tolerance_percent % of |best|) of the best count as equal to it; a
    # node ``value_range`` units past that scores 0 (None: the worst scored node does).
    tolerance: float = 0.0
    tolerance_percent: float = 5.0
    value_range: float | None = None
    estimate: EstimateSpec = NO_ESTIMATE
    # per node group: the first override whose selector matches a node's labels gives
    # its bounds there (``core.plugins.metric_threshold.row_bounds``)
    threshold_overrides: tuple[ThresholdOverride, ...] = ()
    threshold_mode: ThresholdMode = ThresholdMode.HARD


@dataclasses.dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str]
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...]  # (key, operator, values)


class RebalanceMode(enum.StrEnum):
    DRY_RUN = "DryRun"  # report what would be evicted; evict nothing
    EVICT = "Evict"  # evict through the Eviction API


@dataclasses.dataclass(frozen=True, slots=True)
class Trigger:
    """One trigger of ``spec.rebalance``: a metric and the value a node must stay past."""

    metric: str  # one of the policy's metrics
    above: float | None  # a node is outside when its value is above this...
    below: float | None  # ... or below this (exactly one of the two is set)
    margin: float  # hysteresis, in the metric's units (see ``RebalanceSpec.margin``)

    def outside(self, value: float) -> bool:
        """Whether ``value`` is past the trigger."""
        if self.above is not None:
            return value > self.above
        return self.below is not None and value < self.below

    def inside_by_margin(self, value: float) -> bool:
        """Whether ``value`` is at least ``margin`` inside the trigger."""
        if self.above is not None:
            return value <= self.above - self.margin
        return self.below is not None and value >= self.below + self.margin

    def excess(self, value: float) -> float:
        """How far ``value`` is past the trigger, in the metric's units (0 inside)."""
        if self.above is not None:
            return max(0.0, value - self.above)
        return max(0.0, self.below - value) if self.below is not None else 0.0

    def load(self, value: float) -> float:
        """``value`` in the trigger's direction: higher is always further toward it."""
        return value if self.above is not None else -value


@dataclasses.dataclass(frozen=True, slots=True)
class RebalanceSpec:
    """``spec.rebalance``: when and how far pods the policy placed are moved off a node
    whose metric stays past a trigger (README "Rebalancing"). The first trigger is
    ``metric``/``above``/``below``/``margin``; ``more_triggers`` hold the others (a node
    is outside while any one trigger is past)."""

    mode: RebalanceMode
    metric: str  # the trigger metric (one of the policy's)
    above: float | None  # a node is outside when its value is above this...
    below: float | None  # ... or below this (exactly one of the two is set)
    window_s: float  # outside this long before anything moves; a pod moves once per window
    interval_s: float  # the period the limits count over
    max_per_node: int  # evictions per node per interval
    max_total: int  # evictions cluster-wide per interval
    min_pod_age_s: float  # never a pod younger than this
    margin: float  # hysteresis, in the metric's units: how far inside the trigger the
    # dry run's node must be, counting the moved pod's estimate, and how far below the
    # source after the move
    more_triggers: tuple[Trigger, ...] = ()
    # a workload (its controller: a Deployment across its ReplicaSets, a StatefulSet, ...)
    # is moved at most ``workload_limit(its pods)`` times per ``workload_interval_s``: a
    # count (``max_per_workload``), a percentage of its pods (``max_per_workload_percent``)
    # or, neither given, the scaled rule
    workload_interval_s: float = 300.0
    max_per_workload: int | None = None
    max_per_workload_percent: int | None = None
    evict_job_pods: bool = False  # Job pods count against backoffLimit: only when asked

    def workload_limit(self, pods: int) -> int:
        """Evictions a workload of ``pods`` pods may have per ``workload_interval_s``: the
        count given; else the percentage given of its pods, rounded down but at least 1
        (0 %: none); else the scaled rule after Koordinator's migration limiter (1 for
        fewer than 4 pods, 2 for 4 to 20, 10 % rounded down above: never fewer for more
        pods, where Koordinator's drops from 2 at 10 pods to 1 at 11)."""
        if self.max_per_workload is not None:
            return self.max_per_workload
        if self.max_per_workload_percent is not None:
            if self.max_per_workload_percent == 0:
                return 0
            return max(1, pods * self.max_per_workload_percent // 100)
        return 1 if pods < 4 else max(2, pods // 10)

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        first = Trigger(metric=self.metric, above=self.above, below=self.below, margin=self.margin)
        return (first, *self.more_triggers)

    def outside(self, value: float) -> bool:
        """Whether ``value`` is past the trigger."""
        if self.above is not None:
            return value > self.above
        return self.below is not None and value < self.below

    def inside_by_margin(self, value: float) -> bool:
        """Whether ``value`` is at least ``margin`` inside the trigger."""
        if self.above is not None:
            return value <= self.above - self.margin
        return self.below is not None and value >= self.below + self.margin


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    namespace: str
    name: str
    generation: int
    creation_timestamp: float
    priority: int
    pod_selector: LabelSelector
    metrics: tuple[MetricSpec, ...]
    max_metric_age_s: float
    burst_penalty: float
    burst_window_s: float
    fallback: FallbackStrategy
    mode: PolicyMode = PolicyMode.ACTIVE
    # In shadow mode: the schedulerNames whose pods the policy evaluates.
    shadow_scheduler_names: tuple[str, ...] = DEFAULT_SHADOW_SCHEDULERS
    # spec.kubeScores: (kube-scheduler score plugin name, weight) for each weight > 0, in
    # the plugins' order; () blends none (the parser applies the CRD's defaults)
    kube_weights: tuple[tuple[str, int], ...] = ()
    # The install (one of its --scheduler-name values) that serves the policy.
    scheduler_name: str = "metricsched"
    rebalance: RebalanceSpec | None = None  # None: off (the default)
    daemon_set_pods: DaemonSetPods = DaemonSetPods.EXEMPT

    @property
    def key(self) -> PolicyKey:
        return PolicyKey(f"{self.namespace}/{self.name}")


# --- metric values ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class MetricKey:
    """Identifies one metric of one policy (the refresher's unit of work)."""

    policy: PolicyKey
    metric: str


class QueryErrorKind(enum.StrEnum):
    UNREACHABLE = "Unreachable"  # connection refused, timeout, 5xx after retries
    BAD_QUERY = "BadQuery"  # 400/422: PromQL rejected; or refused by the admin's rules, unsent
    EMPTY_RESULT = "EmptyResult"  # ran fine, returned no series for any known node
    BAD_RESULT = "BadResult"  # not a vector, unparsable values
    RESULT_TOO_LARGE = "ResultTooLarge"  # the answer passed the byte or series cap, unread
    # metrics.k8s.io answered 404 (no APIService: metrics-server not installed) or 503
    # (its APIService is registered but its backend is not available)
    METRICS_API_UNAVAILABLE = "MetricsAPIUnavailable"


@dataclasses.dataclass(frozen=True, slots=True)
class MetricSample:
    value: float  # never NaN; ±Inf are values (the best or worst there is)
    refreshed_at: float  # unix time of the refresh that returned it


@dataclasses.dataclass(frozen=True, slots=True)
class LearnedEffect:
    """How the policy's own past binds moved one metric, as the runtime's learner
    measured them (``core.learning``): a pod's increment (``Learned``; in the metric's
    load direction, never negative; in resource units, millicores or bytes, when the
    estimate names a ``resource``) and the ratio of what binds did to what the declared
    estimate said (``learn: true``), overall and per workload."""

    per_pod: float | None = None
    per_pod_by_workload: Mapping[str, float] = dataclasses.field(default_factory=dict)
    ratio: float | None = None
    ratio_by_workload: Mapping[str, float] = dataclasses.field(default_factory=dict)
    observations: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class MetricSeries:
    """The latest known per-node values of one metric and the health of its source."""

    values: Mapping[NodeName, MetricSample]
    last_refresh: float  # unix time of the last attempt (0 = never)
    error: QueryErrorKind | None  # error of the last attempt, None if it succeeded
    error_message: str  # human-readable, secrets removed; "" if none
    learned: LearnedEffect | None = None  # what the learner knows of binds' effect
    usage: PodUsage | None = None  # running pods' measured usage (estimate.from Measured)


@dataclasses.dataclass(frozen=True, slots=True)
class PodUsage:
    """Running pods' measured usage from one answer of the operator's per-pod queries
    (cAdvisor's series by default), and what each workload's settled pods use (a high
    quantile of them, ``Pod.usage_workload``): what ``estimate.from: Measured`` reads."""

    at: float  # unix time the queries were sent
    cpu: Mapping[str, float]  # "namespace/name" -> millicores
    memory: Mapping[str, float]  # "namespace/name" -> bytes
    workload_cpu: Mapping[str, float]  # usage_workload -> millicores
    workload_memory: Mapping[str, float]  # usage_workload -> bytes
    workload_pods: Mapping[str, int]  # usage_workload -> settled pods measured
    # The same for a workload's pods still starting (bound less than the settle time
    # before): what they show so far, a lower bound of their usage (core.usage).
    starting_cpu: Mapping[str, float] = dataclasses.field(default_factory=dict)
    starting_memory: Mapping[str, float] = dataclasses.field(default_factory=dict)
    starting_pods: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # When each workload's settled quantile was last measured (unix time): ``at`` for
    # those measured in this answer, earlier for those remembered (core.usage).
    workload_at: Mapping[str, float] = dataclasses.field(default_factory=dict)


# Everything the refresher knows, by metric.
MetricView = Mapping[MetricKey, MetricSeries]


# --- decisions -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class MetricScore:
    metric: str
    value: float | None  # None = missing / stale; the sample, without the estimate
    score: float  # 0..100 after normalisation (and onMissing)
    estimate: float = 0.0  # added to the sample for pods it does not show yet (and this one)


@dataclasses.dataclass(frozen=True, slots=True)
class KubeScore:
    plugin: str  # kube-scheduler's score plugin name, e.g. "TaintToleration"
    score: float  # 0..100 as the plugin normalises it
    weight: int  # the policy's spec.kubeScores weight


@dataclasses.dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: NodeName
    feasible: bool
    reason: str  # kube-scheduler style reason when infeasible, "" when feasible
    metrics: tuple[MetricScore, ...]
    burst_count: int  # pods bound here by us within the burst window
    score: float  # final score 0..100 (0 for infeasible nodes)
    kube: tuple[KubeScore, ...] = ()  # the kube-scheduler scores blended into ``score``


class Outcome(enum.StrEnum):
    BIND = "Bind"  # bind the pod to Decision.node
    UNSCHEDULABLE = "Unschedulable"  # no feasible node: FailedScheduling, retry later
    WAIT = "Wait"  # fallback strategy Wait: FailedScheduling, retry after metrics recover
    SKIP = "Skip"  # not ours to schedule (gated, bound, deleting, other scheduler)


class FallbackKind(enum.StrEnum):
    """Why a policy's fallback strategy decided (the ``reason_kind`` of /metrics)."""

    PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"
    NO_FRESH_VALUES = "NoFreshValues"
    OTHER = "Other"


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    pod: PodKey
    policy: PolicyKey | None  # None = the operator's default policy
    outcome: Outcome
    node: NodeName | None
    fallback_reason: str  # "" unless fallback decided; says why
    # every node in name order; with schedule_one(detail=False) a pod placed by its
    # metrics or a fallback strategy carries only the winner's and the runner-up's (one
    # left waiting by Wait, none)
    verdicts: tuple[NodeVerdict, ...]
    message: str  # the event message (Scheduled or FailedScheduling), <= 1024 chars
    fallback_kind: FallbackKind | None = None  # set with fallback_reason
    # metric -> what the placed pod's Measured estimate rested on, for people (BIND only)
    estimate_basis: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # metrics whose learned estimate this decision left out: with it no node passed the
    # thresholds that the samples (and any declared estimate) alone let some node pass
    estimate_fail_open: tuple[str, ...] = ()
    # metrics whose Soft threshold this decision lifted: every node that passed the other
    # filters was outside it, so the nodes were scored instead of the pod refused
    soft_lifted: tuple[str, ...] = ()
