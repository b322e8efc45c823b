"""The independent watcher: a process of its own that records when each pod is first seen bound.

    python -m bench.watcher --namespace NS --expect M --out FILE --ready-file FILE

It LISTs the namespace's pods, then WATCHes from that resourceVersion with the raw API
(aiohttp, no generated models) and stores, per pod name, the wall-clock time (ms
resolution, ``time.time()``) at which an event first showed ``spec.nodeName`` set, the node,
and when it first saw the pod at all (for a watcher-only latency). It exits once
``expect`` pods are bound, or on SIGTERM, writing ``{"bound": {name: [t, node]},
"added": {name: t}}`` to ``--out``. It runs in neither the scheduler nor the load generator, so
their stalls do not move its clock; it does share the machine's CPUs with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from bench import env as env_mod
from bench import helper_process
from bench.kube import ApiError, Kube


class Recorder:
    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.bound: dict[str, tuple[float, str]] = {}
        self.added: dict[str, float] = {}  # first seen (bound or not)
        self.done = asyncio.Event()

    def see(self, t: float, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName")
        self.added.setdefault(name, t)
        if node and name not in self.bound:
            self.bound[name] = (t, node)
            if len(self.bound) >= self.expect:
                self.done.set()


async def _list(kube: Kube, namespace: str, rec: Recorder) -> str:
    page = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods", timeout_s=120)
    now = time.time()
    for pod in page.get("items") or []:
        rec.see(now, pod)
    return str(page["metadata"]["resourceVersion"])


async def _watch(kube: Kube, namespace: str, rec: Recorder, ready_file: Path | None) -> None:
    rv = await _list(kube, namespace, rec)
    path = f"/api/v1/namespaces/{namespace}/pods"

    def opened() -> None:
        if ready_file is not None and not ready_file.exists():
            ready_file.write_text("ready")

    while not rec.done.is_set():
        params = {"resourceVersion": rv, "timeoutSeconds": "600"}
        try:
            async for t, event in kube.watch(path, params, on_open=opened):
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(int(obj.get("code") or 0), str(obj.get("message")))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    rec.see(t, obj)
                if rec.done.is_set():
                    return
        except ApiError as e:
            if e.status != 410:  # Gone: resourceVersion too old, relist
                raise
            rv = await _list(kube, namespace, rec)


async def run(namespace: str, expect: int, out: Path, ready_file: Path | None) -> None:
    cluster = env_mod.load()
    kube = Kube(cluster.server, cluster.token, cluster.ca_file, connections=4)
    rec = Recorder(expect)
    task = await helper_process.run_until_stopped(
        kube, _watch(kube, namespace, rec, ready_file), stop=rec.done
    )
    error = None
    if task.done() and not task.cancelled() and task.exception() is not None:
        error = repr(task.exception())
    body = {
        "bound": {k: [round(t, 4), n] for k, (t, n) in rec.bound.items()},
        "added": {k: round(t, 4) for k, t in rec.added.items()},
        "error": error,
    }
    out.write_text(json.dumps(body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args()
    asyncio.run(run(args.namespace, args.expect, args.out, args.ready_file))


if __name__ == "__main__":
    main()
