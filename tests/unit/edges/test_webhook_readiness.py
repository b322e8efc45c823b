"""A webhook outage is not silent (issue 28, N12): while this replica's webhook server
does not listen, /readyz says so (subsystem ``webhook``, beside the others) and
``metricsched_webhook_serving`` is 0; once it listens, both clear."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from metricsched.edges import observe, probes, webhook


async def _allow(request: Any, **_: Any) -> dict[str, Any]:
    return {"response": {"uid": request["request"]["uid"], "allowed": True}}


def _serving(metrics: observe.Metrics) -> float:
    return float(metrics.webhook_serving._value.get())


def test_readiness_is_false_until_the_server_listens_and_again_once_it_stops() -> None:
    health, metrics = probes.HealthState(), observe.Metrics()
    health.set_ready(True)  # the operator's own start-up is done: only the webhook blocks

    async def scenario() -> None:
        server = webhook.WebhookServer(
            health=health, metrics=metrics, addr="127.0.0.1", insecure=True
        )
        ready, reason = health.readiness()
        assert not ready and "webhook: not serving yet" in reason
        assert _serving(metrics) == 0
        async with server:  # as kopf runs it: leaving closes the server's generators
            await server(_allow).__anext__()
            assert health.readiness() == (True, "webhook serving")
            assert _serving(metrics) == 1
        # kopf stopped it (a restart after API errors, the operator ending)
        ready, reason = health.readiness()
        assert not ready and "webhook: the server stopped" in reason
        assert _serving(metrics) == 0

    asyncio.run(scenario())


def test_a_server_that_cannot_listen_keeps_readiness_false() -> None:
    health, metrics = probes.HealthState(), observe.Metrics()
    health.set_ready(True)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]

    async def scenario() -> None:
        server = webhook.WebhookServer(
            health=health, metrics=metrics, addr="127.0.0.1", port=port, insecure=True
        )
        async with server:
            with pytest.raises(OSError):
                await server(_allow).__anext__()

    try:
        asyncio.run(scenario())
    finally:
        taken.close()
    ready, reason = health.readiness()
    assert not ready and "webhook" in reason
    assert _serving(metrics) == 0


def test_the_webhook_blocks_readiness_beside_other_subsystems_not_instead_of_them() -> None:
    health = probes.HealthState()
    health.set_ready(True)
    health.set_ready(False, "watches failing: 503", subsystem="kopf")
    webhook.WebhookServer(health=health, addr="127.0.0.1", insecure=True)
    health.set_ready(True, subsystem="kopf")
    ready, reason = health.readiness()
    assert not ready and reason == "webhook: not serving yet"
