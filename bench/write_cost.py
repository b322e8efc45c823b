"""CPU per Binding + Event: the kubernetes client in threads (before) vs aiohttp on the
event loop (now), measured in one run.

    python -m bench writes [--pods 2000] [--rounds 3] [--concurrency 16] [--plain]
        [--variants thread,loop,thread-dropped,loop-dropped,loop-binding]

A loopback API server runs in another process (``python -m bench.write_cost serve``:
aiohttp, over TLS with a throwaway self-signed certificate unless ``--plain``; it answers
a Binding with a Status and an Event with the Event, as kube-apiserver does), so the CPU
measured here is the client's alone. This process sends, per variant, ``--pods`` pods'
writes, one Binding and one Event each, with at most ``--concurrency`` Bindings in
flight (the scheduler's ``--bind-concurrency``):

- ``thread`` (before): what the scheduler did until this change: the Binding through the
  kubernetes client's ``ApiClient`` (urllib3, ``hack/kube_sync.py::request``, once
  ``edges/kube.py``'s; the call ``kube.write`` made) in ``asyncio.to_thread``, then the
  recorder's Event body through the same call in ``to_thread``; a thread pool of
  ``concurrency + 8`` as the operator had.
- ``loop`` (now): ``edges/binder.bind`` and ``EventRecorder.post`` through
  ``edges/kube_http`` (aiohttp, orjson) on the loop, as ``runtime/scheduler.py`` calls them.

``loop-binding`` is the Binding alone, as the scheduler sends it: ``binder.bind`` with a
fence and the decision record (``RECORD``) as its annotation, no Event.

And per Event over the budget (``--pods`` of them): ``thread-dropped`` is the hop into a
thread to a budget that says no (what a dropped Event cost before); ``loop-dropped`` is
``EventRecorder.post`` saying ``Dropped`` with no body built and no task made.

CPU is ``getrusage(RUSAGE_SELF)`` (user + system, every thread) around each batch, after
a warm-up batch per variant (connections, TLS, threads). Variants alternate ABBA over the
rounds so that drift in the machine's load falls on all; the medians and the ratio are
printed and written to ``bench/results/write-cost.json``. Only CPU is compared, never
wall-clock claims.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes.client
from aiohttp import web

from bench import env as env_mod
from hack import kube_sync
from metricsched.edges import binder, events, kube, kube_http, observe, wire

NAMESPACE = "shop"
MESSAGE = (
    "Successfully assigned shop/{name} to node-3 (policy shop/web-latency: score 92 "
    "[latency 0.12 → 100, cpu 0.35 → 81]; runner-up node-5 88)"
)
# A decision record as the scheduler puts on every Binding (≈ 480 B, as measured live).
RECORD = (
    '{"v":1,"policy":"shop/web-latency","node":"node-3","score":92.5,"metrics":'
    '{"latency":0.1234,"cpu":0.3456},"kube":{"TaintToleration":100,"NodeAffinity":0,'
    '"PodTopologySpread":87.5,"InterPodAffinity":0},"runnerUp":{"node":"node-5","score":88,'
    '"metrics":{"latency":0.2012,"cpu":0.3011},"kube":{"TaintToleration":100,'
    '"NodeAffinity":0,"PodTopologySpread":75,"InterPodAffinity":0}},"fallback":null,'
    '"estimates":{"cpu":0.09},"time":"2026-11-23T05:00:00Z"}'
)
VARIANTS = ("thread", "loop", "thread-dropped", "loop-dropped", "loop-binding")


# --- the API server (its own process) ---------------------------------------------------


def serve(port_file: str, cert_dir: str) -> None:
    status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    async def binding(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=201, text=status, content_type="application/json")

    async def event(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(status=201, body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
        app.router.add_post("/api/v1/namespaces/{ns}/events", event)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        context = None
        if cert_dir:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(f"{cert_dir}/tls.crt", f"{cert_dir}/tls.key")
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        Path(port_file).write_text(str(port))
        await asyncio.Event().wait()

    asyncio.run(main())


def _certificate(directory: str) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            f"{directory}/tls.key",
            "-out",
            f"{directory}/tls.crt",
        ],
        check=True,
        capture_output=True,
    )


# --- the variants ------------------------------------------------------------------------


def _binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-3"},
    }


def _event(name: str, n: int) -> dict[str, Any]:
    stamp = wire.rfc3339(time.time())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{n:x}", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
        },
        "type": "Normal",
        "reason": "Scheduled",
        "message": wire.truncate_message(MESSAGE.format(name=name)),
        "source": {"component": "metricsched"},
        "reportingComponent": "metricsched",
        "reportingInstance": "metricsched-bench",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "action": "Binding",
    }


class Rig:
    def __init__(self, api_client: Any, *, concurrency: int) -> None:
        self.api_client = api_client
        self.concurrency = concurrency
        self.metrics = observe.Metrics()
        self.http = kube_http.AsyncApi(api_client, limit=concurrency + 16)
        self.recorder = events.EventRecorder(
            self.http, component="metricsched", rate_per_s=1e9, burst=10**9
        )
        self.closed = events.EventRecorder(self.http, component="metricsched", burst=0)
        self.lock = threading.Lock()
        self.sent = 0

    # before: the kubernetes client in threads

    def bind_thread(self, name: str) -> bool:
        _, timeout_s = wire.fenced(None, wire.DEFAULT_TIMEOUT_S)
        body = _binding(name)
        self.metrics.api_writes.labels(kind="binding").inc()
        path = kube.path("api/v1/namespaces", NAMESPACE, "pods", name, "binding")
        response = kube_sync.request(self.api_client, "POST", path, body, timeout_s=timeout_s)
        wire.decode(kube_sync.read_and_release(response))
        return 200 <= int(response.status) < 300

    def event_thread(self, name: str) -> None:
        with self.lock:  # the recorder's bookkeeping, under its lock as it was
            self.sent += 1
            n = self.sent
        self.metrics.api_writes.labels(kind="event").inc()
        path = kube.path("api/v1/namespaces", NAMESPACE, "events")
        response = kube_sync.request(
            self.api_client, "POST", path, _event(name, n), timeout_s=wire.DEFAULT_TIMEOUT_S
        )
        kube_sync.read_and_release(response)

    def dropped_thread(self) -> bool:
        with self.lock:  # a token bucket that is empty
            return False

    async def pods_thread(self, names: list[str]) -> None:
        binds = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> None:
            async with binds:
                ok = await asyncio.to_thread(self.bind_thread, name)
            assert ok
            await asyncio.to_thread(self.event_thread, name)

        await asyncio.gather(*(one(name) for name in names))

    # now: aiohttp on the loop

    async def _bind_all(self, names: list[str], *, events: bool, **bind: Any) -> None:
        """Bind every pod, ``concurrency`` at a time (``bind``: binder.bind's options), and
        with ``events`` post each one's Scheduled event after its Binding."""
        binds = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> None:
            async with binds:
                result = await binder.bind(
                    self.http,
                    namespace=NAMESPACE,
                    name=name,
                    uid=f"uid-{name}",
                    node="node-3",
                    metrics=self.metrics,
                    **bind,
                )
            assert result.kind is binder.BindOutcome.BOUND, result
            if events:
                _post_scheduled(self.recorder, name)

        await asyncio.gather(*(one(name) for name in names))

    async def pods_loop(self, names: list[str]) -> None:
        await self._bind_all(names, events=True)
        await self.recorder.drain()

    async def bindings_loop(self, names: list[str]) -> None:
        await self._bind_all(
            names,
            events=False,
            fence=lambda: 15.0,
            annotations={"metricsched.io/decision": RECORD},
        )

    async def dropped(self, names: list[str], *, thread: bool) -> None:
        for name in names:
            if thread:
                await asyncio.to_thread(self.dropped_thread)
            else:
                _post_scheduled(self.closed, name)
                await asyncio.sleep(0)  # the scheduler yields between pods too

    async def batch(self, variant: str, names: list[str]) -> None:
        if variant == "thread":
            await self.pods_thread(names)
        elif variant == "loop":
            await self.pods_loop(names)
        elif variant == "loop-binding":
            await self.bindings_loop(names)
        else:
            await self.dropped(names, thread=variant == "thread-dropped")


def _post_scheduled(recorder: events.EventRecorder, name: str) -> None:
    """The scheduler's Scheduled Event for a bound pod (``Scheduler._settle``)."""
    recorder.post(
        events.ObjectRef.pod(namespace=NAMESPACE, name=name, uid=f"uid-{name}"),
        event_type="Normal",
        reason="Scheduled",
        action="Binding",
        message=MESSAGE.format(name=name),
    )


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(
    url: str,
    ca: str | None,
    *,
    pods: int,
    rounds: int,
    concurrency: int,
    variants: tuple[str, ...] = VARIANTS,
) -> dict[str, list[float]]:
    asyncio.get_running_loop().set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=concurrency + 8)
    )
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    if ca:
        configuration.ssl_ca_cert = ca
    configuration.connection_pool_maxsize = concurrency + 8
    rig = Rig(kubernetes.client.ApiClient(configuration), concurrency=concurrency)
    per_pod: dict[str, list[float]] = {v: [] for v in variants}
    serial = 0

    def names(n: int) -> list[str]:
        nonlocal serial
        serial += 1
        return [f"web-{serial}-{i}" for i in range(n)]

    for variant in variants:  # warm-up: connections, TLS sessions, threads, imports
        await rig.batch(variant, names(min(200, pods)))
    for r in range(rounds):
        order = variants if r % 2 == 0 else tuple(reversed(variants))
        for variant in order:
            batch = names(pods)
            before = _cpu()
            await rig.batch(variant, batch)
            per_pod[variant].append((_cpu() - before) / pods * 1000)
            print(f"round {r} {variant:15s} {per_pod[variant][-1]:.3f} ms CPU per pod", flush=True)
    await rig.http.close()
    return per_pod


def cmd_writes(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        if not args.plain:
            _certificate(tmp)
        port_file = f"{tmp}/port"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.write_cost",
                "serve",
                port_file,
                "" if args.plain else tmp,
            ]
        )
        try:
            deadline = time.monotonic() + 30
            while not Path(port_file).exists() or not Path(port_file).read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the loopback API server did not start")
                time.sleep(0.05)
            port = Path(port_file).read_text()
            scheme = "http" if args.plain else "https"
            per_pod = asyncio.run(
                _measure(
                    f"{scheme}://127.0.0.1:{port}",
                    None if args.plain else f"{tmp}/tls.crt",
                    pods=args.pods,
                    rounds=args.rounds,
                    concurrency=args.concurrency,
                    variants=tuple(args.variants.split(",")),
                )
            )
        finally:
            server.terminate()
            server.wait()
    medians = {v: statistics.median(values) for v, values in per_pod.items()}
    result: dict[str, Any] = {
        "command": " ".join(["python -m bench writes", *sys.argv[2:]]),
        "tls": not args.plain,
        "pods": args.pods,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "cpu_ms_per_pod": per_pod,
        "median_ms": medians,
    }
    for v, value in medians.items():
        print(f"{v:15s} {value * 1000:8.1f} µs CPU per pod (median of {args.rounds})")
    if "loop" in medians and "thread" in medians:
        result["ratio_loop_to_thread"] = medians["loop"] / medians["thread"]
        print(f"Binding + Event, loop/thread: {result['ratio_loop_to_thread']:.2f}x")
    if "loop-dropped" in medians and "thread-dropped" in medians:
        ratio = medians["loop-dropped"] / medians["thread-dropped"]
        result["ratio_dropped_loop_to_thread"] = ratio
        print(f"a dropped Event, loop/thread: {ratio:.2f}x")
    out = Path(args.out) if args.out else env_mod.ROOT / "bench" / "results" / "write-cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {out}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=2000, help="pods per batch (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of all variants (ABBA)")
    parser.add_argument("--concurrency", type=int, default=16, help="Bindings in flight")
    parser.add_argument("--plain", action="store_true", help="HTTP instead of TLS")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    parser.add_argument("--out", help="results file (default: bench/results/write-cost.json)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
