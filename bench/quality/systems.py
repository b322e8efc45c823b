"""The systems the quality benchmark compares, and metricsched's utilisation policy.

Each runs as bench/systems.py starts it (same binaries, same admin token), one at a time:
kube-scheduler v1.35.4 with its default profile, metricsched with the estimate on (as
declared, and with learn: true) and off (same policy otherwise), and random placement
(bench.quality.randombinder).

The rebalance pair (issue 23) plays scenario (c) only, with its own pods owned by
1-replica ReplicaSets under PodDisruptionBudgets (bench/quality/owned.py), since
rebalancing moves only pods a controller recreates: metricsched with the estimate on as
declared, rebalancing off (``metricsched-owned``) and on (``metricsched-rebalance``).
"""

from __future__ import annotations

from typing import Any

from bench import systems
from bench.quality import scenarios

KUBE = "kube-scheduler"
ESTIMATE = "metricsched-estimate"
ESTIMATE_LEARN = "metricsched-estimate-learn"
NO_ESTIMATE = "metricsched-no-estimate"
RANDOM = "random"
OWNED = "metricsched-owned"
REBALANCE = "metricsched-rebalance"
ORDER = (KUBE, ESTIMATE, ESTIMATE_LEARN, NO_ESTIMATE, RANDOM, OWNED, REBALANCE)
PAIR = (OWNED, REBALANCE)  # pods owned by ReplicaSets; rebalancing off, on
ONLY: dict[str, tuple[str, ...]] = {OWNED: ("c",), REBALANCE: ("c",)}  # scenarios they play
THRESHOLD = 0.8
REFRESH = "5s"

SYSTEMS: dict[str, systems.System] = {
    KUBE: systems.System(KUBE, "bench-kube", "kube-scheduler v1.35.4", qps=50, burst=100),
    ESTIMATE: systems.System(
        ESTIMATE, "metricsched", "metricsched, estimate on", refresh_interval=REFRESH
    ),
    ESTIMATE_LEARN: systems.System(
        ESTIMATE_LEARN,
        "metricsched",
        "metricsched, estimate on, learn on",
        refresh_interval=REFRESH,
    ),
    NO_ESTIMATE: systems.System(
        NO_ESTIMATE, "metricsched", "metricsched, estimate off", refresh_interval=REFRESH
    ),
    RANDOM: systems.System(RANDOM, "bench-random", "random placement"),
    OWNED: systems.System(
        OWNED, "metricsched", "metricsched, ReplicaSets, rebalance off", refresh_interval=REFRESH
    ),
    REBALANCE: systems.System(
        REBALANCE, "metricsched", "metricsched, ReplicaSets, rebalance on", refresh_interval=REFRESH
    ),
}
# Rebalancing at the scenario's pace (lives of 1-2.5 minutes, a hot spot that puts
# three quarters of a node's cpu to other use at once): a node past 0.8 for two scrapes
# sheds up to 10 pods at a time, at most 30 in all per 10 s, each to a node the dry run
# finds at or below 0.7 with the pod's estimate; PodDisruptionBudgets pace it further.
REBALANCE_SPEC: dict[str, Any] = {
    "mode": "Evict",
    "trigger": {"metric": "cpu"},  # above the threshold's max, 0.8
    "window": "10s",
    "interval": "10s",
    "maxPerNode": 10,
    "maxTotal": 30,
    "minPodAge": "10s",
    "margin": 0.1,
}


def is_metricsched(name: str) -> bool:
    return name in (ESTIMATE, ESTIMATE_LEARN, NO_ESTIMATE, OWNED, REBALANCE)


def owns_pods(name: str) -> bool:
    """The system's scenario pods are 1-replica ReplicaSets under budgets (owned.py)."""
    return name in PAIR


def plays(name: str, scenario: str) -> bool:
    return scenario in ONLY.get(name, (scenario,))


def policy(
    system: str, *, threshold: float = THRESHOLD, margin: float | None = None
) -> dict[str, Any]:
    """The SchedulingPolicy spec a user would write for "keep nodes under 80 % cpu":
    the load model's utilisation, minimised and thresholded, blended with
    kube-scheduler's default scores; the estimate states the typical pod's usage. The
    rebalance system adds ``spec.rebalance`` (``REBALANCE_SPEC``; ``margin`` replaces its
    margin)."""
    estimate: dict[str, Any] = (
        {
            "from": "Amount",
            "resource": "cpu",
            "amount": scenarios.TYPICAL_USAGE,
            "learn": system == ESTIMATE_LEARN,
            "settleTime": "45s",
        }
        if system in (ESTIMATE, ESTIMATE_LEARN, OWNED, REBALANCE)
        else {"from": "None"}
    )
    rebalance: dict[str, Any] = {}
    if system == REBALANCE:
        rebalance = {"rebalance": dict(REBALANCE_SPEC)}
        if margin is not None:
            rebalance["rebalance"]["margin"] = margin
    return {
        "podSelector": {},
        "metrics": [
            {
                "name": "cpu",
                "prometheus": {
                    "query": "max by (node) (node_cpu_utilisation)",
                    "nodeLabel": "node",
                },
                "weight": 10,
                "goal": "Minimize",
                "threshold": {"max": threshold},
                "onMissing": "Neutral",
                "estimate": estimate,
            }
        ],
        "maxMetricAge": "2m",
        "burstPenalty": 5,
        "burstWindow": "60s",
        "fallback": {"strategy": "LeastAllocated"},
        **rebalance,
    }
