"""The systems the quality benchmark compares, and metricsched's utilisation policy.

Each runs as bench/systems.py starts it (same binaries, same admin token), one at a time:
kube-scheduler v1.35.4 with its default profile, metricsched with the estimate on (as
declared, and with learn: true) and off (same policy otherwise), and random placement
(bench.quality.randombinder).
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
ORDER = (KUBE, ESTIMATE, ESTIMATE_LEARN, NO_ESTIMATE, RANDOM)
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
}


def is_metricsched(name: str) -> bool:
    return name in (ESTIMATE, ESTIMATE_LEARN, NO_ESTIMATE)


def policy(system: str, *, threshold: float = THRESHOLD) -> dict[str, Any]:
    """The SchedulingPolicy spec a user would write for "keep nodes under 80 % cpu":
    the load model's utilisation, minimised and thresholded, blended with
    kube-scheduler's default scores; the estimate states the typical pod's usage."""
    estimate: dict[str, Any] = (
        {
            "from": "Amount",
            "resource": "cpu",
            "amount": scenarios.TYPICAL_USAGE,
            "learn": system == ESTIMATE_LEARN,
            "settleTime": "45s",
        }
        if system in (ESTIMATE, ESTIMATE_LEARN)
        else {"from": "None"}
    )
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
    }
