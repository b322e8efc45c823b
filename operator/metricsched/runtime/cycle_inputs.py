"""The one builder of a scheduling cycle's inputs (``core.cycle.Inputs``) from the
runtime's state: the scheduler, ``metricsched explain``, shadow evaluation and
rebalancing all read the cluster, the policies and the metrics through it, and change
only what their question changes."""

from __future__ import annotations

from metricsched.config import Config
from metricsched.core import cycle
from metricsched.edges import metric_store
from metricsched.runtime import cache as cache_mod


def build(
    *,
    cache: cache_mod.ClusterCache,
    store: metric_store.MetricStore,
    config: Config,
    now: float,
    namespace: str,
) -> cycle.Inputs:
    """What a cycle reads besides the pod, at ``now``, for a pod of ``namespace``: the one
    place the scheduler, ``metricsched explain``, shadow evaluation and rebalancing get
    it (the snapshot and its table, the policies, the metric view, the operator's default
    strategy and scheduler names, the other installs' policies of the namespace)."""
    snapshot = cache.snapshot(now=now)
    return cycle.Inputs(
        snapshot=snapshot,
        table=cache.table(snapshot),
        policies=list(cache.policies.values()),
        metrics=store.view(),
        default_fallback=config.default_fallback,
        scheduler_names=config.scheduler_names,
        now=now,
        elsewhere=cache.elsewhere_in(namespace) if namespace else (),
    )
