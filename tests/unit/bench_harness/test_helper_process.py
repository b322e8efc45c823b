"""The benchmark's helper processes (bench/helper_process.py): the work runs until it ends
or its stop is set, the client is then closed, and the Binding is one POST."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench import helper_process


class FakeKube:
    def __init__(self) -> None:
        self.closed = False
        self.sent: list[tuple[str, str, Any]] = []

    async def close(self) -> None:
        self.closed = True

    async def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        self.sent.append((method, path, body))
        return {}


def test_work_that_ends_is_returned_done_and_the_client_closed():
    kube = FakeKube()

    async def work() -> None:
        return

    task = asyncio.run(helper_process.run_until_stopped(kube, work()))  # type: ignore[arg-type]
    assert task.done() and not task.cancelled() and kube.closed


def test_a_stop_cancels_the_work_and_closes_the_client():
    kube = FakeKube()

    async def main() -> asyncio.Task[None]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_soon(stop.set)
        return await helper_process.run_until_stopped(
            kube,  # type: ignore[arg-type]
            asyncio.sleep(3600),
            stop=stop,
        )

    assert asyncio.run(main()).cancelled() and kube.closed


def test_an_error_the_work_ended_with_is_raised():
    async def work() -> None:
        raise RuntimeError("watch failed")

    with pytest.raises(RuntimeError, match="watch failed"):
        asyncio.run(helper_process.run_until_stopped(FakeKube(), work()))  # type: ignore[arg-type]


def test_a_binding_is_one_post_to_the_pods_binding_subresource():
    kube = FakeKube()
    asyncio.run(
        helper_process.post_binding(
            kube,  # type: ignore[arg-type]
            namespace="ns",
            name="web-1",
            uid="u1",
            node="node-3",
        )
    )
    assert kube.sent == [
        (
            "POST",
            "/api/v1/namespaces/ns/pods/web-1/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "web-1", "uid": "u1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-3"},
            },
        )
    ]
