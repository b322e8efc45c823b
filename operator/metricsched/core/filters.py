"""kube-scheduler's feasibility filters, with its own reason strings.

A node is feasible for a pod here exactly when kube-scheduler's default profile would find
it feasible (DESIGN §3), minus what is out of scope (volumes, preemption). Each filter is a
small function returning "" when the node passes, or kube-scheduler's reason string;
NodeResourcesFit returns a tuple because it reports every insufficient resource.

``run_filters`` evaluates one pod against a whole snapshot the way the scheduling
framework does: the pre-filter checks first (a pod-level rejection applies to every
node), then the filters per node in the default plugin order (NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread,
InterPodAffinity), stopping at the first filter that rejects the node. The pod is
compiled once; the per-node loop allocates nothing for feasible nodes.

``fit_error_message`` renders kube-scheduler's FitError text ("0/6 nodes are available:
..."), which users and cluster autoscalers already know how to read.

Verified against kubernetes/kubernetes pkg/scheduler/framework/plugins/* and
k8s.io/component-helpers (v1.35 behaviour, features at their defaults). Purely
computational: no I/O, no clocks, no clients.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Final, Generic, TypeVar

from metricsched.core import model

# --- reason strings, verbatim from kube-scheduler --------------------------------------

REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
# Since v1.35 (backported to v1.34) without the taint: its value may be sensitive.
REASON_UNTOLERATED_TAINT: Final = "node(s) had untolerated taint(s)"
REASON_NODE_NAME: Final = "node(s) didn't match the requested node name"
REASON_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
# Nodes that NodeAffinity's PreFilter dropped (matchFields metadata.name, e.g. DaemonSets).
REASON_NODE_AFFINITY_PREFILTER: Final = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
REASON_NODE_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS: Final = "Too many pods"
REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_MISSING_LABEL: Final = REASON_SPREAD + " (missing required label)"
REASON_POD_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
# Pod-level (PreFilter) rejections.
REASON_AFFINITY_CONFLICT: Final = "pod affinity terms conflict"
NO_NODES_AVAILABLE: Final = "no nodes available to schedule pods"

# Namespace name -> its labels, for affinity terms with a namespaceSelector.
NamespaceLabels = Mapping[str, Mapping[str, str]]

_FILTERED_EFFECTS: Final = frozenset({model.TaintEffect.NO_SCHEDULE, model.TaintEffect.NO_EXECUTE})
_BIND_ALL: Final = "0.0.0.0"
_LABEL_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS: Final = _LABEL_OPERATORS | {"Gt", "Lt"}
_GO_INT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_NAME_FIELD: Final = "metadata.name"

_FEASIBLE: Final[tuple[str, ...]] = ()
_INSUFFICIENT_CPU: Final = "Insufficient cpu"
_INSUFFICIENT_MEMORY: Final = "Insufficient memory"
_INSUFFICIENT_EPHEMERAL: Final = "Insufficient ephemeral-storage"
_UNSCHEDULABLE_TAINT: Final = model.Taint(
    "node.kubernetes.io/unschedulable", "", model.TaintEffect.NO_SCHEDULE
)

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def insufficient_reason(resource: str) -> str:
    """NodeResourcesFit's reason for one resource, e.g. ``Insufficient cpu``."""
    return f"Insufficient {resource}"


# --- gates (not a filter: a gated pod never enters a cycle) ----------------------------


def is_schedulable_now(pod: model.PodInfo) -> tuple[bool, str]:
    """Whether a scheduling cycle may run for ``pod`` now, and if not, why."""
    if pod.node_name:
        return False, f"pod is already bound to node {pod.node_name}"
    if pod.deleting:
        return False, "pod is being deleted"
    if pod.scheduling_gates:
        return False, f"pod has scheduling gates: {', '.join(pod.scheduling_gates)}"
    return True, ""


# --- the filters -----------------------------------------------------------------------


def node_unschedulable(pod: model.PodInfo, node: model.NodeInfo) -> str:
    # Contract: a cordoned node admits only pods tolerating unschedulable:NoSchedule.
    if node.unschedulable and not tolerates(pod.tolerations, _UNSCHEDULABLE_TAINT):
        return REASON_UNSCHEDULABLE
    return ""


def node_name(pod: model.PodInfo, node: model.NodeInfo) -> str:
    # Contract: a pod with spec.nodeName fits only that node (moot for pending pods, whose
    # nodeName is empty; is_schedulable_now already refuses bound ones).
    if pod.node_name and pod.node_name != node.name:
        return REASON_NODE_NAME
    return ""


def taint_toleration(pod: model.PodInfo, node: model.NodeInfo) -> str:
    # Contract: every NoSchedule/NoExecute taint is tolerated. PreferNoSchedule only
    # affects kube-scheduler's score.
    for taint in node.taints:
        if taint.effect in _FILTERED_EFFECTS and not tolerates(pod.tolerations, taint):
            return REASON_UNTOLERATED_TAINT
    return ""


def node_affinity(pod: model.PodInfo, node: model.NodeInfo) -> str:
    # Contract: node labels satisfy spec.nodeSelector and one required nodeSelectorTerm.
    return "" if _RequiredNodeAffinity.of(pod).matches(node) else REASON_NODE_AFFINITY


def node_ports(pod: model.PodInfo, state: model.NodeState) -> str:
    # Contract: no requested host port is in use on the node for the same protocol and an
    # overlapping host IP (equal, or either side 0.0.0.0).
    return REASON_NODE_PORTS if _ports_conflict(pod.host_ports, state.used_ports) else ""


def node_resources_fit(pod: model.PodInfo, state: model.NodeState) -> tuple[str, ...]:
    # Contract: the node has a free pod slot and room for every resource the pod requests
    # (allocatable minus requested); one reason per shortfall, in kube-scheduler's order.
    return _fit(pod.requests, _requested_scalars(pod.requests), state)


def pod_topology_spread(
    pod: model.PodInfo, state: model.NodeState, *, snapshot: model.ClusterSnapshot
) -> str:
    # Contract: placing the pod keeps every DoNotSchedule constraint within maxSkew, and
    # the node carries each constraint's topology key.
    compiled = _compile(pod)
    if isinstance(compiled, str) or not compiled.spread:
        return ""
    spread = _SpreadState.build(compiled, snapshot)
    return spread.check(state.node)


def inter_pod_affinity(
    pod: model.PodInfo,
    state: model.NodeState,
    *,
    snapshot: model.ClusterSnapshot,
    namespace_labels: NamespaceLabels | None = None,
) -> str:
    # Contract: the node's topology domain holds pods matching every required affinity
    # term (or the pod is the first of its group), none matching an anti-affinity term,
    # and no existing pod there has an anti-affinity term matching this pod.
    compiled = _compile(pod)
    if isinstance(compiled, str):
        return ""
    affinity = _AffinityState.build(compiled, snapshot, namespace_labels=namespace_labels)
    return affinity.check(state.node)


def matches_node_selector_terms(
    terms: Sequence[model.RawBody], node_labels: Mapping[str, str]
) -> bool:
    """Whether a node with ``node_labels`` matches any of a v1.NodeSelector's ``terms``, as
    a PersistentVolume's node affinity is checked (component-helpers' CheckNodeAffinity):
    against the node's labels alone, so matchFields, having no node name to compare, do
    not restrict. A term that cannot be parsed matches no node. Used by
    core.plugins.volume_binding."""
    for index, raw in enumerate(terms):
        try:
            term = _NodeSelectorTerm.parse(raw, where=f"nodeSelectorTerms[{index}]")
        except _InvalidSpecError:
            continue
        if term.matches_labels(node_labels, name=""):
            return True
    return False


# --- one pod against the whole snapshot ------------------------------------------------


def pre_filter(pod: model.PodInfo) -> str:
    """A reason that rules out every node for ``pod`` (kube-scheduler's PreFilter
    message), or "" when the pod may fit somewhere. Pass it to ``fit_error_message``."""
    compiled = _compile(pod)
    return compiled if isinstance(compiled, str) else ""


def run_filters(
    pod: model.PodInfo,
    snapshot: model.ClusterSnapshot,
    *,
    namespace_labels: NamespaceLabels | None = None,
) -> dict[model.NodeName, tuple[str, ...]]:
    """Every node's reasons for rejecting ``pod``; an empty tuple means feasible.

    ``namespace_labels`` lets affinity terms with a namespaceSelector be evaluated; for a
    namespace without known labels the answer is the restrictive one (anti-affinity
    assumed to apply, affinity assumed not to), so we never place a pod where
    kube-scheduler would refuse it.
    """
    compiled = _compile(pod)
    if isinstance(compiled, str):
        everywhere = (compiled,)
        return dict.fromkeys(snapshot.nodes, everywhere)

    # Everything that depends on the pod alone is worked out once, before the node loop.
    allowed = compiled.allowed_nodes
    tolerates_cordon = tolerates(pod.tolerations, _UNSCHEDULABLE_TAINT)
    named = pod.node_name
    required = compiled.required_affinity
    check_affinity = not required.trivial
    ports = pod.host_ports
    request = pod.requests
    scalar_names = _requested_scalars(request)
    late: list[Callable[[model.NodeInfo], str]] = []
    if compiled.spread:
        late.append(_SpreadState.build(compiled, snapshot).check)
    affinity = _AffinityState.build(compiled, snapshot, namespace_labels=namespace_labels)
    if not affinity.trivial:
        late.append(affinity.check)

    # The filters in kube-scheduler's plugin order; the first that rejects a node decides.
    result: dict[model.NodeName, tuple[str, ...]] = {}
    for name, state in snapshot.nodes.items():
        node = state.node
        if allowed is not None and name not in allowed:
            reasons = _ABSENT_FROM_PREFILTER
        elif node.unschedulable and not tolerates_cordon:
            reasons = _UNSCHEDULABLE
        elif named and named != name:
            reasons = _NODE_NAME
        elif node.taints and (taint := taint_toleration(pod, node)):
            reasons = _single(taint)
        elif check_affinity and not required.matches(node):
            reasons = _NODE_AFFINITY
        elif ports and _ports_conflict(ports, state.used_ports):
            reasons = _NODE_PORTS
        else:
            reasons = _fit(request, scalar_names, state)
            if not reasons:
                for check in late:
                    if reason := check(node):
                        reasons = _single(reason)
                        break
        result[name] = reasons
    return result


def fit_error_message(
    num_nodes: int,
    reasons: Mapping[model.NodeName, Sequence[str]],
    extra: Mapping[str, int] | None = None,
    *,
    pre_filter_msg: str = "",
) -> str:
    """kube-scheduler's FitError text, e.g.
    ``0/6 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu.``

    Each reason is counted once per node that reports it (a node short of cpu and memory
    counts in both), ``extra`` adds counted reasons of our own (metric thresholds), and
    the "<count> <reason>" entries are sorted as plain strings like Go's sort.Strings.
    With ``pre_filter_msg`` the message carries that pod-level reason instead of counts.
    """
    if num_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{num_nodes} nodes are available:"
    if pre_filter_msg:
        return f"{message} {pre_filter_msg}."
    counts: collections.Counter[str] = collections.Counter()
    for node_reasons in reasons.values():
        counts.update(node_reasons)
    for reason, count in (extra or {}).items():
        counts[reason] += count
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items() if count > 0)
    if histogram:
        message += f" {', '.join(histogram)}."
    return message


# --- memoisation across cycles ----------------------------------------------------


class _IdentityCache(Generic[_Key, _Value]):
    """Values derived from immutable objects (pods, node states), keyed by identity.

    Snapshots share unchanged PodInfo and NodeState objects from one cycle to the next,
    so work derived from them is done once, not once per pending pod. Each entry holds
    its object, so an id cannot be reused by another object while the entry lives.
    """

    def __init__(self, compute: Callable[[_Key], _Value], *, limit: int) -> None:
        self._compute = compute
        self._limit = limit
        self._entries: dict[int, tuple[_Key, _Value]] = {}

    def __call__(self, key: _Key) -> _Value:
        entry = self._entries.get(id(key))
        if entry is not None and entry[0] is key:
            return entry[1]
        value = self._compute(key)
        if len(self._entries) >= self._limit:
            self._entries.clear()  # crude but bounded; the next cycles refill it
        self._entries[id(key)] = (key, value)
        return value


class _MemoKey:
    """A dictionary key whose hash is computed once per cycle, not once per node."""

    __slots__ = ("_hash", "_value")

    def __init__(self, value: Hashable) -> None:
        self._value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _MemoKey):
            return NotImplemented
        return self._hash == other._hash and self._value == other._value


# --- tolerations, label selectors and node selectors -----------------------------------


def tolerates(tolerations: Sequence[model.Toleration], taint: model.Taint) -> bool:
    """Whether any toleration tolerates ``taint`` (v1.Toleration.ToleratesTaint)."""
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.key and toleration.key != taint.key:
            continue
        if toleration.operator == "Exists" or toleration.value == taint.value:
            return True
    return False


class _InvalidSpecError(ValueError):
    """A selector or constraint the API server would have rejected."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: frozenset[str]
    bound: int = 0  # the integer of Gt / Lt

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        operator = self.operator
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        number = _go_int(value) if value is not None else None
        if number is None:
            return False
        return number > self.bound if operator == "Gt" else number < self.bound


@dataclasses.dataclass(frozen=True, slots=True)
class _Selector:
    requirements: tuple[_Requirement, ...]
    nothing: bool = False  # a nil selector selects nothing; {} selects everything
    # ``requirements`` split for speed: key == value checks first, then the rest.
    equal: tuple[tuple[str, str], ...] = ()
    other: tuple[_Requirement, ...] = ()

    @classmethod
    def of(cls, requirements: Sequence[_Requirement]) -> _Selector:
        equal = tuple(
            (r.key, next(iter(r.values)))
            for r in requirements
            if r.operator == "In" and len(r.values) == 1
        )
        other = tuple(r for r in requirements if not (r.operator == "In" and len(r.values) == 1))
        return cls(tuple(requirements), False, equal, other)

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.equal:
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in self.other)


_NOTHING: Final = _Selector((), nothing=True)


def _go_int(text: str) -> int | None:
    # strconv.ParseInt(text, 10, 64); Python's int() would also accept "1_000" and " 1".
    if _GO_INT.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _requirement(raw: object, *, operators: frozenset[str], where: str) -> _Requirement:
    if not isinstance(raw, Mapping):
        raise _InvalidSpecError(f"{where}: must be an object")
    key = raw.get("key")
    operator = raw.get("operator")
    values = raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise _InvalidSpecError(f"{where}.key: must be a non-empty string")
    if operator not in operators:
        raise _InvalidSpecError(f"{where}.operator: {operator!r} is not a valid operator")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _InvalidSpecError(f"{where}.values: must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise _InvalidSpecError(f"{where}.values: must be non-empty for {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise _InvalidSpecError(f"{where}.values: must be empty for {operator}")
    bound = 0
    if operator in ("Gt", "Lt"):
        number = _go_int(values[0]) if len(values) == 1 else None
        if number is None:
            raise _InvalidSpecError(f"{where}.values: {operator} needs one integer")
        bound = number
    return _Requirement(key, str(operator), frozenset(values), bound)


def _label_selector(raw: object, *, where: str) -> _Selector:
    # metav1.LabelSelectorAsSelector: nil selects nothing, {} selects everything.
    if raw is None:
        return _NOTHING
    if not isinstance(raw, Mapping):
        raise _InvalidSpecError(f"{where}: must be an object")
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()
    ):
        raise _InvalidSpecError(f"{where}.matchLabels: must map strings to strings")
    if not isinstance(expressions, list):
        raise _InvalidSpecError(f"{where}.matchExpressions: must be a list")
    requirements = [
        _Requirement(key, "In", frozenset((value,))) for key, value in sorted(match_labels.items())
    ]
    requirements.extend(
        _requirement(item, operators=_LABEL_OPERATORS, where=f"{where}.matchExpressions[{i}]")
        for i, item in enumerate(expressions)
    )
    return _Selector.of(requirements)


@dataclasses.dataclass(frozen=True, slots=True)
class _NodeSelectorTerm:
    labels: tuple[_Requirement, ...] | None  # None: the term has no matchExpressions
    fields: tuple[tuple[str, bool, str], ...] | None  # (field, equal?, value)

    @classmethod
    def parse(cls, raw: object, *, where: str) -> _NodeSelectorTerm:
        if not isinstance(raw, Mapping):
            raise _InvalidSpecError(f"{where}: must be an object")
        expressions = raw.get("matchExpressions") or []
        field_items = raw.get("matchFields") or []
        if not isinstance(expressions, list) or not isinstance(field_items, list):
            raise _InvalidSpecError(f"{where}: matchExpressions/matchFields must be lists")
        labels = tuple(
            _requirement(item, operators=_NODE_OPERATORS, where=f"{where}.matchExpressions[{i}]")
            for i, item in enumerate(expressions)
        )
        fields: list[tuple[str, bool, str]] = []
        for i, item in enumerate(field_items):
            # Field selectors support only In / NotIn with exactly one value.
            requirement = _requirement(
                item, operators=frozenset({"In", "NotIn"}), where=f"{where}.matchFields[{i}]"
            )
            if len(requirement.values) != 1:
                raise _InvalidSpecError(f"{where}.matchFields[{i}].values: must have one value")
            (value,) = requirement.values
            fields.append((requirement.key, requirement.operator == "In", value))
        return cls(labels or None, tuple(fields) or None)

    def matches(self, node: model.NodeInfo) -> bool:
        return self.matches_labels(node.labels, name=node.name)

    def matches_labels(self, labels: Mapping[str, str], *, name: str) -> bool:
        # An empty term selects no node.
        if self.labels is None and self.fields is None:
            return False
        if self.labels is not None and not all(r.matches(labels) for r in self.labels):
            return False
        # Without a name a node has no fields, and component-helpers skips matchFields.
        if self.fields is not None and name:
            for field, equal, value in self.fields:
                actual = name if field == _NAME_FIELD else ""
                if (actual == value) != equal:
                    return False
        return True


@dataclasses.dataclass(frozen=True, slots=True)
class _RequiredNodeAffinity:
    """spec.nodeSelector AND (any of the required nodeSelectorTerms)."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[_NodeSelectorTerm, ...] | None  # None: no required node affinity

    @classmethod
    def of(cls, pod: model.PodInfo) -> _RequiredNodeAffinity:
        terms: list[_NodeSelectorTerm] = []
        for index, raw in enumerate(pod.required_node_affinity):
            try:
                terms.append(_NodeSelectorTerm.parse(raw, where=f"nodeSelectorTerms[{index}]"))
            except _InvalidSpecError:
                # kube-scheduler skips terms it cannot parse; as terms are ORed, an invalid
                # term simply never matches.
                continue
        return cls(
            selector=tuple(pod.node_selector.items()),
            terms=tuple(terms) if pod.required_node_affinity else None,
        )

    @property
    def trivial(self) -> bool:
        return not self.selector and self.terms is None

    def matches(self, node: model.NodeInfo) -> bool:
        labels = node.labels
        for key, value in self.selector:
            if labels.get(key) != value:
                return False
        if self.terms is None:
            return True
        return any(term.matches(node) for term in self.terms)


def _prefilter_node_names(pod: model.PodInfo) -> frozenset[str] | None:
    # NodeAffinity PreFilter: when every required term pins node names with matchFields
    # metadata.name In [...], only those nodes are evaluated at all.
    if not pod.required_node_affinity:
        return None
    names: set[str] = set()
    for term in pod.required_node_affinity:
        term_names: set[str] | None = None
        fields = term.get("matchFields") if isinstance(term, Mapping) else None
        for requirement in fields if isinstance(fields, list) else ():
            if not isinstance(requirement, Mapping):
                continue
            values = requirement.get("values")
            if (
                requirement.get("key") == _NAME_FIELD
                and requirement.get("operator") == "In"
                and isinstance(values, list)
            ):
                found = {v for v in values if isinstance(v, str)}
                term_names = found if term_names is None else term_names & found
        if term_names is None:
            return None  # this term admits any node, and terms are ORed
        names |= term_names
    return frozenset(names)


# --- resources -------------------------------------------------------------------------


def _fit(
    request: model.Resources, scalar_names: tuple[str, ...], state: model.NodeState
) -> tuple[str, ...]:
    allocatable = state.node.allocatable
    used = state.requested
    # Only what the pod asks for is checked (request > 0), so an over-committed node
    # (allocatable shrank below what is requested) still takes pods that do not need it.
    too_many = used.pods + 1 > allocatable.pods
    cpu = request.milli_cpu > 0 and request.milli_cpu > allocatable.milli_cpu - used.milli_cpu
    memory = request.memory > 0 and request.memory > allocatable.memory - used.memory
    ephemeral = request.ephemeral_storage > 0 and (
        request.ephemeral_storage > allocatable.ephemeral_storage - used.ephemeral_storage
    )
    scalars = (
        [
            name
            for name in scalar_names
            if request.scalar[name] > allocatable.scalar.get(name, 0) - used.scalar.get(name, 0)
        ]
        if scalar_names
        else None
    )
    if not (too_many or cpu or memory or ephemeral or scalars):
        return _FEASIBLE  # the common case allocates nothing
    flagged = (
        (too_many, REASON_TOO_MANY_PODS),
        (cpu, _INSUFFICIENT_CPU),
        (memory, _INSUFFICIENT_MEMORY),
        (ephemeral, _INSUFFICIENT_EPHEMERAL),
    )
    return (
        *(reason for failed, reason in flagged if failed),
        *(insufficient_reason(name) for name in scalars or ()),
    )


def _requested_scalars(request: model.Resources) -> tuple[str, ...]:
    # Zero requests are never short (kube-scheduler skips them); names sorted for a stable
    # order, where kube-scheduler follows Go's random map order.
    return tuple(sorted(name for name, amount in request.scalar.items() if amount > 0))


# --- ports -----------------------------------------------------------------------------


def _ports_conflict(
    wanted: Sequence[model.HostPort], used: frozenset[model.HostPort] | Sequence[model.HostPort]
) -> bool:
    # HostPortInfo.CheckConflict: same protocol and port, and the host IPs overlap.
    for want in wanted:
        if want.port <= 0:
            continue
        want_ip = want.host_ip or _BIND_ALL
        want_protocol = want.protocol or "TCP"
        for have in used:
            if have.port != want.port or (have.protocol or "TCP") != want_protocol:
                continue
            have_ip = have.host_ip or _BIND_ALL
            if _BIND_ALL in (want_ip, have_ip) or want_ip == have_ip:
                return True
    return False


# --- pod topology spread ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _SpreadConstraint:
    max_skew: int
    topology_key: str
    selector: _Selector
    min_domains: int
    honor_node_affinity: bool  # nodeAffinityPolicy, default Honor
    honor_node_taints: bool  # nodeTaintsPolicy, default Ignore

    @classmethod
    def parse(cls, raw: object, pod: model.PodInfo, *, where: str) -> _SpreadConstraint | None:
        if not isinstance(raw, Mapping):
            raise _InvalidSpecError(f"{where}: must be an object")
        if raw.get("whenUnsatisfiable") != "DoNotSchedule":
            return None  # ScheduleAnyway only affects kube-scheduler's score
        max_skew = raw.get("maxSkew")
        key = raw.get("topologyKey")
        min_domains = raw.get("minDomains", 1)
        if min_domains is None:
            min_domains = 1
        if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew < 1:
            raise _InvalidSpecError(f"{where}.maxSkew: must be a positive integer")
        if not isinstance(key, str) or not key:
            raise _InvalidSpecError(f"{where}.topologyKey: must be a non-empty string")
        if isinstance(min_domains, bool) or not isinstance(min_domains, int) or min_domains < 1:
            raise _InvalidSpecError(f"{where}.minDomains: must be a positive integer")
        selector = _label_selector(raw.get("labelSelector"), where=f"{where}.labelSelector")
        selector = _merge_match_label_keys(selector, raw.get("matchLabelKeys"), pod, where=where)
        return cls(
            max_skew=max_skew,
            topology_key=key,
            selector=selector,
            min_domains=min_domains,
            honor_node_affinity=raw.get("nodeAffinityPolicy", "Honor") != "Ignore",
            honor_node_taints=raw.get("nodeTaintsPolicy", "Ignore") == "Honor",
        )


def _merge_match_label_keys(
    selector: _Selector, keys: object, pod: model.PodInfo, *, where: str
) -> _Selector:
    # matchLabelKeys: the pod's own values of those labels narrow the selector (a
    # selector that selects nothing stays so, as in kube-scheduler).
    if keys is None:
        return selector
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _InvalidSpecError(f"{where}.matchLabelKeys: must be a list of strings")
    if selector.nothing:
        return selector
    added = tuple(
        _Requirement(key, "In", frozenset((pod.labels[key],))) for key in keys if key in pod.labels
    )
    if not added:
        return selector
    return _Selector.of(added + selector.requirements)


@dataclasses.dataclass(slots=True)
class _SpreadState:
    """Matching pods per topology value for each constraint, and the global minimums."""

    constraints: tuple[_SpreadConstraint, ...]
    counts: list[dict[str, int]]
    minimums: list[int]
    self_match: list[int]

    @classmethod
    def build(cls, compiled: _CompiledPod, snapshot: model.ClusterSnapshot) -> _SpreadState:
        pod = compiled.pod
        constraints = compiled.spread
        keys = tuple(c.topology_key for c in constraints)
        counts: list[dict[str, int]] = [{} for _ in constraints]
        honors_affinity = any(c.honor_node_affinity for c in constraints)
        memo_keys = [_MemoKey((c.selector, pod.namespace)) for c in constraints]
        for state in snapshot.nodes.values():
            node = state.node
            labels = node.labels
            # Only nodes carrying every constraint's key form domains.
            if not all(key in labels for key in keys):
                continue
            affinity_ok = not honors_affinity or compiled.required_affinity.matches(node)
            for index, constraint in enumerate(constraints):
                if constraint.honor_node_affinity and not affinity_ok:
                    continue
                if constraint.honor_node_taints and taint_toleration(pod, node):
                    continue
                value = labels[constraint.topology_key]
                bucket = counts[index]
                bucket[value] = bucket.get(value, 0) + _count_matching(
                    state, constraint.selector, namespace=pod.namespace, key=memo_keys[index]
                )
        minimums = [
            # Fewer eligible domains than minDomains: the global minimum counts as 0.
            0 if len(bucket) < c.min_domains else min(bucket.values())
            for c, bucket in zip(constraints, counts, strict=True)
        ]
        self_match = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        return cls(constraints, counts, minimums, self_match)

    def check(self, node: model.NodeInfo) -> str:
        labels = node.labels
        for index, constraint in enumerate(self.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return REASON_SPREAD_MISSING_LABEL
            matching = self.counts[index].get(value, 0)
            skew = matching + self.self_match[index] - self.minimums[index]
            if skew > constraint.max_skew:
                return REASON_SPREAD
        return ""


def _count_matching(
    state: model.NodeState, selector: _Selector, *, namespace: str, key: _MemoKey
) -> int:
    # countPodsMatchSelector: an empty selector counts nothing; terminating pods and other
    # namespaces are skipped. Replicas of one workload share the selector, so the count of
    # an unchanged node is taken once (``key`` stands for (selector, namespace)).
    if selector.empty or selector.nothing:
        return 0
    memo = _spread_counts(state)
    count = memo.get(key)
    if count is None:
        count = memo[key] = sum(
            1
            for p in state.pods
            if p.namespace == namespace and not p.deleting and selector.matches(p.labels)
        )
    return count


_spread_counts: Final[_IdentityCache[model.NodeState, dict[_MemoKey, int]]] = _IdentityCache(
    lambda _state: {}, limit=50_000
)


# --- inter-pod affinity ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _PodAffinityTerm:
    namespaces: frozenset[str]
    namespace_selector: _Selector
    selector: _Selector
    topology_key: str

    @classmethod
    def parse(cls, raw: object, *, owner_namespace: str, where: str) -> _PodAffinityTerm:
        if not isinstance(raw, Mapping):
            raise _InvalidSpecError(f"{where}: must be an object")
        key = raw.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise _InvalidSpecError(f"{where}.topologyKey: must be a non-empty string")
        namespaces = raw.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            raise _InvalidSpecError(f"{where}.namespaces: must be a list of strings")
        raw_ns_selector = raw.get("namespaceSelector")
        if not namespaces and raw_ns_selector is None:
            namespaces = [owner_namespace]  # the default: the term owner's namespace
        return cls(
            namespaces=frozenset(namespaces),
            namespace_selector=_label_selector(raw_ns_selector, where=f"{where}.namespaceSelector"),
            selector=_label_selector(raw.get("labelSelector"), where=f"{where}.labelSelector"),
            topology_key=key,
        )

    def matches(
        self, pod: model.PodInfo, namespace_labels: NamespaceLabels | None, *, unknown: bool
    ) -> bool:
        """Whether ``pod`` is in scope of this term; ``unknown`` answers for a namespace
        whose labels we do not know."""
        if pod.namespace not in self.namespaces:
            ns_selector = self.namespace_selector
            if ns_selector.nothing:
                return False
            if not ns_selector.empty:
                labels = None if namespace_labels is None else namespace_labels.get(pod.namespace)
                if labels is None:
                    if not unknown:
                        return False
                elif not ns_selector.matches(labels):
                    return False
        return self.selector.matches(pod.labels)


def _affinity_terms(
    raw_terms: Sequence[model.RawBody], *, owner_namespace: str, where: str
) -> tuple[_PodAffinityTerm, ...]:
    return tuple(
        _PodAffinityTerm.parse(raw, owner_namespace=owner_namespace, where=f"{where}[{index}]")
        for index, raw in enumerate(raw_terms)
    )


def _parse_existing_anti_affinity(pod: model.PodInfo) -> tuple[_PodAffinityTerm, ...]:
    try:
        return _affinity_terms(pod.pod_anti_affinity, owner_namespace=pod.namespace, where="")
    except _InvalidSpecError:
        # kube-scheduler drops the terms of an existing pod it cannot parse.
        return ()


_existing_anti_affinity: Final = _IdentityCache(_parse_existing_anti_affinity, limit=200_000)


def _collect_node_anti_affinity(state: model.NodeState) -> tuple[_PodAffinityTerm, ...]:
    return tuple(
        term for p in state.pods if p.pod_anti_affinity for term in _existing_anti_affinity(p)
    )


# The anti-affinity terms of every pod on a node; most nodes have none.
_node_anti_affinity: Final = _IdentityCache(_collect_node_anti_affinity, limit=50_000)


def _match_key(
    terms: tuple[_PodAffinityTerm, ...], namespace_labels: NamespaceLabels | None, *, unknown: bool
) -> _MemoKey | None:
    """The memo key of a question about ``terms``, or None when the answer depends on
    namespace labels (which are not part of the key)."""
    if namespace_labels is not None and not all(
        t.namespace_selector.nothing or t.namespace_selector.empty for t in terms
    ):
        return None
    return _MemoKey((terms, unknown))


def _node_has_match(
    state: model.NodeState,
    terms: tuple[_PodAffinityTerm, ...],
    namespace_labels: NamespaceLabels | None,
    *,
    unknown: bool,
    key: _MemoKey | None,
) -> bool:
    """Whether some pod on the node is in scope of every one of ``terms``."""
    memo = None if key is None else _affinity_matches(state)
    if memo is not None and (found := memo.get(key)) is not None:
        return found
    found = any(
        all(t.matches(other, namespace_labels, unknown=unknown) for t in terms)
        for other in state.pods
    )
    if memo is not None:
        memo[key] = found
    return found


_affinity_matches: Final[_IdentityCache[model.NodeState, dict[_MemoKey | None, bool]]] = (
    _IdentityCache(lambda _state: {}, limit=50_000)
)


@dataclasses.dataclass(slots=True)
class _AffinityState:
    """Topology domains where existing pods meet the incoming pod's terms, and vice versa."""

    affinity_terms: tuple[_PodAffinityTerm, ...]
    anti_affinity_terms: tuple[_PodAffinityTerm, ...]
    affinity_domains: set[tuple[str, str]]  # pods matching all affinity terms live here
    anti_affinity_domains: set[tuple[str, str]]  # pods matching an anti-affinity term
    existing_anti_affinity: dict[str, set[str]]  # key -> values repelling the pod
    matches_itself: bool  # the first-pod-of-a-group exception applies

    @classmethod
    def build(
        cls,
        compiled: _CompiledPod,
        snapshot: model.ClusterSnapshot,
        *,
        namespace_labels: NamespaceLabels | None,
    ) -> _AffinityState:
        pod = compiled.pod
        affinity_terms = compiled.affinity
        anti_terms = compiled.anti_affinity
        affinity_domains: set[tuple[str, str]] = set()
        anti_domains: set[tuple[str, str]] = set()
        existing: dict[str, set[str]] = {}
        scan_every_pod = bool(affinity_terms or anti_terms)
        affinity_key = _match_key(affinity_terms, namespace_labels, unknown=False)
        anti_keys = [_match_key((t,), namespace_labels, unknown=True) for t in anti_terms]
        for state in snapshot.nodes.values():
            labels = state.node.labels
            for term in _node_anti_affinity(state):
                value = labels.get(term.topology_key)
                if value is not None and term.matches(pod, namespace_labels, unknown=True):
                    existing.setdefault(term.topology_key, set()).add(value)
            if not scan_every_pod:
                continue
            # Some pod here matches all affinity terms: the node's domains have the group.
            if affinity_terms and _node_has_match(
                state, affinity_terms, namespace_labels, unknown=False, key=affinity_key
            ):
                for term in affinity_terms:
                    value = labels.get(term.topology_key)
                    if value is not None:
                        affinity_domains.add((term.topology_key, value))
            for term, anti_key in zip(anti_terms, anti_keys, strict=True):
                value = labels.get(term.topology_key)
                if value is not None and _node_has_match(
                    state, (term,), namespace_labels, unknown=True, key=anti_key
                ):
                    anti_domains.add((term.topology_key, value))
        matches_itself = bool(affinity_terms) and all(
            t.matches(pod, namespace_labels, unknown=False) for t in affinity_terms
        )
        return cls(
            affinity_terms, anti_terms, affinity_domains, anti_domains, existing, matches_itself
        )

    @property
    def trivial(self) -> bool:
        return not (self.affinity_terms or self.anti_affinity_terms or self.existing_anti_affinity)

    def check(self, node: model.NodeInfo) -> str:
        labels = node.labels
        pods_exist = True
        for term in self.affinity_terms:
            value = labels.get(term.topology_key)
            if value is None:
                return REASON_POD_AFFINITY  # all topology labels must exist on the node
            if (term.topology_key, value) not in self.affinity_domains:
                pods_exist = False
        # The first pod of a group whose affinity selects itself may start anywhere that
        # has the topology keys, as long as no pod anywhere matches the terms yet.
        if not pods_exist and not (not self.affinity_domains and self.matches_itself):
            return REASON_POD_AFFINITY
        for term in self.anti_affinity_terms:
            value = labels.get(term.topology_key)
            if value is not None and (term.topology_key, value) in self.anti_affinity_domains:
                return REASON_POD_ANTI_AFFINITY
        for key, values in self.existing_anti_affinity.items():
            if labels.get(key) in values:
                return REASON_EXISTING_ANTI_AFFINITY
        return ""


# --- shared with the score plugins (core.plugins.kube_scores) ----------------------------
# The score plugins read the same selectors, terms and counts as the filters: one parser,
# one matcher, one count for each (CONVENTIONS: each rule written once).

InvalidSpecError = _InvalidSpecError
Selector = _Selector
NodeSelectorTerm = _NodeSelectorTerm
PodAffinityTerm = _PodAffinityTerm
IdentityCache = _IdentityCache


def label_selector(raw: object, *, where: str) -> _Selector:
    """metav1.LabelSelectorAsSelector: nil selects nothing, {} everything; raises
    ``InvalidSpecError`` for what the API server would reject."""
    return _label_selector(raw, where=where)


def merge_match_label_keys(
    selector: _Selector, keys: object, pod: model.PodInfo, *, where: str
) -> _Selector:
    """A spread constraint's selector narrowed by its matchLabelKeys (the pod's values)."""
    return _merge_match_label_keys(selector, keys, pod, where=where)


def required_node_affinity(pod: model.PodInfo) -> Callable[[model.NodeInfo], bool] | None:
    """Whether a node matches the pod's nodeSelector and required node affinity; None
    when the pod has neither (every node matches)."""
    required = _RequiredNodeAffinity.of(pod)
    return None if required.trivial else required.matches


def matching_counter(selector: _Selector, *, namespace: str) -> Callable[[model.NodeState], int]:
    """countPodsMatchSelector for one selector: pods on a node of ``namespace``, not
    terminating, that ``selector`` selects (an empty selector counts none)."""
    key = _MemoKey((selector, namespace))
    return lambda state: _count_matching(state, selector, namespace=namespace, key=key)


# --- compiling a pod once per cycle ----------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _CompiledPod:
    pod: model.PodInfo
    required_affinity: _RequiredNodeAffinity
    allowed_nodes: frozenset[str] | None  # NodeAffinity PreFilter result; None = all
    spread: tuple[_SpreadConstraint, ...]
    affinity: tuple[_PodAffinityTerm, ...]
    anti_affinity: tuple[_PodAffinityTerm, ...]


def _compile(pod: model.PodInfo) -> _CompiledPod | str:
    """The pod's filter inputs, or the PreFilter reason that rules out every node."""
    allowed = _prefilter_node_names(pod)
    if allowed is not None and not allowed:
        return REASON_AFFINITY_CONFLICT
    if pod.unsupported:
        return (
            f"pod needs {', '.join(pod.unsupported)}, which metricsched does not support; "
            "use the default scheduler for it"
        )
    spread: list[_SpreadConstraint] = []
    try:
        for index, raw in enumerate(pod.topology_spread):
            where = f"topologySpreadConstraints[{index}]"
            if (constraint := _SpreadConstraint.parse(raw, pod, where=where)) is not None:
                spread.append(constraint)
    except _InvalidSpecError as error:
        return f"get constraints from pod: {error}"
    try:
        affinity = _affinity_terms(
            pod.pod_affinity, owner_namespace=pod.namespace, where="podAffinity"
        )
        anti_affinity = _affinity_terms(
            pod.pod_anti_affinity, owner_namespace=pod.namespace, where="podAntiAffinity"
        )
    except _InvalidSpecError as error:
        return f"parsing pod: {error}"
    return _CompiledPod(
        pod=pod,
        required_affinity=_RequiredNodeAffinity.of(pod),
        allowed_nodes=allowed,
        spread=tuple(spread),
        affinity=tuple(map(_as_merged_by_kube, affinity)),
        anti_affinity=tuple(map(_as_merged_by_kube, anti_affinity)),
    )


_EVERY_NAMESPACE: Final = _Selector(())


def _as_merged_by_kube(term: _PodAffinityTerm) -> _PodAffinityTerm:
    """The incoming pod's term as kube-scheduler v1.35.4's InterPodAffinity uses it.

    Its PreFilter merges the namespaces a namespaceSelector selects into the term's
    namespaces and means to clear the selector, but clears a copy (the term is passed by
    value); the selector is then matched against empty labels (``Matches(pod, nil)``) for
    every pod. A selector that matches empty labels (``DoesNotExist``, ``NotIn``) so puts
    pods of every namespace in scope of the incoming pod's required terms, the pod's own
    included (existing pods' anti-affinity terms are not affected)."""
    selector = term.namespace_selector
    if selector.nothing or selector.empty or not selector.matches({}):
        return term
    return dataclasses.replace(term, namespace_selector=_EVERY_NAMESPACE)


_ABSENT_FROM_PREFILTER: Final[tuple[str, ...]] = (REASON_NODE_AFFINITY_PREFILTER,)
_UNSCHEDULABLE: Final[tuple[str, ...]] = (REASON_UNSCHEDULABLE,)
_NODE_NAME: Final[tuple[str, ...]] = (REASON_NODE_NAME,)
_NODE_AFFINITY: Final[tuple[str, ...]] = (REASON_NODE_AFFINITY,)
_NODE_PORTS: Final[tuple[str, ...]] = (REASON_NODE_PORTS,)


@functools.lru_cache(maxsize=4096)
def _single(reason: str) -> tuple[str, ...]:
    # Shared one-element tuples: rejected nodes reuse them instead of allocating.
    return (reason,) if reason else _FEASIBLE
