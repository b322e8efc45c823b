"""Lease-based leader election, so that one replica schedules at a time.

Uses the kubernetes client's own ``leaderelection`` package (a coordination.k8s.io Lease,
the same mechanism kube-scheduler uses) in a daemon thread. Lease 15s, renew deadline
10s, retry 2s, as kube-scheduler's defaults: a standby takes over within ~15s of the
leader's death. Leadership changes are handed to the event loop; losing leadership ends
the process (kube-scheduler does the same) so the next leader starts from a fresh LIST.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock import leaselock

from metricsched.config import Config


class Elector:
    def __init__(self, stop: threading.Event, thread: threading.Thread) -> None:
        self._stop = stop
        self._thread = thread

    def stop(self) -> None:
        self._stop.set()


def start(
    config: Config,
    api_client: Any,
    *,
    loop: asyncio.AbstractEventLoop,
    on_change: Callable[[bool], None],
) -> Elector:
    # The client logs every successful renewal (every 2s) at INFO: keep its warnings only.
    logging.getLogger("leaderelection").setLevel(logging.WARNING)
    # LeaseLock builds its API object from the default configuration.
    kubernetes.client.Configuration.set_default(api_client.configuration)
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    lock = leaselock.LeaseLock(  # type: ignore[no-untyped-call]
        config.leader_election_id, config.leader_election_namespace, identity
    )
    stop = threading.Event()

    def started() -> None:
        loop.call_soon_threadsafe(on_change, True)
        stop.wait()

    def stopped() -> None:
        loop.call_soon_threadsafe(on_change, False)

    election = leaderelection.LeaderElection(  # type: ignore[no-untyped-call]
        electionconfig.Config(  # type: ignore[no-untyped-call]
            lock=lock,
            lease_duration=15,
            renew_deadline=10,
            retry_period=2,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
    )
    thread = threading.Thread(target=election.run, name="leader-election", daemon=True)
    thread.start()
    return Elector(stop, thread)
