"""Cost of one shadow evaluation versus node count, in process, on synthetic snapshots.

The snapshots, policy and metric values of ``bench.cycle_cost`` (5 bound pods per node,
one Prometheus metric fresh on every node), the policy switched to ``mode: Shadow``, and
one of the bound pods taken as just placed by ``default-scheduler``:
``core.shadow.evaluate`` is timed as the operator's shadow task calls it. Median of up to
200 runs per size. ``python -m bench.shadow_cost``; no cluster.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from bench import cycle_cost
from metricsched.core import model, shadow

SIZES = (100, 1000, 2000)


def measure(sizes: tuple[int, ...] = SIZES, budget_s: float = 2.0) -> list[dict[str, float]]:
    now = time.time()
    rows = []
    for n in sizes:
        s = cycle_cost.setup(n, now)
        trial = dataclasses.replace(s["policies"][0], mode=model.PolicyMode.SHADOW)
        placed = next(iter(s["snapshot"].nodes[model.NodeName("node-2")].pods))
        pod = dataclasses.replace(placed, scheduler_name="default-scheduler")

        def one(
            s: dict[str, Any] = s, pod: model.PodInfo = pod, trial: model.Policy = trial
        ) -> shadow.Evaluation:
            return shadow.evaluate(
                pod=pod,
                policy=trial,
                snapshot=s["snapshot"],
                table=s["table"],
                metrics=s["metrics"],
                now=now,
            )

        assert one().policy_node is not None
        row = {"nodes": float(n), "evaluate_ms": cycle_cost._median_ms(one, budget_s, 200)}
        print(f"[bench] shadow evaluation cost {row}", flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    measure()
