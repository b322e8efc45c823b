"""Selectors and terms of pod specs, parsed once into typed values.

Label selectors (metav1.LabelSelector), node selector terms (v1.NodeSelectorTerm), a
pod's required node affinity, tolerations and pod (anti-)affinity terms, with the
API server's validation (``InvalidSpecError`` for what it would reject) and
kube-scheduler's matching rules (k8s.io/component-helpers, apimachinery labels, v1.35).
The filter and score plugins (core/plugins) share these: one parser and one matcher for
each (CONVENTIONS: each rule written once). Purely computational: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Final

from metricsched.core import model, versions

# Namespace name -> its labels, for affinity terms with a namespaceSelector.
NamespaceLabels = Mapping[str, Mapping[str, str]]

_LABEL_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS: Final = _LABEL_OPERATORS | {"Gt", "Lt"}
_GO_INT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_NAME_FIELD: Final = "metadata.name"


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
            term = NodeSelectorTerm.parse(raw, where=f"nodeSelectorTerms[{index}]")
        except InvalidSpecError:
            continue
        if term.matches_labels(node_labels, name=""):
            return True
    return False


# --- one pod against the whole snapshot ------------------------------------------------


class MemoKey:
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
        if not isinstance(other, MemoKey):
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


class InvalidSpecError(ValueError):
    """A selector or constraint the API server would have rejected."""


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
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
        number = go_int(value) if value is not None else None
        if number is None:
            return False
        return number > self.bound if operator == "Gt" else number < self.bound


@dataclasses.dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...]
    nothing: bool = False  # a nil selector selects nothing; {} selects everything
    # ``requirements`` split for speed: key == value checks first, then the rest.
    equal: tuple[tuple[str, str], ...] = ()
    other: tuple[Requirement, ...] = ()

    @classmethod
    def of(cls, requirements: Sequence[Requirement]) -> Selector:
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


NOTHING: Final = Selector((), nothing=True)


def go_int(text: str) -> int | None:
    # strconv.ParseInt(text, 10, 64); Python's int() would also accept "1_000" and " 1".
    if _GO_INT.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def parse_requirement(raw: object, *, operators: frozenset[str], where: str) -> Requirement:
    if not isinstance(raw, Mapping):
        raise InvalidSpecError(f"{where}: must be an object")
    key = raw.get("key")
    operator = raw.get("operator")
    values = raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise InvalidSpecError(f"{where}.key: must be a non-empty string")
    if operator not in operators:
        raise InvalidSpecError(f"{where}.operator: {operator!r} is not a valid operator")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidSpecError(f"{where}.values: must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise InvalidSpecError(f"{where}.values: must be non-empty for {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidSpecError(f"{where}.values: must be empty for {operator}")
    bound = 0
    if operator in ("Gt", "Lt"):
        number = go_int(values[0]) if len(values) == 1 else None
        if number is None:
            raise InvalidSpecError(f"{where}.values: {operator} needs one integer")
        bound = number
    return Requirement(key, str(operator), frozenset(values), bound)


def label_selector(raw: object, *, where: str) -> Selector:
    # metav1.LabelSelectorAsSelector: nil selects nothing, {} selects everything.
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise InvalidSpecError(f"{where}: must be an object")
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()
    ):
        raise InvalidSpecError(f"{where}.matchLabels: must map strings to strings")
    if not isinstance(expressions, list):
        raise InvalidSpecError(f"{where}.matchExpressions: must be a list")
    requirements = [
        Requirement(key, "In", frozenset((value,))) for key, value in sorted(match_labels.items())
    ]
    requirements.extend(
        parse_requirement(item, operators=_LABEL_OPERATORS, where=f"{where}.matchExpressions[{i}]")
        for i, item in enumerate(expressions)
    )
    return Selector.of(requirements)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    labels: tuple[Requirement, ...] | None  # None: the term has no matchExpressions
    fields: tuple[tuple[str, bool, str], ...] | None  # (field, equal?, value)

    @classmethod
    def parse(cls, raw: object, *, where: str) -> NodeSelectorTerm:
        if not isinstance(raw, Mapping):
            raise InvalidSpecError(f"{where}: must be an object")
        expressions = raw.get("matchExpressions") or []
        field_items = raw.get("matchFields") or []
        if not isinstance(expressions, list) or not isinstance(field_items, list):
            raise InvalidSpecError(f"{where}: matchExpressions/matchFields must be lists")
        labels = tuple(
            parse_requirement(
                item, operators=_NODE_OPERATORS, where=f"{where}.matchExpressions[{i}]"
            )
            for i, item in enumerate(expressions)
        )
        fields: list[tuple[str, bool, str]] = []
        for i, item in enumerate(field_items):
            # Field selectors support only In / NotIn with exactly one value.
            requirement = parse_requirement(
                item, operators=frozenset({"In", "NotIn"}), where=f"{where}.matchFields[{i}]"
            )
            if len(requirement.values) != 1:
                raise InvalidSpecError(f"{where}.matchFields[{i}].values: must have one value")
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
class RequiredNodeAffinity:
    """spec.nodeSelector AND (any of the required nodeSelectorTerms)."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[NodeSelectorTerm, ...] | None  # None: no required node affinity

    @classmethod
    def of(cls, pod: model.PodInfo) -> RequiredNodeAffinity:
        terms: list[NodeSelectorTerm] = []
        for index, raw in enumerate(pod.required_node_affinity):
            try:
                terms.append(NodeSelectorTerm.parse(raw, where=f"nodeSelectorTerms[{index}]"))
            except InvalidSpecError:
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


def prefilter_node_names(pod: model.PodInfo) -> frozenset[str] | None:
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


def merge_match_label_keys(
    selector: Selector, keys: object, pod: model.PodInfo, *, where: str
) -> Selector:
    # matchLabelKeys: the pod's own values of those labels narrow the selector (a
    # selector that selects nothing stays so, as in kube-scheduler).
    if keys is None:
        return selector
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InvalidSpecError(f"{where}.matchLabelKeys: must be a list of strings")
    if selector.nothing:
        return selector
    added = tuple(
        Requirement(key, "In", frozenset((pod.labels[key],))) for key in keys if key in pod.labels
    )
    if not added:
        return selector
    return Selector.of(added + selector.requirements)


@dataclasses.dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    namespaces: frozenset[str]
    namespace_selector: Selector
    selector: Selector
    topology_key: str

    @classmethod
    def parse(cls, raw: object, *, owner_namespace: str, where: str) -> PodAffinityTerm:
        if not isinstance(raw, Mapping):
            raise InvalidSpecError(f"{where}: must be an object")
        key = raw.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InvalidSpecError(f"{where}.topologyKey: must be a non-empty string")
        namespaces = raw.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            raise InvalidSpecError(f"{where}.namespaces: must be a list of strings")
        raw_ns_selector = raw.get("namespaceSelector")
        if not namespaces and raw_ns_selector is None:
            namespaces = [owner_namespace]  # the default: the term owner's namespace
        return cls(
            namespaces=frozenset(namespaces),
            namespace_selector=label_selector(raw_ns_selector, where=f"{where}.namespaceSelector"),
            selector=label_selector(raw.get("labelSelector"), where=f"{where}.labelSelector"),
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


def affinity_terms(
    raw_terms: Sequence[model.RawBody], *, owner_namespace: str, where: str
) -> tuple[PodAffinityTerm, ...]:
    return tuple(
        PodAffinityTerm.parse(raw, owner_namespace=owner_namespace, where=f"{where}[{index}]")
        for index, raw in enumerate(raw_terms)
    )


EVERY_NAMESPACE: Final = Selector(())


def as_merged_by_kube(term: PodAffinityTerm, rules: versions.Rules) -> PodAffinityTerm:
    """The incoming pod's term as kube-scheduler's InterPodAffinity of ``rules`` uses it.

    From v1.37 (``Rules.namespace_selector_labels``) the term as written: its PreFilter
    merges the namespaces the selector selects (by their labels) and clears the selector.
    To v1.36:

    Its PreFilter merges the namespaces a namespaceSelector selects into the term's
    namespaces and means to clear the selector, but clears a copy (the term is passed by
    value); the selector is then matched against empty labels (``Matches(pod, nil)``) for
    every pod. A selector that matches empty labels (``DoesNotExist``, ``NotIn``) so puts
    pods of every namespace in scope of the incoming pod's required terms, the pod's own
    included (existing pods' anti-affinity terms are not affected)."""
    if rules.namespace_selector_labels:
        return term
    selector = term.namespace_selector
    if selector.nothing or selector.empty or not selector.matches({}):
        return term
    return dataclasses.replace(term, namespace_selector=EVERY_NAMESPACE)
