"""A policy's ``spec.metrics``: each metric's name, source (prometheus, nodeAnnotation or
metricsServer), weight, goal, onMissing, threshold (with its per-node-group overrides and
mode) and scale, read into a ``model.MetricSpec``; its estimate is ``policy_estimate``'s.

PromQL syntax is not checked here: Prometheus tells us. No I/O here: no clients, no
clocks, no logging.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from metricsched.core import model, policy_defaults, policy_estimate, policy_fields

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PROM_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ANNOTATION_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


def _source(
    metric: Mapping[str, Any], *, path: str, problems: policy_fields.Problems
) -> model.AnySource | None:
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
    prometheus = policy_fields.mapping(
        metric["prometheus"], path=f"{path}.prometheus", problems=problems
    )
    if prometheus is None:
        return None
    query = prometheus.get("query")
    node_label = prometheus.get("nodeLabel", policy_defaults.DEFAULT_NODE_LABEL)
    ok = True
    if (
        not isinstance(query, str)
        or not query.strip()
        or len(query) > policy_defaults.MAX_QUERY_LENGTH
    ):
        problems.add(
            f"{path}.prometheus.query",
            f"must be a PromQL query of 1 to {policy_defaults.MAX_QUERY_LENGTH} characters",
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
    raw: object, *, path: str, problems: policy_fields.Problems
) -> model.MetricsServerSource | None:
    """``metricsServer: {resource: cpu | memory}``."""
    spec = policy_fields.mapping(raw, path=path, problems=problems)
    if spec is None:
        return None
    resource = policy_fields.enum_member(
        spec.get("resource"),
        kind=model.EstimateResource,
        path=f"{path}.resource",
        problems=problems,
    )
    return None if resource is None else model.MetricsServerSource(resource=resource)


def _threshold(
    raw: object, *, path: str, problems: policy_fields.Problems
) -> tuple[float | None, float | None] | None:
    threshold = policy_fields.mapping(raw, path=path, problems=problems)
    if threshold is None:
        return None
    return _bounds(threshold, path=path, problems=problems)


def _bounds(
    threshold: Mapping[str, Any], *, path: str, problems: policy_fields.Problems
) -> tuple[float | None, float | None] | None:
    """``min`` and ``max`` of a threshold or of one of its overrides."""
    low = threshold.get("min")
    high = threshold.get("max")
    if low is None and high is None:
        problems.add(path, "a threshold needs min, max or both")
        return None
    low_value = (
        None if low is None else policy_fields.number(low, path=f"{path}.min", problems=problems)
    )
    high_value = (
        None if high is None else policy_fields.number(high, path=f"{path}.max", problems=problems)
    )
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
    problems: policy_fields.Problems,
) -> tuple[tuple[model.ThresholdOverride, ...], model.ThresholdMode | None]:
    """A threshold's ``overrides`` (per node group, first match wins; each states the
    bounds the base states, so a node group never loses or gains a side) and ``mode``."""
    threshold = raw if isinstance(raw, Mapping) else {}
    mode = policy_fields.enum_member(
        threshold.get("mode", policy_defaults.DEFAULT_THRESHOLD_MODE),
        kind=model.ThresholdMode,
        path=f"{path}.mode",
        problems=problems,
    )
    raw_overrides = threshold.get("overrides") or []
    if (
        not isinstance(raw_overrides, list)
        or len(raw_overrides) > policy_defaults.MAX_THRESHOLD_OVERRIDES
    ):
        problems.add(
            f"{path}.overrides",
            f"must list at most {policy_defaults.MAX_THRESHOLD_OVERRIDES} overrides, "
            f"got {raw_overrides!r}",
        )
        return (), mode
    overrides: list[model.ThresholdOverride] = []
    for index, raw_override in enumerate(raw_overrides):
        where = f"{path}.overrides[{index}]"
        override = policy_fields.mapping(raw_override, path=where, problems=problems)
        if override is None:
            continue
        if "nodeSelector" not in override:
            problems.add(f"{where}.nodeSelector", "is required (a label selector of nodes)")
            continue
        selector = policy_fields.label_selector(
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
    metric: Mapping[str, Any], *, path: str, problems: policy_fields.Problems
) -> tuple[float, float, float | None] | None:
    """``tolerance``, ``tolerancePercent`` and ``range`` of a metric (README "No herding")."""
    tolerance = policy_fields.number(
        metric.get("tolerance", 0), path=f"{path}.tolerance", problems=problems
    )
    percent = policy_fields.number(
        metric.get("tolerancePercent", policy_defaults.DEFAULT_TOLERANCE_PERCENT),
        path=f"{path}.tolerancePercent",
        problems=problems,
    )
    value_range = None
    if metric.get("range") is not None:
        value_range = policy_fields.number(metric["range"], path=f"{path}.range", problems=problems)
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
    if not 0 <= percent <= policy_defaults.MAX_TOLERANCE_PERCENT:
        problems.add(
            f"{path}.tolerancePercent",
            f"must be from 0 to {policy_defaults.MAX_TOLERANCE_PERCENT}, got {percent:g}",
        )
        return None
    return tolerance, percent, value_range


def _metric(raw: object, *, path: str, problems: policy_fields.Problems) -> model.MetricSpec | None:
    metric = policy_fields.mapping(raw, path=path, problems=problems)
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
    weight = policy_fields.integer(
        metric.get("weight", policy_defaults.DEFAULT_WEIGHT),
        path=f"{path}.weight",
        problems=problems,
        low=policy_defaults.MIN_WEIGHT,
        high=policy_defaults.MAX_WEIGHT,
    )
    goal = policy_fields.enum_member(
        metric.get("goal", policy_defaults.DEFAULT_GOAL),
        kind=model.Goal,
        path=f"{path}.goal",
        problems=problems,
    )
    on_missing = policy_fields.enum_member(
        metric.get("onMissing", policy_defaults.DEFAULT_ON_MISSING),
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
    estimate = policy_estimate.estimate_spec(
        metric.get("estimate"),
        path=f"{path}.estimate",
        problems=problems,
        metric_source=source,
        threshold=threshold,
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


def metrics(raw: object, *, problems: policy_fields.Problems) -> tuple[model.MetricSpec, ...]:
    if (
        not isinstance(raw, list)
        or not policy_defaults.MIN_METRICS <= len(raw) <= policy_defaults.MAX_METRICS
    ):
        count = f"{len(raw)} metrics" if isinstance(raw, list) else repr(raw)
        problems.add(
            "spec.metrics",
            f"must list {policy_defaults.MIN_METRICS} to {policy_defaults.MAX_METRICS} metrics, "
            f"got {count}",
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
