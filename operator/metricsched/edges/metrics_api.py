"""The resource metrics API (``metrics.k8s.io``): node usage, one LIST per refresh.

``read_nodes`` sends one ``GET /apis/metrics.k8s.io/v1beta1/nodes`` on the async client
(``kube_http.AsyncApi``) and turns each NodeMetrics into the utilisation of cpu and memory
over the node's allocatable, keyed by node name, with the sample's own time
(``timestamp`` + ``window``: the end of the window the usage was measured over, as
metrics-server reports it). What the cycle sees is a ``model.MetricSeries`` per resource,
stored for every metric that reads it (``metricsServer: {resource: ...}``).

Failures are classified, never raised: 404 (no APIService for ``metrics.k8s.io``:
metrics-server is not installed) and 503 (the APIService is registered but its backend
is not available, metrics-server down or not ready) are ``MetricsAPIUnavailable``; other
error statuses and transport errors are ``Unreachable``; a body that is not a
NodeMetricsList is ``BadResult``. A NodeMetrics whose node is unknown, has no allocatable
of the resource, or carries an unreadable quantity is left out and counted.

No scheduling logic here; nothing from ``metricsched.runtime``.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from metricsched.core import model, quantity
from metricsched.edges import errors, kube_http

NODES_PATH: Final = "/apis/metrics.k8s.io/v1beta1/nodes"
# The longest NodeMetrics LIST read (the answer comes from metrics-server, or whatever
# backs the APIService, through the API server): about 400 bytes a node, so room for
# tens of thousands of nodes; past it the answer is refused, not held in memory.
MAX_ANSWER_BYTES: Final = 32 * 1024 * 1024
# The statuses that mean the API itself is not there (as opposed to one failed request).
UNAVAILABLE: Final = {
    404: "no APIService serves metrics.k8s.io (is metrics-server installed?)",
    503: "the metrics.k8s.io APIService is not available (metrics-server down or not ready)",
}


@dataclasses.dataclass(frozen=True, slots=True)
class NodeUsage:
    """One answer of the metrics API: each resource's utilisation per node."""

    series: Mapping[model.EstimateResource, model.MetricSeries]
    items: int  # NodeMetrics in the answer
    unknown_node: int  # NodeMetrics naming no node of the cache
    dropped: int  # values left out: no allocatable, unreadable quantity or time
    duration_s: float


def failed(
    error: model.QueryErrorKind, message: str, *, now: float, duration_s: float
) -> NodeUsage:
    """An answer that carries no values, only why (the same for every resource)."""
    series = model.MetricSeries(values={}, last_refresh=now, error=error, error_message=message)
    return NodeUsage(
        series={resource: series for resource in model.EstimateResource},
        items=0,
        unknown_node=0,
        dropped=0,
        duration_s=duration_s,
    )


async def read_nodes(
    api: kube_http.AsyncApi,
    *,
    nodes: Sequence[model.NodeInfo],
    now: float,
    timeout_s: float,
) -> NodeUsage:
    """One LIST of NodeMetrics, as utilisation per resource (see the module's text)."""
    started = time.monotonic()
    try:
        answer = await api.request(
            "GET",
            NODES_PATH,
            timeout=kube_http.timeout(timeout_s),
            max_bytes=MAX_ANSWER_BYTES,
        )
    except kube_http.AnswerTooLargeError as error:
        return failed(
            model.QueryErrorKind.BAD_RESULT,
            f"the metrics API's answer is too large: {error}",
            now=now,
            duration_s=time.monotonic() - started,
        )
    except kube_http.TRANSPORT_ERRORS as error:
        return failed(
            model.QueryErrorKind.UNREACHABLE,
            f"the API server did not answer: {type(error).__name__}: {error}",
            now=now,
            duration_s=time.monotonic() - started,
        )
    duration = time.monotonic() - started
    if answer.status in UNAVAILABLE:
        message = f"{answer.status}: {UNAVAILABLE[answer.status]}: "
        message += errors.message(answer.data)
        return failed(
            model.QueryErrorKind.METRICS_API_UNAVAILABLE, message, now=now, duration_s=duration
        )
    if not answer.ok:
        return failed(
            model.QueryErrorKind.UNREACHABLE,
            f"{answer.status}: {errors.message(answer.data)}",
            now=now,
            duration_s=duration,
        )
    try:
        body = answer.json()
    except ValueError as error:
        body, problem = None, str(error)
    else:
        problem = "not a NodeMetricsList"
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return failed(
            model.QueryErrorKind.BAD_RESULT,
            f"the metrics API's answer is {problem}",
            now=now,
            duration_s=duration,
        )
    return usage_of(items, nodes=nodes, now=now, duration_s=duration)


def usage_of(
    items: Sequence[Any],
    *,
    nodes: Sequence[model.NodeInfo],
    now: float,
    duration_s: float = 0.0,
) -> NodeUsage:
    """NodeMetrics items as each resource's utilisation per node of ``nodes``."""
    by_name = {node.name: node for node in nodes}
    values: dict[model.EstimateResource, dict[model.NodeName, model.MetricSample]] = {
        resource: {} for resource in model.EstimateResource
    }
    unknown = dropped = 0
    for item in items:
        name = _name(item)
        node = by_name.get(model.NodeName(name)) if name else None
        if node is None:
            unknown += 1
            continue
        at = _sample_time(item, default=now)
        usage = item.get("usage") if isinstance(item.get("usage"), dict) else {}
        for resource in model.EstimateResource:
            ratio = _utilisation(usage.get(resource.value), node=node, resource=resource)
            if ratio is None:
                dropped += 1
                continue
            values[resource][node.name] = model.MetricSample(value=ratio, refreshed_at=at)
    return NodeUsage(
        series={
            resource: model.MetricSeries(
                values=found, last_refresh=now, error=None, error_message=""
            )
            for resource, found in values.items()
        },
        items=len(items),
        unknown_node=unknown,
        dropped=dropped,
        duration_s=duration_s,
    )


def _name(item: object) -> str:
    if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
        return ""
    name = item["metadata"].get("name")
    return name if isinstance(name, str) else ""


def _utilisation(
    raw: object, *, node: model.NodeInfo, resource: model.EstimateResource
) -> float | None:
    """Usage over allocatable (cpu in millicores, memory in bytes); None if unreadable."""
    if raw is None:
        return None
    try:
        nanos = quantity.parse_nano(raw)
    except quantity.QuantityError:
        return None
    if resource is model.EstimateResource.CPU:
        used, allocatable = nanos / 10**6, node.allocatable.milli_cpu  # millicores
    else:
        used, allocatable = nanos / quantity.NANO, node.allocatable.memory
    if allocatable <= 0 or used < 0:
        return None
    ratio = used / allocatable
    return ratio if math.isfinite(ratio) else None


def _sample_time(item: Mapping[str, Any], *, default: float) -> float:
    """The end of the window the usage was measured over (``timestamp`` + ``window``),
    as unix time; ``default`` when the item does not say (never later than it: a clock
    ahead of ours does not make a sample fresher than the refresh that read it)."""
    stamp = item.get("timestamp")
    if not isinstance(stamp, str):
        return default
    try:
        start = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default
    window = _seconds(item.get("window"))
    return min(start + window, default)


def _seconds(raw: object) -> float:
    """A metav1.Duration such as "10.5s", "1m0s" or "20s" in seconds (0 if unreadable)."""
    if not isinstance(raw, str) or not raw:
        return 0.0
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = next((u for u in sorted(units, key=len, reverse=True) if raw.startswith(u, i)), None)
        if unit is None or not number:
            return 0.0
        try:
            total += float(number) * units[unit]
        except ValueError:
            return 0.0
        number = ""
        i += len(unit)
    return total if not number else 0.0
