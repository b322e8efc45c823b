"""A small raw Kubernetes API client on aiohttp (no generated models), shared by the
harness, the watcher and the null binder.

Bodies are plain dicts; errors raise ``ApiError`` with the HTTP status. The admin token
of the benchmark cluster is used (``system:masters``, so API Priority and Fairness treats
every client of the benchmark alike: the ``exempt`` priority level).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message[:300]}")
        self.status = status


class Kube:
    """An aiohttp session bound to one API server with a bearer token."""

    def __init__(self, server: str, token: str, ca_file: Path, *, connections: int = 64) -> None:
        self.server = server.rstrip("/")
        ctx = ssl.create_default_context(cafile=str(ca_file))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=connections),
            headers={"Authorization": f"Bearer {token}"},
            read_bufsize=2**20,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    async def close(self) -> None:
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        content_type: str = "application/json",
    ) -> Any:
        data = None if body is None else json.dumps(body)
        async with self._session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers={"Content-Type": content_type},
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise ApiError(resp.status, raw.decode(errors="replace"))
        if raw[:1] in (b"{", b"["):
            return json.loads(raw)
        return raw.decode(errors="replace")

    async def text(self, path: str) -> str:
        result = await self.request("GET", path, timeout_s=60.0)
        return result if isinstance(result, str) else json.dumps(result)

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[tuple[float, dict[str, Any]]]:
        """Yield (receive time, event) for each watch event; ends when the server closes.
        ``on_open`` is called once the server has accepted the watch."""
        query = {**params, "watch": "1", "allowWatchBookmarks": "true"}
        async with self._session.get(
            self.server + path,
            params=query,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        ) as resp:
            if resp.status >= 300:
                raise ApiError(resp.status, (await resp.read()).decode(errors="replace"))
            if on_open is not None:
                on_open()
            async for line in resp.content:
                now = time.time()
                if line.strip():
                    yield now, json.loads(line)

    # --- objects used by the benchmark ------------------------------------------------

    async def create_namespace(self, name: str) -> None:
        await self.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        # Pods need the "default" ServiceAccount (admission); the KCM creates it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                await self.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
                return
            except ApiError as e:
                if e.status != 404:
                    raise
            await asyncio.sleep(0.2)
        raise TimeoutError(f"no default ServiceAccount in namespace {name} after 60s")

    async def delete_namespace(self, name: str, *, wait_s: float = 180.0) -> int:
        """Force-delete the namespace's pods, then the namespace; return pods left after
        ``wait_s`` (0 when the next trial starts from a clean slate)."""
        base = f"/api/v1/namespaces/{name}/pods"
        steps: tuple[tuple[str, dict[str, str]], ...] = (
            (base, {"gracePeriodSeconds": "0"}),
            (f"/api/v1/namespaces/{name}", {}),
        )
        for path, params in steps:
            try:
                await self.request("DELETE", path, params=params, timeout_s=wait_s)
            except ApiError as e:
                # 404: already gone; 5xx (e.g. a 504 on a large deletecollection): the
                # server goes on deleting, and we wait for the pods below.
                if e.status != 404 and e.status < 500:
                    raise
        deadline = time.monotonic() + wait_s
        left = -1
        while time.monotonic() < deadline:
            try:
                page = await self.request("GET", base, params={"limit": "1"})
            except ApiError as e:
                if e.status == 404:
                    return 0
                raise
            left = len(page.get("items") or []) + int(
                (page.get("metadata") or {}).get("remainingItemCount") or 0
            )
            if left == 0:
                return 0
            await asyncio.sleep(1.0)
        return left

    async def list_nodes(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            params = {"limit": "1000"} | ({"continue": cont} if cont else {})
            page = await self.request("GET", "/api/v1/nodes", params=params, timeout_s=120)
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    async def create_policy(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SchedulingPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        await self.request("POST", f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}", body)


def pod_body(name: str, scheduler: str) -> dict[str, Any]:
    """A small pod (10m CPU, 16Mi): node capacity is never what limits a trial."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/pause:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


def schedulable_node_names(nodes: list[dict[str, Any]]) -> list[str]:
    """Names of nodes that are Ready, not cordoned and untainted (the null binder's list)."""
    names = []
    for node in nodes:
        spec = node.get("spec") or {}
        if spec.get("unschedulable") or spec.get("taints"):
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            names.append(node["metadata"]["name"])
    return sorted(names)
