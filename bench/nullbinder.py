"""The Python null binder: the practical limit of a Python binder on this API server.

    python -m bench.nullbinder --scheduler-name bench-null --concurrency 16

No filtering and no scoring: it LISTs the nodes once (keeping the Ready, uncordoned,
untainted ones), LISTs and then WATCHes the pending pods of its scheduler name with a
server-side field selector, and binds each pod to the next node round-robin, one
``POST pods/binding`` per pod, with ``--concurrency`` requests in flight on one aiohttp
session. It posts no Events: it is a floor on what binding alone costs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from typing import Any

from bench import env as env_mod
from bench import helper_process
from bench.kube import ApiError, Kube, schedulable_node_names


class NullBinder:
    def __init__(self, kube: Kube, scheduler: str, concurrency: int) -> None:
        self.kube = kube
        self.selector = f"spec.schedulerName={scheduler},spec.nodeName="
        self.concurrency = concurrency
        self.queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self.seen: set[str] = set()
        self.bound = 0
        self.errors = 0

    def offer(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if uid in self.seen or (pod.get("spec") or {}).get("nodeName"):
            return
        self.seen.add(uid)
        self.queue.put_nowait((meta["namespace"], meta["name"], uid))

    async def list_pending(self) -> str:
        """Offer every pending pod (all pages); return the list's resourceVersion."""
        cont = ""
        while True:
            params = {"fieldSelector": self.selector, "limit": "500"}
            if cont:
                params["continue"] = cont
            page = await self.kube.request("GET", "/api/v1/pods", params=params, timeout_s=120)
            for pod in page.get("items") or []:
                self.offer(pod)
            cont = page["metadata"].get("continue") or ""
            if not cont:
                return str(page["metadata"]["resourceVersion"])

    async def feed(self) -> None:
        rv = await self.list_pending()
        while True:
            watch = {"fieldSelector": self.selector, "resourceVersion": rv}
            try:
                async for _, event in self.kube.watch("/api/v1/pods", watch):
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") == "ADDED":
                        self.offer(obj)
            except ApiError as e:
                if e.status != 410:
                    raise
                rv = await self.list_pending()

    async def worker(self, nodes: itertools.cycle[str]) -> None:
        while True:
            namespace, name, uid = await self.queue.get()
            try:
                await helper_process.post_binding(
                    self.kube, namespace=namespace, name=name, uid=uid, node=next(nodes)
                )
                self.bound += 1
            except (ApiError, OSError, TimeoutError) as e:
                self.errors += 1
                if not (isinstance(e, ApiError) and e.status in (404, 409)):
                    self.queue.put_nowait((namespace, name, uid))  # retry

    async def run(self) -> None:
        nodes = schedulable_node_names(await self.kube.list_nodes())
        cycle = itertools.cycle(nodes)
        workers = [asyncio.create_task(self.worker(cycle)) for _ in range(self.concurrency)]
        try:
            await self.feed()
        finally:
            for w in workers:
                w.cancel()


async def main_async(scheduler: str, concurrency: int) -> None:
    cluster = env_mod.load()
    kube = Kube(cluster.server, cluster.token, cluster.ca_file, connections=concurrency + 2)
    binder = NullBinder(kube, scheduler, concurrency)
    await helper_process.run_until_stopped(kube, binder.run())
    print(f"null binder: bound {binder.bound}, errors {binder.errors}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheduler-name", default="bench-null")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main_async(args.scheduler_name, args.concurrency))


if __name__ == "__main__":
    main()
