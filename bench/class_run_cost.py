"""Cost per pod of a backlog of one Deployment's replicas: one at a time vs as a run.

In process, no cluster: bench/cycle_cost.py's nodes, bound pods, policy and fresh metric
values, held in a real ``runtime.cache.ClusterCache``. Each of ``--pods`` replicas of one
ReplicaSet is decided as the scheduler's attempt does (the cache's snapshot and table, the
decision, the assume on the chosen node), either by ``core.cycle.schedule_one`` for each
pod (one at a time) or by one ``core.class_run.Run`` for the whole backlog (a run). The two
paths start from identical caches, and every decision of the run is checked equal to the
one-at-a-time decision of the same pod (node, message, verdicts). Reported: µs per pod,
the median and range of ``--repeats`` passes (each on fresh caches), per size, and the
median and range of each pass's ratio (run / one at a time: the paired figure).

    python -m bench.class_run_cost --sizes 100,1000,5000 --pods 300 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

from bench import cycle_cost
from metricsched.core import class_run, cycle, framework, model
from metricsched.runtime import cache as cache_mod

_NAMES = frozenset({"metricsched"})
_STEP_S = 0.002  # wall time between two decisions, as in a backlog


def _cache(setup: dict[str, Any]) -> cache_mod.ClusterCache:
    cache = cache_mod.ClusterCache()
    for state in setup["snapshot"].nodes.values():
        cache.upsert_node(state.node)
        for pod in state.pods:
            cache.upsert_pod(pod, ours=False)
    for chosen in setup["policies"]:
        cache.upsert_policy(chosen)
    return cache


def _replicas(setup: dict[str, Any], count: int, tag: str) -> list[model.PodInfo]:
    return [
        dataclasses.replace(
            setup["pod"],
            name=f"web-{tag}-{i}",
            uid=f"uid-web-{tag}-{i}",
            controller="ReplicaSet/bench-web",
        )
        for i in range(count)
    ]


Decide = Callable[[model.PodInfo, model.ClusterSnapshot, float, int], model.Decision]


def _step(
    cache: cache_mod.ClusterCache, pod: model.PodInfo, decide: Decide, now: float, index: int
) -> tuple[float, model.Decision]:
    """One attempt as the scheduler makes it (snapshot, decision, assume); its CPU seconds."""
    began = time.thread_time()  # CPU time: the box's other load does not count
    snapshot = cache.snapshot(now=now)
    decision = decide(pod, snapshot, now, index)
    if decision.node is not None:
        cache.assume(pod, decision.node, now=now)
    return time.thread_time() - began, decision


def _passes(
    caches: tuple[cache_mod.ClusterCache, cache_mod.ClusterCache],
    pods: list[model.PodInfo],
    decide: tuple[Decide, Decide],
    start: float,
) -> tuple[tuple[float, float], bool]:
    """Each pod decided both ways, interleaved pod by pod (so drift in the machine's load
    hits both alike): the µs per pod of each way, and whether every decision matched."""
    spent = [0.0, 0.0]
    same = True
    for index, pod in enumerate(pods):
        now = start + index * _STEP_S
        first, expected = _step(caches[0], pod, decide[0], now, index)
        second, got = _step(caches[1], pod, decide[1], now, index)
        spent[0] += first
        spent[1] += second
        same = same and got == expected
    return (spent[0] / len(pods) * 1e6, spent[1] / len(pods) * 1e6), same


class _OneAtATime:
    """The scheduler's decision before runs: ``schedule_one`` for every pod."""

    def __init__(self, setup: dict[str, Any], cache: cache_mod.ClusterCache) -> None:
        self.setup, self.cache, self.memo = setup, cache, framework.Memo()

    def __call__(
        self, pod: model.PodInfo, snapshot: model.ClusterSnapshot, now: float, index: int
    ) -> model.Decision:
        return cycle.schedule_one(
            pod=pod,
            snapshot=snapshot,
            table=self.cache.table(snapshot),
            policies=list(self.cache.policies.values()),
            metrics=self.setup["metrics"],
            default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
            now=now,
            scheduler_names=_NAMES,
            rr_counter=index,
            seed=zlib.crc32(pod.uid.encode()),
            detail=False,
            memo=self.memo,
        )


class _InRuns(_OneAtATime):
    """The scheduler's decision with runs: the run of the pod's class (core.class_run)."""

    run: class_run.Run | None = None

    def __call__(
        self, pod: model.PodInfo, snapshot: model.ClusterSnapshot, now: float, index: int
    ) -> model.Decision:
        generation = self.cache.generation
        if self.run is None or not self.run.admits(pod, generation=generation):
            self.run = class_run.Run.start(
                pod=pod,
                policies=list(self.cache.policies.values()),
                default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
                scheduler_names=_NAMES,
                generation=generation,
                memo=self.memo,
            )
        assert self.run is not None
        return self.run.decide(
            pod=pod,
            snapshot=snapshot,
            table=self.cache.table(snapshot),
            metrics=self.setup["metrics"],
            now=now,
            rr_counter=index,
            seed=zlib.crc32(pod.uid.encode()),
            detail=False,
        )


def measure_size(n: int, *, pods: int, repeats: int) -> dict[str, Any]:
    now = time.time()
    setup = cycle_cost.setup(n, now)
    alone_us: list[float] = []
    run_us: list[float] = []
    for repeat in range(repeats):
        caches = (_cache(setup), _cache(setup))
        ways: tuple[Decide, Decide] = (
            _OneAtATime(setup, caches[0]),
            _InRuns(setup, caches[1]),
        )
        # Warm each cache (its table, the memo's class columns) with one pod first, as a
        # running scheduler is.
        _passes(caches, _replicas(setup, 1, f"warm{repeat}"), ways, now)
        backlog = _replicas(setup, pods, f"r{repeat}")
        (first, second), same = _passes(caches, backlog, ways, now + 1.0)
        if not same:
            raise AssertionError(f"{n} nodes: a run decided differently from one at a time")
        alone_us.append(first)
        run_us.append(second)
    row = {
        "nodes": n,
        "pods": pods,
        "one_at_a_time_us_per_pod": round(statistics.median(alone_us), 1),
        "run_us_per_pod": round(statistics.median(run_us), 1),
        "one_at_a_time_range": [round(min(alone_us), 1), round(max(alone_us), 1)],
        "run_range": [round(min(run_us), 1), round(max(run_us), 1)],
    }
    # Each repeat's two ways ran interleaved pod by pod: their ratio is the paired figure.
    ratios = [run / alone for run, alone in zip(run_us, alone_us, strict=True)]
    row["ratio_median"] = round(statistics.median(ratios), 3)
    row["ratio_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.class_run_cost", description=__doc__)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for n in (int(size) for size in args.sizes.split(",")):
        row = measure_size(n, pods=args.pods, repeats=args.repeats)
        print(f"[bench] class run cost {row}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
