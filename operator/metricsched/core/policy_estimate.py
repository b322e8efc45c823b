"""A metric's ``estimate``: what a pod placed since the latest sample adds to it, as declared
(Requests, Limits, Amount), measured (Measured), learned (Learned) or none, and the
default when none is declared (the resource a threshold-only query measures, inferred
from its text).

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from metricsched.core import model, policy_defaults, policy_fields, quantity

MEASURED_SETTLE_S: Final = 300.0
"""A Measured estimate's settleTime when unset: an upper bound only (a pod stops counting
once its usage shows in the samples), long enough for a 5-minute rate window."""
METRICS_SERVER_SETTLE_S: Final = 120.0
"""How long a placed pod's requests count on a metricsServer metric with no estimate
declared: NodeMetrics cover a window of metrics-server's resolution (60 s by default)
ending at their timestamp, so two of them hold the pod's own usage."""
DEFAULT_SETTLE_S: Final[Mapping[model.EstimateFrom, float]] = {
    model.EstimateFrom.MEASURED: MEASURED_SETTLE_S,
    model.EstimateFrom.REQUESTS: METRICS_SERVER_SETTLE_S,
}
"""The settleTime of each source's ``default_estimate`` (``model.MetricSource``)."""
_RESOURCE_WORDS: Final = (
    (model.EstimateResource.CPU, re.compile(r"cpu", re.IGNORECASE)),
    (model.EstimateResource.MEMORY, re.compile(r"memory|\bmem_|_mem_", re.IGNORECASE)),
)
_NOT_USAGE: Final = re.compile(r"temp|thrott|pressure|psi|freq|hz\b|cores?_count", re.IGNORECASE)


def inferred_resource(
    source: model.MetricSource | None,
    threshold: tuple[float | None, float | None],
) -> model.EstimateResource | None:
    """The resource a threshold-only metric measures the utilisation of, read from its
    query: "cpu" or "memory" in it (one of them, not both), nothing that says otherwise
    (temperature, throttling, pressure, frequency), and a threshold within 0..1 (a
    ratio). None: not a utilisation metric we can model (latency, errors, price). A
    metrics-server metric is its resource's utilisation by definition."""
    if source is None:
        return None
    if source.node_metrics is not None:
        return source.node_metrics
    if source.prometheus is None:
        return None
    if any(bound is not None and not 0.0 <= bound <= 1.0 for bound in threshold):
        return None
    query = source.prometheus.query
    if _NOT_USAGE.search(query):
        return None
    found = [resource for resource, words in _RESOURCE_WORDS if words.search(query)]
    return found[0] if len(found) == 1 else None


def estimate_spec(
    raw: object,
    *,
    path: str,
    problems: policy_fields.Problems,
    metric_source: model.MetricSource | None,
    threshold: tuple[float | None, float | None] | None,
) -> model.EstimateSpec | None:
    """``estimate`` of a metric whose source and threshold (None: unreadable) are
    ``metric_source`` and ``threshold``; ``settle_s`` is -1 when unset (the policy's
    burstWindow fills it in; ``MEASURED_SETTLE_S`` for Measured). Without one, a
    thresholded metric whose query names the utilisation of cpu or memory
    (``inferred_resource``) counts what pods measurably use (``Measured``); other metrics
    have none (the burst penalty stands in; ``Learned`` is opt-in). A metrics-server
    metric (the cluster may have no Prometheus to measure pods with): the default counts
    the pod's requests instead, until its usage shows in NodeMetrics
    (``METRICS_SERVER_SETTLE_S``)."""
    if raw is None:
        has_threshold = threshold is not None and threshold != (None, None)
        inferred = inferred_resource(metric_source, threshold) if threshold is not None else None
        default = (
            model.EstimateFrom.NONE if metric_source is None else metric_source.default_estimate
        )
        if has_threshold and inferred is not None and default is not model.EstimateFrom.NONE:
            return model.EstimateSpec(
                source=default,
                settle_s=DEFAULT_SETTLE_S[default],
                resource=inferred,
                declared=False,
            )
        return model.EstimateSpec(source=model.EstimateFrom.NONE, settle_s=-1.0, declared=False)
    estimate = policy_fields.mapping(raw, path=path, problems=problems)
    if estimate is None:
        return None
    before = len(problems.items)
    source = policy_fields.enum_member(
        estimate.get("from"), kind=model.EstimateFrom, path=f"{path}.from", problems=problems
    )
    settle = -1.0
    if estimate.get("settleTime") is not None:
        settle = (
            policy_fields.duration(
                estimate["settleTime"],
                path=f"{path}.settleTime",
                problems=problems,
                low_exclusive=False,
                high=policy_defaults.MAX_SETTLE_TIME_S,
            )
            or 0.0
        )
    learn = estimate.get("learn", policy_defaults.DEFAULT_ESTIMATE_LEARN)
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
        resource = policy_fields.enum_member(
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
    factor = policy_fields.number(
        estimate.get("factor", policy_defaults.DEFAULT_ESTIMATE_FACTOR),
        path=f"{path}.factor",
        problems=problems,
    )
    if factor is not None and not 0 < factor <= policy_defaults.MAX_ESTIMATE_FACTOR:
        problems.add(
            f"{path}.factor",
            f"must be more than 0 and at most {policy_defaults.MAX_ESTIMATE_FACTOR}",
        )
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
