"""SIGTERM stops the operator, kopf included, even though kopf installs its own handlers."""

from __future__ import annotations

import asyncio
import os
import signal

from metricsched.edges import http_server
from metricsched.runtime import kopf_source


def test_sigterm_sets_the_operators_stop_once_kopf_has_started():
    async def scene() -> bool:
        loop = asyncio.get_running_loop()
        stop, ready, kopf_stopped = asyncio.Event(), asyncio.Event(), asyncio.Event()
        reclaim = asyncio.create_task(kopf_source._reclaim_signals(ready, stop))
        # What kopf does when it spawns its tasks: its own handler for SIGTERM.
        loop.add_signal_handler(signal.SIGTERM, kopf_stopped.set)
        ready.set()
        await asyncio.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await asyncio.wait_for(stop.wait(), timeout=5)
        finally:
            reclaim.cancel()
            loop.remove_signal_handler(signal.SIGTERM)
            loop.remove_signal_handler(signal.SIGINT)
        return not kopf_stopped.is_set()

    assert asyncio.run(scene())


def test_a_port_in_use_is_an_os_error_not_a_crash_in_cleanup():
    first = http_server.Server(host="127.0.0.1", port=0, routes={})
    try:
        port = first.port
        try:
            http_server.Server(host="127.0.0.1", port=port, routes={})
        except OSError:
            pass
        else:  # pragma: no cover - the port was free after all
            raise AssertionError("binding a port in use succeeded")
    finally:
        first.close()
