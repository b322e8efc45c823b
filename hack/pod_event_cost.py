"""µs of CPU per bound-pod watch event on the informer's path, with and without the digest
that skips events carrying nothing new (``parse.pod_digest``): a status-only update, and
a new start time (as the kubelet's Running brings). Each event goes through
``Ingest.on_bound_pod`` and a ``cache.snapshot()`` (which re-sums what it dirtied) on
1,000 nodes holding 10 pods each. ``PYTHONPATH=. .venv/bin/python hack/pod_event_cost.py``."""

from __future__ import annotations

import copy
import time
from typing import Any

from metricsched.core import parse
from tests.unit.runtime import test_unchanged_pod_events as cases
from tests.unit.runtime.test_watches_and_relist import _watches

NODES, PODS_PER_NODE, ROUNDS = 1000, 10, 3


def _bodies() -> list[dict[str, Any]]:
    bodies = []
    for n in range(NODES):
        for p in range(PODS_PER_NODE):
            body = cases._bound_pod()
            body["metadata"]["uid"] = body["metadata"]["name"] = f"pod-{n}-{p}"
            body["spec"]["nodeName"] = f"n{n}"
            body["metadata"]["resourceVersion"] = "10"
            bodies.append(body)
    return bodies


def _run(bodies: list[dict[str, Any]], change: str, *, digest: bool) -> float:
    w = _watches()
    for n in range(NODES):
        node = cases.build_node_body(f"n{n}", cpu="64", memory="256Gi")
        node["metadata"]["resourceVersion"] = "1"
        w.on_node("ADDED", node)
    for body in bodies:
        w.on_bound_pod("ADDED", body)
    w.cache.snapshot()
    events = []
    for rv, body in enumerate(bodies, start=11):
        event = copy.deepcopy(body)
        event["metadata"]["resourceVersion"] = str(rv)
        if change == "start time":  # a stamp: read from the last parse, node re-summed
            event["status"]["startTime"] = "2026-11-29T10:00:30Z"
        else:
            event["status"]["podIP"] = "10.9.9.9"
        events.append(event)
    saved = parse.pod_digest
    if not digest:
        parse.pod_digest = lambda body: None  # type: ignore[assignment]
    try:
        started = time.process_time()
        for event in events:
            w.on_bound_pod("MODIFIED", event)
            w.cache.snapshot()
        spent = time.process_time() - started
    finally:
        parse.pod_digest = saved
    return spent / len(events) * 1e6


def _each(function: Any, body: dict[str, Any], n: int = 20_000) -> float:
    started = time.process_time()
    for _ in range(n):
        function(body)
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    body = cases._bound_pod()
    print(f"pod_from_body: {min(_each(parse.pod_from_body, body) for _ in range(ROUNDS)):.1f} µs")
    print(f"pod_digest:    {min(_each(parse.pod_digest, body) for _ in range(ROUNDS)):.1f} µs")
    bodies = _bodies()
    for change in ("status-only", "start time"):
        for digest in (False, True):
            best = min(_run(bodies, change, digest=digest) for _ in range(ROUNDS))
            label = "with digest" if digest else "full parse "
            print(f"{change:12s} {label}: {best:.1f} µs per event (+ snapshot)")


if __name__ == "__main__":
    main()
