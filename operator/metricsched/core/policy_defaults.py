"""A SchedulingPolicy's names, limits and defaults: the CRD's, as the parser applies them.

The defaults are the same as ``crds/schedulingpolicy.yaml``'s; a unit test parses the CRD
and compares the two (``DEFAULTS``). The parser (``policy`` and the ``policy_*`` modules it
calls) fills them in itself, because bodies do not always pass through the API server's
defaulting.

No I/O here: constants only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from metricsched.core import model
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
    "spec.rebalance.evictJobPods": DEFAULT_REBALANCE_EVICT_JOB_PODS,
    **{f"spec.kubeScores.{name}": weight for name, weight in DEFAULT_KUBE_WEIGHTS.items()},
}
"""Every default of the CRD's spec, by dotted path (``[]`` = each list item)."""
