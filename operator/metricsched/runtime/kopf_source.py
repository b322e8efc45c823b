"""kopf, run and supervised: its registry, settings and login, nothing of the translation.

kopf stays the event source for the pods this scheduler places and for the policies: its
``@kopf.on.event`` handlers (which store nothing on the objects they see) watch only our
unassigned pods (server-side field selectors: no node, not finished, and our scheduler
name when there is one) and SchedulingPolicies, and hand every event to the sink (the
translation, ``runtime.ingest``): ``on_pending_pod`` and ``on_policy``.

kopf is run under a supervisor: a watch that fails for good (kopf gives up after its
``error_backoffs``, e.g. on a 403 after an RBAC change or a long API outage) makes
``/readyz`` false with the reason, logs it, posts a Warning event on the operator's own
Pod (when ``POD_NAME``/``POD_NAMESPACE`` say which), tells the sink of the gap, and kopf is
started again with backoff: never an exit. ``/readyz`` turns true again once the sink
delivers (``Sink.delivering``). kopf logs in again at once when the kubeconfig's CA or
client certificate changes on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import kopf

from metricsched.config import Config
from metricsched.edges import errors, events, kube, kube_http, observe, probes, webhook
from metricsched.runtime import ingest, kopf_tuning
from metricsched.runtime import status as status_mod

logger = logging.getLogger("metricsched.watches")  # the name its lines have always had

# kopf's retries of a failing request before it gives up (and we restart it): short, so
# a lasting failure shows on /readyz within seconds, not kopf's default ~54 s.
KOPF_ERROR_BACKOFFS = (1.0, 2.0, 4.0)
_RESTART_BACKOFF = (1.0, 30.0)
# How often kopf's TLS files (the kubeconfig's CA and client certificate) are checked for
# a change on disk.
TLS_CHECK_S = 2.0


class Sink(Protocol):
    """Where kopf's events go: the translation into the cache and the queue."""

    @property
    def delivering(self) -> asyncio.Event:
        """Set by every event the sink handles; cleared here when kopf (re)starts."""
        ...

    def on_pending_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...

    def on_policy(self, event_type: str | None, body: Mapping[str, Any]) -> None: ...

    def policy_gap(self, reason: str) -> None:
        """kopf was restarted: a policy deleted meanwhile got no DELETED."""
        ...


@dataclasses.dataclass(kw_only=True)
class KopfSource:
    """kopf with this operator's registry, run until stopped and restarted when it fails."""

    config: Config
    api_client: Any  # the kubernetes client's: its credentials and TLS files
    sink: Sink
    metrics: observe.Metrics
    health: probes.HealthState
    record: Callable[..., None]  # posts an Event (the WatchFailed on our own pod)

    async def run(self, stop: asyncio.Event) -> None:
        """Run kopf until ``stop``; restart it with backoff whenever it fails, and at once
        when the CA or client certificate files changed on disk (``_tls_changed``)."""
        delay, cap = _RESTART_BACKOFF
        while not stop.is_set():
            self.sink.delivering.clear()
            ready = asyncio.Event()
            reclaim = asyncio.create_task(_reclaim_signals(ready, stop), name="reclaim signals")
            files = self._tls_files()  # before kopf logs in: a change after it is seen
            kopf_task = asyncio.create_task(
                kopf.operator(
                    registry=build_registry(self),
                    clusterwide=True,
                    standalone=True,
                    stop_flag=stop,
                    ready_flag=ready,
                ),
                name="kopf",
            )
            rotation = asyncio.create_task(self._tls_changed(stop, files), name="kopf: TLS files")
            rotated = False
            try:
                await asyncio.wait([kopf_task, rotation], return_when=asyncio.FIRST_COMPLETED)
                if not kopf_task.done():  # the files changed: log in again with them
                    rotated = True
                    kopf_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await kopf_task
                    raise _TlsFilesChangedError("TLS files changed on disk")
                kopf_task.result()
            except asyncio.CancelledError:
                reclaim.cancel()
                rotation.cancel()
                kopf_task.cancel()
                raise
            except Exception as e:
                reason = errors.describe(e)
            else:
                if stop.is_set():
                    reclaim.cancel()
                    rotation.cancel()
                    return
                reason = "kopf stopped on its own"
            reclaim.cancel()
            rotation.cancel()
            self.metrics.watch_restarts.inc()
            self.health.set_ready(False, f"watches restarting: {reason}", subsystem="kopf")
            self.sink.policy_gap(f"kopf's watches restarted: {reason}")
            if rotated:  # not a failure: kopf logs in again with the new files at once
                logger.warning("kopf's watches restarted: %s", reason)
            else:
                logger.error("watches failed (%s); restarting them in %gs", reason, delay)
                self._record_self(reason)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                delay = min(cap, delay * 2)
            asyncio.get_running_loop().create_task(self._ready_when_delivering(stop))

    def _tls_files(self) -> tuple[tuple[str, float, int], ...]:
        cfg = getattr(self.api_client, "configuration", None)
        return kube_http.tls_files(cfg) if cfg is not None else ()

    async def _tls_changed(
        self, stop: asyncio.Event, files: tuple[tuple[str, float, int], ...]
    ) -> None:
        """Return when the CA or client certificate files differ from ``files`` on disk
        (never, if ``stop`` is set first).

        kopf builds its TLS context when it logs in, and logs in again only after a 401:
        with a rotated CA its watches would fail for good (the fault suite's ca-rotate
        scenario, on the code before this: the new leader renewed the Lease all along
        while the pods created after the rotation waited up to 93 s, until a re-list).
        A restarted kopf logs in (``login``) with the files on disk, as ``kube_http``
        rebuilds its pool with them."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=TLS_CHECK_S)
            if not stop.is_set() and self._tls_files() != files:
                return
        await asyncio.Event().wait()  # stopping: kopf ends by itself

    async def _ready_when_delivering(self, stop: asyncio.Event) -> None:
        await asyncio.wait(
            [
                asyncio.ensure_future(self.sink.delivering.wait()),
                asyncio.ensure_future(stop.wait()),
            ],
            return_when=asyncio.FIRST_COMPLETED,
        )
        if self.sink.delivering.is_set():
            self.health.set_ready(True, "watches delivering again", subsystem="kopf")

    def _record_self(self, reason: str) -> None:
        name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        if not name or not namespace:
            return
        uid = os.environ.get("POD_UID", "")
        self.record(
            events.ObjectRef.pod(namespace=namespace, name=name, uid=uid),
            event_type="Warning",
            reason="WatchFailed",
            action="Watch",
            message=f"watches failed and are being restarted: {reason}",
        )


class _TlsFilesChangedError(Exception):
    """kopf was stopped to log in again with the TLS files changed on disk."""


def configure_kopf(
    settings: kopf.OperatorSettings, scheduler_names: frozenset[str] = frozenset({"metricsched"})
) -> None:
    """kopf's settings for this operator (its start-up handler calls this)."""
    settings.posting.enabled = False  # we post our own events, from the scheduler's name
    settings.scanning.disabled = True
    settings.peering.standalone = True
    # kopf sees only our unassigned pods: the informer owns the rest of the cluster.
    settings.watching.field_selectors[("v1", "pods")] = ingest.pending_selector(scheduler_names)
    # LIST in pages: an unchunked initial list holds every pod's body at once.
    settings.watching.chunk_size = 500
    # kopf keeps a worker (and the last body) per object until it idles out: pods see
    # a burst of events around their bind and then quiet, so let the workers go soon.
    # While kopf lists (at start, after a 410) every object's worker holds its body for
    # this long: at ≈ 1,000 events/s, 1 s kept ≈ 3,000 bodies, 0.1 s ≈ 400 (the realistic
    # shape of ``python -m bench memory --stages kopf-listing``).
    settings.queueing.idle_timeout = 0.1
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = KOPF_ERROR_BACKOFFS
    kopf_tuning.configure(settings)


def build_registry(w: KopfSource) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_kopf(settings, w.config.scheduler_names)
        if w.config.webhook_enabled:
            # The chart owns the MutatingWebhookConfiguration: kopf only serves it
            # (settings.admission.managed stays None).
            settings.admission.server = webhook.server(w.config, health=w.health, metrics=w.metrics)

    if w.config.webhook_enabled:
        webhook.register(registry, config=w.config, metrics=w.metrics)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kube.connection_info(w.api_client)

    @kopf.on.event("v1", "pods", registry=registry)
    async def pod_event(event: Mapping[str, Any], **_: Any) -> None:
        w.sink.on_pending_pod(event.get("type"), event["object"])

    @kopf.on.event(status_mod.GROUP, status_mod.VERSION, status_mod.PLURAL, registry=registry)
    async def policy_event(event: Mapping[str, Any], **_: Any) -> None:
        w.sink.on_policy(event.get("type"), event["object"])

    return registry


async def _reclaim_signals(ready: asyncio.Event, stop: asyncio.Event) -> None:
    """Make SIGTERM and SIGINT set the operator's ``stop`` again once kopf has started.

    kopf installs its own handlers for them when it spawns its tasks, replacing the
    operator's: a SIGTERM would then stop kopf alone, and the supervisor would restart
    what kopf cancelled, so the pod would not exit until it was killed. With the
    operator's handler back, ``stop`` ends everything, kopf included (its stop flag).
    kopf raises ``ready`` after its startup handlers, about when it adds its handlers:
    they are replaced a moment later, and once more in case kopf was slower."""
    await ready.wait()
    loop = asyncio.get_running_loop()
    for delay in (0.2, 2.0):
        await asyncio.sleep(delay)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
