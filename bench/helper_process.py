"""What the benchmark's own helper processes share: running until SIGTERM or SIGINT (or
their own stop), for the Python binders (``bench.nullbinder``,
``bench.quality.randombinder``) and the watcher (``bench.watcher``); and the binders'
one Binding POST."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any

from bench.kube import Kube


async def post_binding(kube: Kube, *, namespace: str, name: str, uid: str, node: str) -> None:
    """``POST pods/binding`` of the pod to ``node`` (raises what ``Kube.request`` raises)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)


async def run_until_stopped(
    kube: Kube, work: Coroutine[Any, Any, None], *, stop: asyncio.Event | None = None
) -> asyncio.Task[None]:
    """Run ``work`` until it ends, ``stop`` is set or SIGTERM/SIGINT arrives (they set
    ``stop``); then close ``kube``. Returns the work's task, done or cancelled; an error it
    ended with is raised here."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.create_task(work)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
    for t in (task, stopper):
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await t
    await kube.close()
    return task
