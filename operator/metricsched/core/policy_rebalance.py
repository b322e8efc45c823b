"""A policy's ``spec.rebalance``: its mode, durations (read at their floors), eviction caps,
margin and triggers, read into a ``model.RebalanceSpec``; a trigger without above or
below takes its metric's threshold.

No I/O here: no clients, no clocks, no logging.
"""

from __future__ import annotations

from collections.abc import Sequence

from metricsched.core import model, policy_defaults, policy_fields


def rebalance(
    raw: object,
    *,
    metrics: Sequence[model.MetricSpec],
    mode: model.PolicyMode | None,
    problems: policy_fields.Problems,
) -> model.RebalanceSpec | None:
    """``spec.rebalance`` (absent: off). ``trigger`` (one) or ``triggers`` (several, each
    with its own threshold); a trigger without above or below takes its metric's
    threshold: ``above`` its max, else ``below`` its min."""
    if raw is None:
        return None
    path = "spec.rebalance"
    spec = policy_fields.mapping(raw, path=path, problems=problems)
    if spec is None:
        return None
    before = len(problems.items)
    if mode is not None and mode is not model.PolicyMode.ACTIVE:
        problems.add(path, "is only allowed with mode: Active (a shadow policy places no pod)")
    rebalance_mode = policy_fields.enum_member(
        spec.get("mode", policy_defaults.DEFAULT_REBALANCE_MODE),
        kind=model.RebalanceMode,
        path=f"{path}.mode",
        problems=problems,
    )
    durations: dict[str, float | None] = {}
    for field, default in (
        ("window", policy_defaults.DEFAULT_REBALANCE_WINDOW),
        ("interval", policy_defaults.DEFAULT_REBALANCE_INTERVAL),
        ("minPodAge", policy_defaults.DEFAULT_REBALANCE_MIN_POD_AGE),
        ("workloadInterval", policy_defaults.DEFAULT_REBALANCE_WORKLOAD_INTERVAL),
    ):
        found = policy_fields.duration(
            spec.get(field, default),
            path=f"{path}.{field}",
            problems=problems,
            low_exclusive=field != "minPodAge",
            high=policy_defaults.MAX_REBALANCE_DURATION_S,
        )
        durations[field] = (
            None if found is None else max(found, policy_defaults.REBALANCE_FLOORS_S[field])
        )
    counts: dict[str, int | None] = {}
    for field, default_count in (
        ("maxPerNode", policy_defaults.DEFAULT_REBALANCE_MAX_PER_NODE),
        ("maxTotal", policy_defaults.DEFAULT_REBALANCE_MAX_TOTAL),
    ):
        counts[field] = policy_fields.integer(
            spec.get(field, default_count),
            path=f"{path}.{field}",
            problems=problems,
            low=0,
            high=policy_defaults.MAX_REBALANCE_EVICTIONS,
        )
    per_workload, per_workload_percent = _per_workload(
        spec.get("maxPerWorkload"), path=f"{path}.maxPerWorkload", problems=problems
    )
    evict_jobs = spec.get("evictJobPods", policy_defaults.DEFAULT_REBALANCE_EVICT_JOB_PODS)
    if not isinstance(evict_jobs, bool):
        problems.add(f"{path}.evictJobPods", f"must be true or false, got {evict_jobs!r}")
    margin: float | None = None
    if spec.get("margin") is not None:
        margin = policy_fields.number(spec["margin"], path=f"{path}.margin", problems=problems)
        if margin is not None and margin < 0:
            problems.add(f"{path}.margin", f"must not be negative, got {margin:g}")
    if "triggers" in spec and "trigger" in spec:
        problems.add(path, "set trigger or triggers, not both")
        return None
    if "triggers" in spec:
        listed = spec["triggers"]
        if (
            not isinstance(listed, list)
            or not 1 <= len(listed) <= policy_defaults.MAX_REBALANCE_TRIGGERS
        ):
            problems.add(
                f"{path}.triggers",
                f"must be a list of 1 to {policy_defaults.MAX_REBALANCE_TRIGGERS} triggers, "
                f"got {listed!r}",
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
    max_per_node, max_total = (counts[f] for f in ("maxPerNode", "maxTotal"))
    window, interval, min_age, workload_interval = (
        durations[f] for f in ("window", "interval", "minPodAge", "workloadInterval")
    )
    assert rebalance_mode is not None and max_per_node is not None and max_total is not None
    assert isinstance(evict_jobs, bool)
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
        max_per_workload=per_workload,
        max_per_workload_percent=per_workload_percent,
        evict_job_pods=evict_jobs,
    )


def _per_workload(
    raw: object, *, path: str, problems: policy_fields.Problems
) -> tuple[int | None, int | None]:
    """``maxPerWorkload``: a count, or a percentage of the workload's pods (``"10%"``), as
    (count, percent); unset, neither (``RebalanceSpec.workload_limit``'s scaled rule)."""
    if raw is None:
        return None, None
    if isinstance(raw, str):
        digits = raw.removesuffix("%")
        if raw.endswith("%") and digits.isdecimal() and len(digits) <= 3 and int(digits) <= 100:
            return None, int(digits)
        problems.add(path, f'must be a count or a percentage from "0%" to "100%", got {raw!r}')
        return None, None
    count = policy_fields.integer(
        raw, path=path, problems=problems, low=0, high=policy_defaults.MAX_REBALANCE_EVICTIONS
    )
    return count, None


def _trigger(
    raw: object,
    *,
    path: str,
    metrics: Sequence[model.MetricSpec],
    margin: float | None,
    problems: policy_fields.Problems,
) -> model.Trigger | None:
    """One trigger; its margin is its own ``margin``, else the rebalance's, else 10 % of
    its value's magnitude."""
    before = len(problems.items)
    trigger = policy_fields.mapping(raw, path=path, problems=problems) or {}
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
        above = policy_fields.number(trigger["above"], path=f"{path}.above", problems=problems)
    elif trigger.get("below") is not None:
        below = policy_fields.number(trigger["below"], path=f"{path}.below", problems=problems)
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
        own = policy_fields.number(trigger["margin"], path=f"{path}.margin", problems=problems)
        if own is not None and own < 0:
            problems.add(f"{path}.margin", f"must not be negative, got {own:g}")
    if len(problems.items) > before or not isinstance(name, str):
        return None
    value = above if above is not None else below
    if own is None:
        own = policy_defaults.DEFAULT_REBALANCE_MARGIN_FRACTION * abs(value or 0.0)
    return model.Trigger(metric=name, above=above, below=below, margin=own)
