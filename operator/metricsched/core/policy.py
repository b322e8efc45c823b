"""SchedulingPolicy: parsing, defaults, validation, and the choice of a policy for a pod.

``policy_from_body`` turns a raw SchedulingPolicy (camelCase, as the API or a YAML file
gives it) into a ``model.Policy``. It applies the CRD's defaults itself, because bodies do
not always pass through the API server's defaulting (files given to ``metricsched
explain``, objects stored before a CRD upgrade, tests), and it reports what the schema
cannot catch or what bypassed it as a ``PolicyError`` listing every problem found, each a
sentence a person can act on. PromQL syntax is not checked here: Prometheus tells us.

The defaults below are the same as ``crds/schedulingpolicy.yaml``'s; a unit test parses
the CRD and compares the two.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

from metricsched.core import model, quantity, selectors
from metricsched.core.plugins import kube_scores

# --- names and limits (the CRD's) ------------------------------------------------------

POLICY_LABEL: Final = "metricsched.io/policy"
"""A pod label naming the policy (in the pod's namespace) that governs the pod."""

DEFAULT_POLICY_NAME: Final = "default"

MIN_METRICS: Final = 1
MAX_METRICS: Final = 10
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 100
MIN_BURST_PENALTY: Final = 0
MAX_BURST_PENALTY: Final = 100
MAX_TOLERANCE_PERCENT: Final = 100
MAX_QUERY_LENGTH: Final = 4096
MAX_METRIC_AGE_LIMIT_S: Final = 24 * 3600.0
MAX_BURST_WINDOW_S: Final = 3600.0
MAX_THRESHOLD_OVERRIDES: Final = 16

# --- defaults (the CRD's; compared with it by tests/unit/policy/test_parsing.py) -------

DEFAULT_PRIORITY: Final = 0
DEFAULT_NODE_LABEL: Final = "node"
DEFAULT_WEIGHT: Final = 1
DEFAULT_GOAL: Final = model.Goal.MINIMIZE
DEFAULT_ON_MISSING: Final = model.OnMissing.NEUTRAL
DEFAULT_THRESHOLD_MODE: Final = model.ThresholdMode.HARD
DEFAULT_TOLERANCE_PERCENT: Final = 5
DEFAULT_MAX_METRIC_AGE: Final = "2m"
DEFAULT_BURST_PENALTY: Final = 5
DEFAULT_BURST_WINDOW: Final = "60s"
DEFAULT_ESTIMATE_FACTOR: Final = 1
DEFAULT_ESTIMATE_LEARN: Final = False
MAX_ESTIMATE_FACTOR: Final = 100
MAX_SETTLE_TIME_S: Final = 3600.0
DEFAULT_FALLBACK: Final = model.FallbackStrategy.LEAST_ALLOCATED
DEFAULT_MODE: Final = model.PolicyMode.ACTIVE
DEFAULT_DAEMON_SET_PODS: Final = model.DaemonSetPods.EXEMPT
DEFAULT_SHADOW_SCHEDULERS: Final = model.DEFAULT_SHADOW_SCHEDULERS
MAX_SHADOW_SCHEDULERS: Final = 10
DEFAULT_REBALANCE_MODE: Final = model.RebalanceMode.DRY_RUN
DEFAULT_REBALANCE_WINDOW: Final = "5m"
DEFAULT_REBALANCE_INTERVAL: Final = "1m"
DEFAULT_REBALANCE_MAX_PER_NODE: Final = 1
DEFAULT_REBALANCE_MAX_TOTAL: Final = 5
DEFAULT_REBALANCE_MIN_POD_AGE: Final = "5m"
DEFAULT_REBALANCE_WORKLOAD_INTERVAL: Final = "5m"
DEFAULT_REBALANCE_MAX_PER_WORKLOAD: Final = 1
DEFAULT_REBALANCE_EVICT_JOB_PODS: Final = False
MAX_REBALANCE_TRIGGERS: Final = 5
REBALANCE_FLOORS_S: Final[Mapping[str, float]] = {
    "window": 10.0,
    "interval": 5.0,
    "minPodAge": 5.0,
    "workloadInterval": 10.0,
}
"""The least each rebalance duration may be (the CRD's CEL rules say the same). A policy
stored before these floors existed is read at the floor, not refused: it keeps
scheduling, and moves no faster than the floor allows."""
DEFAULT_REBALANCE_MARGIN_FRACTION: Final = 0.1
"""Unset ``margin``: this fraction of the trigger value's magnitude."""
MAX_REBALANCE_DURATION_S: Final = 24 * 3600.0
MAX_REBALANCE_EVICTIONS: Final = 1000
DEFAULT_SCHEDULER_NAME: Final = "metricsched"
"""The install that serves a policy without ``spec.schedulerName`` (the chart's default)."""

# spec.kubeScores: kube-scheduler's default profile weights (v1.35), from the plugins'
# registry; ImageLocality is not computed (node image lists are not cached), so it is not
# accepted.
DEFAULT_KUBE_WEIGHTS: Final[Mapping[str, int]] = kube_scores.DEFAULT_WEIGHTS
MIN_KUBE_WEIGHT: Final = 0
MAX_KUBE_WEIGHT: Final = 100
NOT_COMPUTED_KUBE_SCORES: Final[Mapping[str, str]] = {
    "ImageLocality": "metricsched does not keep node image lists, so it cannot score it",
}

DEFAULTS: Final[Mapping[str, object]] = {
    "spec.podSelector": {},
    "spec.priority": DEFAULT_PRIORITY,
    "spec.metrics[].prometheus.nodeLabel": DEFAULT_NODE_LABEL,
    "spec.metrics[].weight": DEFAULT_WEIGHT,
    "spec.metrics[].goal": DEFAULT_GOAL.value,
    "spec.metrics[].onMissing": DEFAULT_ON_MISSING.value,
    "spec.metrics[].threshold.mode": DEFAULT_THRESHOLD_MODE.value,
    "spec.metrics[].tolerancePercent": DEFAULT_TOLERANCE_PERCENT,
    "spec.metrics[].estimate.learn": DEFAULT_ESTIMATE_LEARN,
    "spec.maxMetricAge": DEFAULT_MAX_METRIC_AGE,
    "spec.burstPenalty": DEFAULT_BURST_PENALTY,
    "spec.burstWindow": DEFAULT_BURST_WINDOW,
    "spec.fallback": {},
    "spec.fallback.strategy": DEFAULT_FALLBACK.value,
    "spec.schedulerName": DEFAULT_SCHEDULER_NAME,
    "spec.mode": DEFAULT_MODE.value,
    "spec.daemonSetPods": DEFAULT_DAEMON_SET_PODS.value,
    "spec.shadow.schedulerNames": list(DEFAULT_SHADOW_SCHEDULERS),
    "spec.kubeScores": {},
    "spec.rebalance.mode": DEFAULT_REBALANCE_MODE.value,
    "spec.rebalance.window": DEFAULT_REBALANCE_WINDOW,
    "spec.rebalance.interval": DEFAULT_REBALANCE_INTERVAL,
    "spec.rebalance.maxPerNode": DEFAULT_REBALANCE_MAX_PER_NODE,
    "spec.rebalance.maxTotal": DEFAULT_REBALANCE_MAX_TOTAL,
    "spec.rebalance.minPodAge": DEFAULT_REBALANCE_MIN_POD_AGE,
    "spec.rebalance.workloadInterval": DEFAULT_REBALANCE_WORKLOAD_INTERVAL,
    "spec.rebalance.maxPerWorkload": DEFAULT_REBALANCE_MAX_PER_WORKLOAD,
    "spec.rebalance.evictJobPods": DEFAULT_REBALANCE_EVICT_JOB_PODS,
    **{f"spec.kubeScores.{name}": weight for name, weight in DEFAULT_KUBE_WEIGHTS.items()},
}
"""Every default of the CRD's spec, by dotted path (``[]`` = each list item)."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ANNOTATION_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_DURATION = re.compile(r"([0-9]+(\.[0-9]+)?(ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_SECONDS: Final[Mapping[str, float]] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})

_E = TypeVar("_E", bound=enum.StrEnum)


class PolicyError(ValueError):
    """A SchedulingPolicy that cannot be used; ``problems`` says why, one sentence each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(self.problems))


# --- durations -------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration limited to ms, s, m, h: ``"1m30s"`` → 90.0.

    Raises ``ValueError`` for anything else (signs, spaces, ``ns``/``us``, empty).
    """
    if not _DURATION.fullmatch(text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


# --- parsing ---------------------------------------------------------------------------


class _Problems:
    """Collects problems while parsing goes on, so one error lists them all."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")


def _integer(
    raw: object,
    *,
    path: str,
    problems: _Problems,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
        value = int(raw)
    if value is None or (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            wanted = f"an integer from {low} to {high}"
        else:
            wanted = "an integer"
        problems.add(path, f"must be {wanted}, got {raw!r}")
        return None
    return value


def _number(raw: object, *, path: str, problems: _Problems) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
        if math.isfinite(value):
            return value
    problems.add(path, f"must be a finite number, got {raw!r}")
    return None


def _enum(raw: object, *, kind: type[_E], path: str, problems: _Problems) -> _E | None:
    for member in kind:
        if raw == member.value:
            return member
    allowed = ", ".join(member.value for member in kind)
    problems.add(path, f"must be one of {allowed}, got {raw!r}")
    return None


def _duration(
    raw: object, *, path: str, problems: _Problems, low_exclusive: bool, high: float
) -> float | None:
    try:
        if not isinstance(raw, str):
            raise ValueError(raw)
        seconds = parse_duration(raw)
    except ValueError:
        problems.add(path, f"must be a duration such as 2m, 60s or 1m30s, got {raw!r}")
        return None
    if (low_exclusive and seconds <= 0) or seconds > high:
        floor = "more than 0s" if low_exclusive else "at least 0s"
        problems.add(path, f"must be {floor} and at most {_format_seconds(high)}, got {raw!r}")
        return None
    return seconds


def _format_seconds(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def _mapping(raw: object, *, path: str, problems: _Problems) -> Mapping[str, Any] | None:
    if isinstance(raw, Mapping):
        return raw
    problems.add(path, f"must be an object, got {raw!r}")
    return None


def _label_selector(raw: object, *, path: str, problems: _Problems) -> model.LabelSelector:
    selector = _mapping(raw, path=path, problems=problems) or {}
    labels: dict[str, str] = {}
    raw_labels = selector.get("matchLabels") or {}
    if isinstance(raw_labels, Mapping):
        for key, value in raw_labels.items():
            if isinstance(key, str) and isinstance(value, str):
                labels[key] = value
            else:
                problems.add(f"{path}.matchLabels", f"{key!r}: keys and values must be strings")
    else:
        problems.add(f"{path}.matchLabels", f"must be an object, got {raw_labels!r}")

    expressions: list[tuple[str, str, tuple[str, ...]]] = []
    raw_expressions = selector.get("matchExpressions") or []
    if not isinstance(raw_expressions, list):
        problems.add(f"{path}.matchExpressions", f"must be a list, got {raw_expressions!r}")
        raw_expressions = []
    for index, raw_expression in enumerate(raw_expressions):
        where = f"{path}.matchExpressions[{index}]"
        expression = _mapping(raw_expression, path=where, problems=problems)
        if expression is None:
            continue
        key, operator, values = (
            expression.get("key"),
            expression.get("operator"),
            expression.get("values") or [],
        )
        if not isinstance(key, str) or not key:
            problems.add(f"{where}.key", "must be a non-empty string")
            continue
        if operator not in _SELECTOR_OPERATORS:
            allowed = ", ".join(sorted(_SELECTOR_OPERATORS))
            problems.add(f"{where}.operator", f"must be one of {allowed}, got {operator!r}")
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.add(f"{where}.values", "must be a list of strings")
            continue
        if operator in ("In", "NotIn") and not values:
            problems.add(f"{where}.values", f"operator {operator} needs at least one value")
            continue
        if operator in ("Exists", "DoesNotExist") and values:
            problems.add(f"{where}.values", f"operator {operator} takes no values")
            continue
        expressions.append((key, str(operator), tuple(values)))
    return model.LabelSelector(match_labels=labels, match_expressions=tuple(expressions))


def _source(metric: Mapping[str, Any], *, path: str, problems: _Problems) -> model.AnySource | None:
    given = [field for field in _SOURCE_FIELDS if metric.get(field) is not None]
    if len(given) != 1:
        detail = f"it has {' and '.join(given)}" if given else "it has none"
        problems.add(
            path,
            f"needs exactly one source, prometheus, nodeAnnotation or metricsServer ({detail})",
        )
        return None
    if given[0] == model.MetricsServerSource.field:
        return _metrics_server(metric[given[0]], path=f"{path}.{given[0]}", problems=problems)
    if given[0] == model.AnnotationSource.field:
        annotation = metric["nodeAnnotation"]
        if (
            not isinstance(annotation, str)
            or not _ANNOTATION_KEY.fullmatch(annotation)
            or len(annotation.rpartition("/")[0]) > 253
        ):
            problems.add(
                f"{path}.nodeAnnotation",
                f"must be an annotation key such as example.com/hourly-price, got {annotation!r}",
            )
            return None
        return model.AnnotationSource(annotation=annotation)
    prometheus = _mapping(metric["prometheus"], path=f"{path}.prometheus", problems=problems)
    if prometheus is None:
        return None
    query = prometheus.get("query")
    node_label = prometheus.get("nodeLabel", DEFAULT_NODE_LABEL)
    ok = True
    if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_LENGTH:
        problems.add(
            f"{path}.prometheus.query",
            f"must be a PromQL query of 1 to {MAX_QUERY_LENGTH} characters",
        )
        ok = False
    if not isinstance(node_label, str) or not _PROM_LABEL.fullmatch(node_label):
        problems.add(
            f"{path}.prometheus.nodeLabel",
            f"must be a Prometheus label name such as node or instance, got {node_label!r}",
        )
        ok = False
    if not ok:
        return None
    return model.PrometheusSource(query=str(query), node_label=str(node_label))


_SOURCE_FIELDS: Final = (
    model.PrometheusSource.field,
    model.AnnotationSource.field,
    model.MetricsServerSource.field,
)


def _metrics_server(
    raw: object, *, path: str, problems: _Problems
) -> model.MetricsServerSource | None:
    """``metricsServer: {resource: cpu | memory}``."""
    spec = _mapping(raw, path=path, problems=problems)
    if spec is None:
        return None
    resource = _enum(
        spec.get("resource"),
        kind=model.EstimateResource,
        path=f"{path}.resource",
        problems=problems,
    )
    return None if resource is None else model.MetricsServerSource(resource=resource)


def _threshold(
    raw: object, *, path: str, problems: _Problems
) -> tuple[float | None, float | None] | None:
    threshold = _mapping(raw, path=path, problems=problems)
    if threshold is None:
        return None
    return _bounds(threshold, path=path, problems=problems)


def _bounds(
    threshold: Mapping[str, Any], *, path: str, problems: _Problems
) -> tuple[float | None, float | None] | None:
    """``min`` and ``max`` of a threshold or of one of its overrides."""
    low = threshold.get("min")
    high = threshold.get("max")
    if low is None and high is None:
        problems.add(path, "a threshold needs min, max or both")
        return None
    low_value = None if low is None else _number(low, path=f"{path}.min", problems=problems)
    high_value = None if high is None else _number(high, path=f"{path}.max", problems=problems)
    if (low is not None and low_value is None) or (high is not None and high_value is None):
        return None
    if low_value is not None and high_value is not None and low_value > high_value:
        problems.add(path, f"min ({low_value:g}) must not be greater than max ({high_value:g})")
        return None
    return low_value, high_value


def _threshold_groups(
    raw: object,
    *,
    base: tuple[float | None, float | None],
    path: str,
    problems: _Problems,
) -> tuple[tuple[model.ThresholdOverride, ...], model.ThresholdMode | None]:
    """A threshold's ``overrides`` (per node group, first match wins; each states the
    bounds the base states, so a node group never loses or gains a side) and ``mode``."""
    threshold = raw if isinstance(raw, Mapping) else {}
    mode = _enum(
        threshold.get("mode", DEFAULT_THRESHOLD_MODE),
        kind=model.ThresholdMode,
        path=f"{path}.mode",
        problems=problems,
    )
    raw_overrides = threshold.get("overrides") or []
    if not isinstance(raw_overrides, list) or len(raw_overrides) > MAX_THRESHOLD_OVERRIDES:
        problems.add(
            f"{path}.overrides",
            f"must list at most {MAX_THRESHOLD_OVERRIDES} overrides, got {raw_overrides!r}",
        )
        return (), mode
    overrides: list[model.ThresholdOverride] = []
    for index, raw_override in enumerate(raw_overrides):
        where = f"{path}.overrides[{index}]"
        override = _mapping(raw_override, path=where, problems=problems)
        if override is None:
            continue
        if "nodeSelector" not in override:
            problems.add(f"{where}.nodeSelector", "is required (a label selector of nodes)")
            continue
        selector = _label_selector(
            override["nodeSelector"], path=f"{where}.nodeSelector", problems=problems
        )
        if not selector.match_labels and not selector.match_expressions:
            problems.add(
                f"{where}.nodeSelector",
                "needs matchLabels or matchExpressions (the threshold itself is for every node)",
            )
            continue
        bounds = _bounds(override, path=where, problems=problems)
        if bounds is None:
            continue
        if (bounds[0] is None) != (base[0] is None) or (bounds[1] is None) != (base[1] is None):
            stated = " and ".join(
                n for n, b in (("min", base[0]), ("max", base[1])) if b is not None
            )
            problems.add(where, f"must state what the threshold states: {stated}")
            continue
        overrides.append(
            model.ThresholdOverride(
                node_selector=selector, threshold_min=bounds[0], threshold_max=bounds[1]
            )
        )
    return tuple(overrides), mode


def _scale(
    metric: Mapping[str, Any], *, path: str, problems: _Problems
) -> tuple[float, float, float | None] | None:
    """``tolerance``, ``tolerancePercent`` and ``range`` of a metric (README "No herding")."""
    tolerance = _number(metric.get("tolerance", 0), path=f"{path}.tolerance", problems=problems)
    percent = _number(
        metric.get("tolerancePercent", DEFAULT_TOLERANCE_PERCENT),
        path=f"{path}.tolerancePercent",
        problems=problems,
    )
    value_range = None
    if metric.get("range") is not None:
        value_range = _number(metric["range"], path=f"{path}.range", problems=problems)
        if value_range is not None and value_range <= 0:
            problems.add(f"{path}.range", f"must be more than 0, got {value_range:g}")
            return None
    if (
        tolerance is None
        or percent is None
        or (metric.get("range") is not None and not value_range)
    ):
        return None
    if tolerance < 0:
        problems.add(f"{path}.tolerance", f"must not be negative, got {tolerance:g}")
        return None
    if not 0 <= percent <= MAX_TOLERANCE_PERCENT:
        problems.add(
            f"{path}.tolerancePercent",
            f"must be from 0 to {MAX_TOLERANCE_PERCENT}, got {percent:g}",
        )
        return None
    return tolerance, percent, value_range


MEASURED_SETTLE_S: Final = 300.0
"""A Measured estimate's settleTime when unset: an upper bound only (a pod stops counting
once its usage shows in the samples), long enough for a 5-minute rate window."""
METRICS_SERVER_SETTLE_S: Final = 120.0
"""How long a placed pod's requests count on a metricsServer metric with no estimate
declared: NodeMetrics cover a window of metrics-server's resolution (60 s by default)
ending at their timestamp, so two of them hold the pod's own usage."""
_RESOURCE_WORDS: Final = (
    (model.EstimateResource.CPU, re.compile(r"cpu", re.IGNORECASE)),
    (model.EstimateResource.MEMORY, re.compile(r"memory|\bmem_|_mem_", re.IGNORECASE)),
)
_NOT_USAGE: Final = re.compile(r"temp|thrott|pressure|psi|freq|hz\b|cores?_count", re.IGNORECASE)


def inferred_resource(
    source: model.AnySource | None,
    threshold: tuple[float | None, float | None],
) -> model.EstimateResource | None:
    """The resource a threshold-only metric measures the utilisation of, read from its
    query: "cpu" or "memory" in it (one of them, not both), nothing that says otherwise
    (temperature, throttling, pressure, frequency), and a threshold within 0..1 (a
    ratio). None: not a utilisation metric we can model (latency, errors, price). A
    metrics-server metric is its resource's utilisation by definition."""
    if isinstance(source, model.MetricsServerSource):
        return source.resource
    if not isinstance(source, model.PrometheusSource):
        return None
    if any(bound is not None and not 0.0 <= bound <= 1.0 for bound in threshold):
        return None
    query = source.query
    if _NOT_USAGE.search(query):
        return None
    found = [resource for resource, words in _RESOURCE_WORDS if words.search(query)]
    return found[0] if len(found) == 1 else None


def _estimate(
    raw: object,
    *,
    path: str,
    has_threshold: bool,
    problems: _Problems,
    inferred: model.EstimateResource | None = None,
    measured_default: bool = True,
) -> model.EstimateSpec | None:
    """``estimate`` of a metric; ``settle_s`` is -1 when unset (the policy's burstWindow
    fills it in; ``MEASURED_SETTLE_S`` for Measured). Without one, a thresholded metric
    whose query names the utilisation of cpu or memory (``inferred``) counts what pods
    measurably use (``Measured``); other metrics have none (the burst penalty stands in;
    ``Learned`` is opt-in). ``measured_default`` False (a metrics-server metric: the
    cluster may have no Prometheus to measure pods with): the default counts the pod's
    requests instead, until its usage shows in NodeMetrics (``METRICS_SERVER_SETTLE_S``)."""
    if raw is None:
        if has_threshold and inferred is not None and not measured_default:
            return model.EstimateSpec(
                source=model.EstimateFrom.REQUESTS,
                settle_s=METRICS_SERVER_SETTLE_S,
                resource=inferred,
                declared=False,
            )
        if has_threshold and inferred is not None:
            return model.EstimateSpec(
                source=model.EstimateFrom.MEASURED,
                settle_s=MEASURED_SETTLE_S,
                resource=inferred,
                declared=False,
            )
        return model.EstimateSpec(source=model.EstimateFrom.NONE, settle_s=-1.0, declared=False)
    estimate = _mapping(raw, path=path, problems=problems)
    if estimate is None:
        return None
    before = len(problems.items)
    source = _enum(
        estimate.get("from"), kind=model.EstimateFrom, path=f"{path}.from", problems=problems
    )
    settle = -1.0
    if estimate.get("settleTime") is not None:
        settle = (
            _duration(
                estimate["settleTime"],
                path=f"{path}.settleTime",
                problems=problems,
                low_exclusive=False,
                high=MAX_SETTLE_TIME_S,
            )
            or 0.0
        )
    learn = estimate.get("learn", DEFAULT_ESTIMATE_LEARN)
    if not isinstance(learn, bool):
        problems.add(f"{path}.learn", f"must be true or false, got {learn!r}")
    elif learn and source not in _DECLARED:
        problems.add(f"{path}.learn", "applies to from: Requests, Limits or Amount only")
    resource = None
    declared = source in _DECLARED
    measured = source is model.EstimateFrom.MEASURED
    if measured and settle < 0:
        settle = MEASURED_SETTLE_S
    if estimate.get("resource") is not None or declared or measured:
        resource = _enum(
            estimate.get("resource"),
            kind=model.EstimateResource,
            path=f"{path}.resource",
            problems=problems,
        )
        # Learned may name one: the metric is then that resource's utilisation ratio, and
        # the learner works in resource units (core.learning).
        learned = source is model.EstimateFrom.LEARNED
        if resource is not None and not (declared or measured or learned):
            problems.add(
                f"{path}.resource",
                "applies to from: Requests, Limits, Amount, Measured or Learned only",
            )
    factor = _number(
        estimate.get("factor", DEFAULT_ESTIMATE_FACTOR), path=f"{path}.factor", problems=problems
    )
    if factor is not None and not 0 < factor <= MAX_ESTIMATE_FACTOR:
        problems.add(f"{path}.factor", f"must be more than 0 and at most {MAX_ESTIMATE_FACTOR}")
    if "factor" in estimate and source not in (
        model.EstimateFrom.REQUESTS,
        model.EstimateFrom.LIMITS,
        model.EstimateFrom.MEASURED,
    ):
        problems.add(f"{path}.factor", "applies to from: Requests, Limits or Measured only")
    amount = 0
    if source is model.EstimateFrom.AMOUNT or "amount" in estimate:
        if source not in (model.EstimateFrom.AMOUNT, model.EstimateFrom.MEASURED):
            problems.add(f"{path}.amount", "applies to from: Amount or Measured only")
        elif "amount" not in estimate:
            problems.add(f"{path}.amount", "from: Amount needs an amount, such as 400m or 512Mi")
        else:
            try:
                amount = (
                    quantity.parse_milli(estimate["amount"])
                    if resource is model.EstimateResource.CPU
                    else quantity.parse_int(estimate["amount"])
                )
            except ValueError as error:
                problems.add(f"{path}.amount", f"must be a quantity such as 400m: {error}")
            else:
                if amount <= 0:
                    problems.add(
                        f"{path}.amount", f"must be more than 0, got {estimate['amount']!r}"
                    )
    if len(problems.items) > before:
        return None
    assert source is not None and factor is not None
    return model.EstimateSpec(
        source=source,
        settle_s=settle,
        resource=resource,
        factor=factor,
        amount=amount,
        learn=bool(learn),
        factor_declared="factor" in estimate,
    )


_DECLARED: Final = frozenset(
    {model.EstimateFrom.REQUESTS, model.EstimateFrom.LIMITS, model.EstimateFrom.AMOUNT}
)


def _metric(raw: object, *, path: str, problems: _Problems) -> model.MetricSpec | None:
    metric = _mapping(raw, path=path, problems=problems)
    if metric is None:
        return None
    before = len(problems.items)
    name = metric.get("name")
    if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        problems.add(
            f"{path}.name",
            f"must be a DNS label (lowercase letters, digits and '-', at most 63), got {name!r}",
        )
    source = _source(metric, path=path, problems=problems)
    weight = _integer(
        metric.get("weight", DEFAULT_WEIGHT),
        path=f"{path}.weight",
        problems=problems,
        low=MIN_WEIGHT,
        high=MAX_WEIGHT,
    )
    goal = _enum(
        metric.get("goal", DEFAULT_GOAL), kind=model.Goal, path=f"{path}.goal", problems=problems
    )
    on_missing = _enum(
        metric.get("onMissing", DEFAULT_ON_MISSING),
        kind=model.OnMissing,
        path=f"{path}.onMissing",
        problems=problems,
    )
    threshold: tuple[float | None, float | None] | None = (None, None)
    overrides: tuple[model.ThresholdOverride, ...] = ()
    threshold_mode: model.ThresholdMode | None = model.ThresholdMode.HARD
    if metric.get("threshold") is not None:
        threshold = _threshold(metric["threshold"], path=f"{path}.threshold", problems=problems)
        if threshold is not None:
            overrides, threshold_mode = _threshold_groups(
                metric["threshold"], base=threshold, path=f"{path}.threshold", problems=problems
            )
    scale = _scale(metric, path=path, problems=problems)
    estimate = _estimate(
        metric.get("estimate"),
        path=f"{path}.estimate",
        has_threshold=threshold is not None and threshold != (None, None),
        problems=problems,
        inferred=inferred_resource(source, threshold) if threshold is not None else None,
        measured_default=isinstance(source, model.PrometheusSource),
    )
    if (
        estimate is not None
        and estimate.active
        and source is not None
        and not source.moves_with_binds
    ):
        if estimate.declared:
            problems.add(
                f"{path}.estimate",
                "applies to prometheus and metricsServer metrics only (a node annotation"
                " does not move with binds)",
            )
        estimate = model.NO_ESTIMATE
    if len(problems.items) > before:
        return None
    assert isinstance(name, str) and source is not None and weight is not None
    assert goal is not None and on_missing is not None and threshold is not None
    assert scale is not None and estimate is not None and threshold_mode is not None
    return model.MetricSpec(
        name=name,
        source=source,
        weight=weight,
        goal=goal,
        threshold_min=threshold[0],
        threshold_max=threshold[1],
        on_missing=on_missing,
        tolerance=scale[0],
        tolerance_percent=scale[1],
        value_range=scale[2],
        estimate=estimate,
        threshold_overrides=overrides,
        threshold_mode=threshold_mode,
    )


def _metrics(raw: object, *, problems: _Problems) -> tuple[model.MetricSpec, ...]:
    if not isinstance(raw, list) or not MIN_METRICS <= len(raw) <= MAX_METRICS:
        count = f"{len(raw)} metrics" if isinstance(raw, list) else repr(raw)
        problems.add(
            "spec.metrics", f"must list {MIN_METRICS} to {MAX_METRICS} metrics, got {count}"
        )
        if not isinstance(raw, list):
            return ()
    metrics: list[model.MetricSpec] = []
    seen: dict[str, int] = {}
    for index, raw_metric in enumerate(raw):
        name = raw_metric.get("name") if isinstance(raw_metric, Mapping) else None
        if isinstance(name, str) and name in seen:
            problems.add(
                f"spec.metrics[{index}]",
                f"metric name {name!r} is already used by spec.metrics[{seen[name]}]; "
                "metric names must be unique",
            )
            continue
        if isinstance(name, str):
            seen[name] = index
        metric = _metric(raw_metric, path=f"spec.metrics[{index}]", problems=problems)
        if metric is not None:
            metrics.append(metric)
    return tuple(metrics)


def _timestamp(raw: object, *, problems: _Problems) -> float:
    if raw is None or raw == "":
        return 0.0
    if isinstance(raw, datetime.datetime):  # YAML loaders turn timestamps into datetimes
        moment = raw
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(raw))
        except ValueError:
            problems.add("metadata.creationTimestamp", f"must be RFC 3339, got {raw!r}")
            return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _shadow_schedulers(
    raw: object, *, mode: model.PolicyMode | None, problems: _Problems
) -> tuple[str, ...]:
    shadow = _mapping(raw or {}, path="spec.shadow", problems=problems) or {}
    if shadow and mode is not model.PolicyMode.SHADOW:
        problems.add("spec.shadow", "is only allowed with mode: Shadow")
    names = shadow.get("schedulerNames", list(DEFAULT_SHADOW_SCHEDULERS))
    if (
        not isinstance(names, list)
        or not 1 <= len(names) <= MAX_SHADOW_SCHEDULERS
        or not all(isinstance(n, str) and 0 < len(n) <= 253 for n in names)
    ):
        problems.add(
            "spec.shadow.schedulerNames",
            f"must list 1 to {MAX_SHADOW_SCHEDULERS} scheduler names, got {names!r}",
        )
        return DEFAULT_SHADOW_SCHEDULERS
    return tuple(dict.fromkeys(names))


def _kube_weights(raw: object, *, problems: _Problems) -> tuple[tuple[str, int], ...]:
    """spec.kubeScores: the positive weights, in kube_scores.PLUGINS order, defaults filled."""
    given = _mapping(raw if raw is not None else {}, path="spec.kubeScores", problems=problems)
    if given is None:
        return ()
    for name in given:
        if name in NOT_COMPUTED_KUBE_SCORES:
            problems.add(f"spec.kubeScores.{name}", NOT_COMPUTED_KUBE_SCORES[name])
        elif name not in DEFAULT_KUBE_WEIGHTS:
            known = ", ".join(kube_scores.PLUGINS)
            problems.add(f"spec.kubeScores.{name}", f"is not a score plugin; known: {known}")
    weights = []
    for name in kube_scores.PLUGINS:
        weight = _integer(
            given.get(name, DEFAULT_KUBE_WEIGHTS[name]),
            path=f"spec.kubeScores.{name}",
            problems=problems,
            low=MIN_KUBE_WEIGHT,
            high=MAX_KUBE_WEIGHT,
        )
        if weight:
            weights.append((name, weight))
    return tuple(weights)


def _rebalance(
    raw: object,
    *,
    metrics: Sequence[model.MetricSpec],
    mode: model.PolicyMode | None,
    problems: _Problems,
) -> model.RebalanceSpec | None:
    """``spec.rebalance`` (absent: off). ``trigger`` (one) or ``triggers`` (several, each
    with its own threshold); a trigger without above or below takes its metric's
    threshold: ``above`` its max, else ``below`` its min."""
    if raw is None:
        return None
    path = "spec.rebalance"
    spec = _mapping(raw, path=path, problems=problems)
    if spec is None:
        return None
    before = len(problems.items)
    if mode is not None and mode is not model.PolicyMode.ACTIVE:
        problems.add(path, "is only allowed with mode: Active (a shadow policy places no pod)")
    rebalance_mode = _enum(
        spec.get("mode", DEFAULT_REBALANCE_MODE),
        kind=model.RebalanceMode,
        path=f"{path}.mode",
        problems=problems,
    )
    durations: dict[str, float | None] = {}
    for field, default in (
        ("window", DEFAULT_REBALANCE_WINDOW),
        ("interval", DEFAULT_REBALANCE_INTERVAL),
        ("minPodAge", DEFAULT_REBALANCE_MIN_POD_AGE),
        ("workloadInterval", DEFAULT_REBALANCE_WORKLOAD_INTERVAL),
    ):
        found = _duration(
            spec.get(field, default),
            path=f"{path}.{field}",
            problems=problems,
            low_exclusive=field != "minPodAge",
            high=MAX_REBALANCE_DURATION_S,
        )
        durations[field] = None if found is None else max(found, REBALANCE_FLOORS_S[field])
    counts: dict[str, int | None] = {}
    for field, default_count in (
        ("maxPerNode", DEFAULT_REBALANCE_MAX_PER_NODE),
        ("maxTotal", DEFAULT_REBALANCE_MAX_TOTAL),
        ("maxPerWorkload", DEFAULT_REBALANCE_MAX_PER_WORKLOAD),
    ):
        counts[field] = _integer(
            spec.get(field, default_count),
            path=f"{path}.{field}",
            problems=problems,
            low=0,
            high=MAX_REBALANCE_EVICTIONS,
        )
    evict_jobs = spec.get("evictJobPods", DEFAULT_REBALANCE_EVICT_JOB_PODS)
    if not isinstance(evict_jobs, bool):
        problems.add(f"{path}.evictJobPods", f"must be true or false, got {evict_jobs!r}")
    margin: float | None = None
    if spec.get("margin") is not None:
        margin = _number(spec["margin"], path=f"{path}.margin", problems=problems)
        if margin is not None and margin < 0:
            problems.add(f"{path}.margin", f"must not be negative, got {margin:g}")
    if "triggers" in spec and "trigger" in spec:
        problems.add(path, "set trigger or triggers, not both")
        return None
    if "triggers" in spec:
        listed = spec["triggers"]
        if not isinstance(listed, list) or not 1 <= len(listed) <= MAX_REBALANCE_TRIGGERS:
            problems.add(
                f"{path}.triggers",
                f"must be a list of 1 to {MAX_REBALANCE_TRIGGERS} triggers, got {listed!r}",
            )
            return None
        raws = [(item, f"{path}.triggers[{i}]") for i, item in enumerate(listed)]
    else:
        raws = [(spec.get("trigger"), f"{path}.trigger")]
    triggers = [
        _trigger(item, path=where, metrics=metrics, margin=margin, problems=problems)
        for item, where in raws
    ]
    names = [t.metric for t in triggers if t is not None]
    if len(set(names)) < len(names):
        problems.add(f"{path}.triggers", "name each metric at most once")
    if len(problems.items) > before:
        return None
    max_per_node, max_total, max_per_workload = (
        counts[f] for f in ("maxPerNode", "maxTotal", "maxPerWorkload")
    )
    window, interval, min_age, workload_interval = (
        durations[f] for f in ("window", "interval", "minPodAge", "workloadInterval")
    )
    assert rebalance_mode is not None and max_per_node is not None and max_total is not None
    assert max_per_workload is not None and isinstance(evict_jobs, bool)
    assert window is not None and interval is not None and min_age is not None
    assert workload_interval is not None
    first, *more = (t for t in triggers if t is not None)
    return model.RebalanceSpec(
        mode=rebalance_mode,
        metric=first.metric,
        above=first.above,
        below=first.below,
        window_s=window,
        interval_s=interval,
        max_per_node=max_per_node,
        max_total=max_total,
        min_pod_age_s=min_age,
        margin=first.margin,
        more_triggers=tuple(more),
        workload_interval_s=workload_interval,
        max_per_workload=max_per_workload,
        evict_job_pods=evict_jobs,
    )


def _trigger(
    raw: object,
    *,
    path: str,
    metrics: Sequence[model.MetricSpec],
    margin: float | None,
    problems: _Problems,
) -> model.Trigger | None:
    """One trigger; its margin is its own ``margin``, else the rebalance's, else 10 % of
    its value's magnitude."""
    before = len(problems.items)
    trigger = _mapping(raw, path=path, problems=problems) or {}
    above = below = None
    name = trigger.get("metric")
    metric = next((m for m in metrics if m.name == name), None)
    if not isinstance(name, str) or not name:
        problems.add(f"{path}.metric", "must name one of the policy's metrics")
    elif metric is None and metrics:
        known = ", ".join(m.name for m in metrics)
        problems.add(f"{path}.metric", f"{name!r} is not one of the policy's metrics ({known})")
    if trigger.get("above") is not None and trigger.get("below") is not None:
        problems.add(path, "set above or below, not both")
    elif trigger.get("above") is not None:
        above = _number(trigger["above"], path=f"{path}.above", problems=problems)
    elif trigger.get("below") is not None:
        below = _number(trigger["below"], path=f"{path}.below", problems=problems)
    elif metric is not None and metric.threshold_overrides:
        problems.add(
            path,
            f"metric {metric.name!r} has threshold overrides (one threshold per node group): "
            "set trigger.above or trigger.below",
        )
    elif metric is not None:
        above, below = metric.threshold_max, None
        if above is None:
            below = metric.threshold_min
        if above is None and below is None:
            problems.add(
                path,
                f"metric {metric.name!r} has no threshold: set trigger.above or trigger.below",
            )
    own = margin
    if trigger.get("margin") is not None:
        own = _number(trigger["margin"], path=f"{path}.margin", problems=problems)
        if own is not None and own < 0:
            problems.add(f"{path}.margin", f"must not be negative, got {own:g}")
    if len(problems.items) > before or not isinstance(name, str):
        return None
    value = above if above is not None else below
    if own is None:
        own = DEFAULT_REBALANCE_MARGIN_FRACTION * abs(value or 0.0)
    return model.Trigger(metric=name, above=above, below=below, margin=own)


def policy_from_body(body: model.RawBody) -> model.Policy:
    """Convert a raw SchedulingPolicy into a ``model.Policy``, applying the CRD's defaults.

    A missing ``metadata.namespace`` means ``default``, as with ``kubectl apply``.
    Raises ``PolicyError`` listing every problem found.
    """
    problems = _Problems()
    metadata = _mapping(body.get("metadata", {}), path="metadata", problems=problems) or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        problems.add("metadata.name", "missing")
        name = ""
    namespace = metadata.get("namespace") or "default"
    if not isinstance(namespace, str):
        problems.add("metadata.namespace", f"must be a string, got {namespace!r}")
        namespace = ""
    generation = _integer(
        metadata.get("generation", 0), path="metadata.generation", problems=problems, low=0
    )
    created = _timestamp(metadata.get("creationTimestamp"), problems=problems)

    spec = _mapping(body.get("spec"), path="spec", problems=problems)
    if spec is None:
        raise PolicyError(problems.items)

    selector = _label_selector(
        spec.get("podSelector", {}) or {}, path="spec.podSelector", problems=problems
    )
    priority = _integer(
        spec.get("priority", DEFAULT_PRIORITY),
        path="spec.priority",
        problems=problems,
        low=-(2**31),
        high=2**31 - 1,
    )
    metrics = _metrics(spec.get("metrics"), problems=problems)
    max_age = _duration(
        spec.get("maxMetricAge", DEFAULT_MAX_METRIC_AGE),
        path="spec.maxMetricAge",
        problems=problems,
        low_exclusive=True,
        high=MAX_METRIC_AGE_LIMIT_S,
    )
    burst_penalty = _integer(
        spec.get("burstPenalty", DEFAULT_BURST_PENALTY),
        path="spec.burstPenalty",
        problems=problems,
        low=MIN_BURST_PENALTY,
        high=MAX_BURST_PENALTY,
    )
    burst_window = _duration(
        spec.get("burstWindow", DEFAULT_BURST_WINDOW),
        path="spec.burstWindow",
        problems=problems,
        low_exclusive=False,
        high=MAX_BURST_WINDOW_S,
    )
    fallback_spec = _mapping(spec.get("fallback") or {}, path="spec.fallback", problems=problems)
    fallback = _enum(
        (fallback_spec or {}).get("strategy", DEFAULT_FALLBACK),
        kind=model.FallbackStrategy,
        path="spec.fallback.strategy",
        problems=problems,
    )
    mode = _enum(
        spec.get("mode", DEFAULT_MODE), kind=model.PolicyMode, path="spec.mode", problems=problems
    )
    shadow_schedulers = _shadow_schedulers(spec.get("shadow"), mode=mode, problems=problems)
    daemon_set_pods = _enum(
        spec.get("daemonSetPods", DEFAULT_DAEMON_SET_PODS),
        kind=model.DaemonSetPods,
        path="spec.daemonSetPods",
        problems=problems,
    )
    kube_weights = _kube_weights(spec.get("kubeScores"), problems=problems)
    rebalance = _rebalance(spec.get("rebalance"), metrics=metrics, mode=mode, problems=problems)
    scheduler_name = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not isinstance(scheduler_name, str) or not 0 < len(scheduler_name) <= 253:
        problems.add("spec.schedulerName", f"must be 1 to 253 characters, got {scheduler_name!r}")

    if problems.items:
        raise PolicyError(problems.items)
    assert mode is not None and daemon_set_pods is not None
    assert generation is not None and priority is not None and max_age is not None
    assert burst_penalty is not None and burst_window is not None
    assert fallback is not None
    metrics = tuple(
        dataclasses.replace(
            metric, estimate=dataclasses.replace(metric.estimate, settle_s=burst_window)
        )
        if metric.estimate.settle_s < 0
        else metric
        for metric in metrics
    )
    return model.Policy(
        namespace=namespace,
        name=name,
        generation=generation,
        creation_timestamp=created,
        priority=priority,
        pod_selector=selector,
        metrics=metrics,
        max_metric_age_s=max_age,
        burst_penalty=float(burst_penalty),
        burst_window_s=burst_window,
        fallback=fallback,
        mode=mode,
        shadow_scheduler_names=shadow_schedulers,
        kube_weights=kube_weights,
        scheduler_name=str(scheduler_name),
        rebalance=rebalance,
        daemon_set_pods=daemon_set_pods,
    )


def served_by(body: model.RawBody, scheduler_names: frozenset[str]) -> bool:
    """Whether the install serving ``scheduler_names`` serves the raw policy ``body``.

    A policy belongs to the install whose scheduler names include its
    ``spec.schedulerName`` (``metricsched`` when absent); every other install ignores it
    entirely (no refresh, no status, no events), so two installs never fight over it.
    """
    spec = body.get("spec")
    name = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME) if isinstance(spec, Mapping) else None
    return name in scheduler_names if isinstance(name, str) else True


@dataclasses.dataclass(frozen=True, slots=True)
class Elsewhere:
    """A policy that another install serves, as much of it as says whether it would select
    a pod: the cycle names it in the pod's events (``elsewhere_note``)."""

    namespace: str
    name: str
    scheduler_name: str
    selector: model.LabelSelector
    active: bool

    @property
    def key(self) -> model.PolicyKey:
        return model.PolicyKey(f"{self.namespace}/{self.name}")


def elsewhere_from_body(body: model.RawBody) -> Elsewhere | None:
    """The light index entry of a raw policy another install serves; None when its
    scheduler name or selector cannot be read (it selects nothing then, to anyone)."""
    meta = body.get("metadata")
    spec = body.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    name = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    problems = _Problems()
    selector = _label_selector(
        spec.get("podSelector", {}), path="spec.podSelector", problems=problems
    )
    if problems.items or not isinstance(name, str):
        return None
    return Elsewhere(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        scheduler_name=name,
        selector=selector,
        active=spec.get("mode", DEFAULT_MODE.value) == model.PolicyMode.ACTIVE.value,
    )


def selecting_elsewhere(pod: model.PodInfo, elsewhere: Sequence[Elsewhere]) -> list[Elsewhere]:
    """The policies of ``elsewhere`` that would govern ``pod`` if they were this install's:
    the one its ``metricsched.io/policy`` label pins, else the active ones of its namespace
    whose podSelector matches (as ``select_policy`` chooses), by key."""
    pinned = pod.labels.get(POLICY_LABEL)
    found = [
        p
        for p in elsewhere
        if p.namespace == pod.namespace
        and p.active
        and (p.name == pinned if pinned is not None else selector_matches(p.selector, pod.labels))
    ]
    return sorted(found, key=lambda p: p.key)


def elsewhere_note(pod: model.PodInfo, elsewhere: Sequence[Elsewhere]) -> str:
    """`` (policy ns/x selects this pod but is served by scheduler other-sched)`` for each
    policy of another install that selects ``pod``; "" when none does."""
    return "".join(
        f" (policy {p.key} selects this pod but is served by scheduler {p.scheduler_name})"
        for p in selecting_elsewhere(pod, elsewhere)
    )


def default_policy(strategy: model.FallbackStrategy) -> model.Policy:
    """The operator's policy for pods no SchedulingPolicy governs: no metrics, ``strategy``."""
    return model.Policy(
        namespace="",
        name=DEFAULT_POLICY_NAME,
        generation=0,
        creation_timestamp=0.0,
        priority=DEFAULT_PRIORITY,
        pod_selector=model.LabelSelector(match_labels={}, match_expressions=()),
        metrics=(),
        max_metric_age_s=parse_duration(DEFAULT_MAX_METRIC_AGE),
        burst_penalty=0.0,  # nothing to penalise: the strategy decides
        burst_window_s=parse_duration(DEFAULT_BURST_WINDOW),  # recent binds still break ties
        fallback=strategy,
    )


def is_default(policy: model.Policy) -> bool:
    """Whether ``policy`` is the operator's default policy (not a SchedulingPolicy object)."""
    return policy.namespace == "" and policy.name == DEFAULT_POLICY_NAME


def metric_names(policy: model.Policy) -> str:
    """The policy's metric names, comma-separated: ``status.metricNames`` (kubectl's column)."""
    return ",".join(metric.name for metric in policy.metrics)


# --- selection -------------------------------------------------------------------------


def selector_matches(selector: model.LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector``, as metav1.LabelSelector does; {} matches all.
    The matching is ``core.selectors``' (one implementation for pods, nodes and policies)."""
    requirements = [
        selectors.Requirement(key, "In", frozenset((value,)))
        for key, value in selector.match_labels.items()
    ]
    requirements.extend(
        selectors.Requirement(key, operator, frozenset(values))
        for key, operator, values in selector.match_expressions
    )
    return selectors.Selector.of(requirements).matches(labels)


class ChoiceReason(enum.StrEnum):
    """Why a policy was (not) chosen for a pod."""

    PINNED = "Pinned"  # the pod's metricsched.io/policy label names it
    SELECTED = "Selected"  # its podSelector matches the pod and it has the highest priority
    PINNED_MISSING = "PinnedMissing"  # the label names a policy that does not exist
    NO_MATCH = "NoMatch"  # no policy of the pod's namespace selects the pod


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyChoice:
    """The policy governing a pod, or why there is none."""

    policy: model.Policy | None  # None for PINNED_MISSING and NO_MATCH
    reason: ChoiceReason
    pinned: model.PolicyKey | None = None  # the policy the pod's label names, if it does


def _precedence(policy: model.Policy) -> tuple[int, float, str]:
    return (-policy.priority, policy.creation_timestamp, policy.name)


def select_policy(pod: model.PodInfo, policies: Sequence[model.Policy]) -> PolicyChoice:
    """Choose the policy that governs ``pod`` among ``policies`` (of any namespace).

    A pod label ``metricsched.io/policy: <name>`` pins the policy of that name in the pod's
    namespace, whatever its selector says. Otherwise, among the namespace's policies whose
    podSelector matches the pod, the highest priority wins; ties go to the oldest, then to
    the first name. Shadow policies never govern a pod here (see ``shadow_policy_for``).
    """
    policies = [p for p in policies if p.mode is model.PolicyMode.ACTIVE]
    pinned_name = pod.labels.get(POLICY_LABEL)
    if pinned_name is not None:
        key = model.PolicyKey(f"{pod.namespace}/{pinned_name}")
        for policy in policies:
            if policy.namespace == pod.namespace and policy.name == pinned_name:
                return PolicyChoice(policy=policy, reason=ChoiceReason.PINNED, pinned=key)
        return PolicyChoice(policy=None, reason=ChoiceReason.PINNED_MISSING, pinned=key)
    candidates = [
        policy
        for policy in policies
        if policy.namespace == pod.namespace and selector_matches(policy.pod_selector, pod.labels)
    ]
    if not candidates:
        return PolicyChoice(policy=None, reason=ChoiceReason.NO_MATCH)
    return PolicyChoice(policy=min(candidates, key=_precedence), reason=ChoiceReason.SELECTED)


def shadow_policy_for(pod: model.PodInfo, policies: Sequence[model.Policy]) -> model.Policy | None:
    """The shadow policy that evaluates ``pod``, placed by another scheduler, or None.

    Among the shadow policies of the pod's namespace that list the pod's schedulerName,
    the one the pod's ``metricsched.io/policy`` label names, else the highest-priority one
    whose podSelector matches (ties: oldest, then first name), as ``select_policy`` does.
    """
    candidates = [
        p
        for p in policies
        if p.mode is model.PolicyMode.SHADOW
        and p.namespace == pod.namespace
        and pod.scheduler_name in p.shadow_scheduler_names
    ]
    pinned_name = pod.labels.get(POLICY_LABEL)
    if pinned_name is not None:
        return next((p for p in candidates if p.name == pinned_name), None)
    matching = [p for p in candidates if selector_matches(p.pod_selector, pod.labels)]
    return min(matching, key=_precedence) if matching else None
