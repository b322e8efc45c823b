"""Random placement: the quality benchmark's floor ("the Elixir seed's scheduler").

    python -m bench.quality.randombinder --scheduler-name bench-random --seed 1

Like ``bench.nullbinder`` (one LIST+WATCH, one ``POST pods/binding`` per pod), but each
pod goes to a node chosen uniformly at random among the Ready, untainted, uncordoned
nodes that match its nodeSelector and still fit its cpu, memory and pod-count requests
(counting every pod bound to the node, whichever scheduler bound it). A pod that fits
nowhere is retried every second. No scores, no metrics, no events.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
from typing import Any

from bench import env as env_mod
from bench import helper_process
from bench.kube import ApiError, Kube, schedulable_node_names
from metricsched.core import quantity


@dataclasses.dataclass
class Room:
    labels: dict[str, str]
    cpu_m: int
    memory: int
    pods: int


def requests(pod: dict[str, Any]) -> tuple[int, int]:
    """The pod's cpu (millicores) and memory (bytes) requests, summed over containers."""
    cpu = mem = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += quantity.parse_milli(req.get("cpu", "0"))
        mem += quantity.parse_int(req.get("memory", "0"))
    return cpu, mem


def fits(room: Room, used: tuple[int, int, int], pod: dict[str, Any]) -> bool:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if any(room.labels.get(k) != v for k, v in selector.items()):
        return False
    cpu, mem = requests(pod)
    return used[0] + cpu <= room.cpu_m and used[1] + mem <= room.memory and used[2] + 1 <= room.pods


class RandomBinder:
    def __init__(self, kube: Kube, scheduler: str, seed: int) -> None:
        self.kube = kube
        self.scheduler = scheduler
        self.rng = random.Random(seed)
        self.rooms: dict[str, Room] = {}
        self.placed: dict[str, tuple[str, int, int]] = {}  # uid -> node, cpu, memory
        self.pending: dict[str, dict[str, Any]] = {}  # uid -> pod
        self.wake = asyncio.Event()
        self.bound = 0
        self.errors = 0

    def used(self, node: str) -> tuple[int, int, int]:
        cpu = mem = pods = 0
        for n, c, m in self.placed.values():
            if n == node:
                cpu, mem, pods = cpu + c, mem + m, pods + 1
        return cpu, mem, pods

    def see(self, kind: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        phase = (pod.get("status") or {}).get("phase")
        gone = kind == "DELETED" or phase in ("Succeeded", "Failed")
        if gone:
            self.placed.pop(uid, None)
            self.pending.pop(uid, None)
            self.wake.set()
            return
        if spec.get("nodeName"):
            self.pending.pop(uid, None)
            if uid not in self.placed:
                self.placed[uid] = (spec["nodeName"], *requests(pod))
        elif spec.get("schedulerName") == self.scheduler and uid not in self.placed:
            self.pending[uid] = pod
            self.wake.set()

    async def feed(self) -> None:
        page = await self.kube.request("GET", "/api/v1/pods", timeout_s=120)
        for pod in page.get("items") or []:
            self.see("ADDED", pod)
        rv = str(page["metadata"]["resourceVersion"])
        while True:
            try:
                async for _, event in self.kube.watch("/api/v1/pods", {"resourceVersion": rv}):
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.see(str(event["type"]), obj)
            except ApiError as e:
                if e.status != 410:
                    raise
                return await self.feed()

    async def bind(self, pod: dict[str, Any], node: str) -> None:
        meta = pod["metadata"]
        try:
            await helper_process.post_binding(
                self.kube,
                namespace=meta["namespace"],
                name=meta["name"],
                uid=meta["uid"],
                node=node,
            )
            self.bound += 1
        except (ApiError, OSError, TimeoutError) as e:
            self.errors += 1
            self.placed.pop(meta["uid"], None)
            if not (isinstance(e, ApiError) and e.status in (404, 409)):
                self.pending[meta["uid"]] = pod  # retry

    async def place(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=1.0)
            self.wake.clear()
            for uid, pod in sorted(self.pending.items(), key=lambda kv: kv[1]["metadata"]["name"]):
                candidates = [n for n, r in self.rooms.items() if fits(r, self.used(n), pod)]
                if not candidates:
                    continue
                node = self.rng.choice(sorted(candidates))
                del self.pending[uid]
                self.placed[uid] = (node, *requests(pod))  # assume until the watch confirms
                await self.bind(pod, node)

    async def run(self) -> None:
        nodes = await self.kube.list_nodes()
        ok = set(schedulable_node_names(nodes))
        for node in nodes:
            name = node["metadata"]["name"]
            if name not in ok:
                continue
            alloc = (node.get("status") or {}).get("allocatable") or {}
            self.rooms[name] = Room(
                dict(node["metadata"].get("labels") or {}),
                quantity.parse_milli(alloc.get("cpu", "0")),
                quantity.parse_int(alloc.get("memory", "0")),
                quantity.parse_int(alloc.get("pods", "110")),
            )
        placer = asyncio.create_task(self.place())
        try:
            await self.feed()
        finally:
            placer.cancel()


async def main_async(scheduler: str, seed: int) -> None:
    cluster = env_mod.load()
    kube = Kube(cluster.server, cluster.token, cluster.ca_file, connections=8)
    binder = RandomBinder(kube, scheduler, seed)
    await helper_process.run_until_stopped(kube, binder.run())
    print(f"random binder: bound {binder.bound}, errors {binder.errors}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheduler-name", default="bench-random")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(main_async(args.scheduler_name, args.seed))


if __name__ == "__main__":
    main()
