"""The load generator: creates the benchmark's pods and records when each was created.

``create_backlog`` creates M pods as fast as the API server takes them (a bounded number
of requests in flight); ``create_steady`` is open-loop: pod i is sent at ``t0 + i / rate``
whether or not earlier creations have returned. For each pod it records the time the
request was sent and the time the 201 arrived (``time.time()``, the same clock as the
watcher's); create-to-bind latency is measured from the latter.
"""

from __future__ import annotations

import asyncio
import time

from bench.kube import ApiError, Kube, pod_body

Created = dict[str, tuple[float, float]]  # name -> (sent, created)


async def _create(
    kube: Kube,
    namespace: str,
    name: str,
    scheduler: str,
    out: Created,
    *,
    node: str | None = None,
) -> None:
    body = pod_body(name, scheduler)
    if node is not None:  # bound at creation: no scheduler involved
        body["spec"]["nodeName"] = node
    for attempt in range(8):
        sent = time.time()
        try:
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
        except ApiError as e:
            if e.status == 409:  # created by an earlier attempt whose answer was lost
                out.setdefault(name, (sent, time.time()))
                return
            if e.status not in (429, 500, 503, 504) or attempt == 7:
                raise
        except (OSError, TimeoutError):
            if attempt == 7:
                raise
        else:
            out[name] = (sent, time.time())
            return
        await asyncio.sleep(0.2 * (attempt + 1))


def pod_name(i: int) -> str:
    return f"p-{i:05d}"


async def create_backlog(
    kube: Kube, namespace: str, scheduler: str, count: int, *, in_flight: int = 24
) -> Created:
    out: Created = {}
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await _create(kube, namespace, pod_name(i), scheduler, out)

    await asyncio.gather(*(one(i) for i in range(count)))
    return out


async def create_bound(
    kube: Kube,
    namespace: str,
    nodes: list[str],
    count: int,
    *,
    start: int = 0,
    in_flight: int = 24,
) -> Created:
    """Pods ``start``..``count - 1`` created with ``spec.nodeName`` set, round-robin over
    ``nodes``: already-bound pods every scheduler's cache has to hold (the memory trial)."""
    out: Created = {}
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            node = nodes[i % len(nodes)]
            await _create(kube, namespace, pod_name(i), "bench-filler", out, node=node)

    await asyncio.gather(*(one(i) for i in range(start, count)))
    return out


async def create_steady(
    kube: Kube, namespace: str, scheduler: str, *, rate: float, duration_s: float
) -> Created:
    out: Created = {}
    count = int(rate * duration_s)
    t0 = time.monotonic() + 0.1
    tasks = []
    for i in range(count):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_create(kube, namespace, pod_name(i), scheduler, out)))
    await asyncio.gather(*tasks)
    return out
