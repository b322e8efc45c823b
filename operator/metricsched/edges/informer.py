"""A lean informer: LIST+WATCH of one resource on the event loop, as client-go's reflector.

``Reflector.run`` LISTs the resource in pages (at the API server's current state), hands
each object to its sink as it is read, then tells the sink the LIST is complete with every
key it held and the LIST's resourceVersion (the sink removes what it holds that the LIST
lacks: deleted while nobody watched). It then WATCHes from that resourceVersion with
bookmarks, handing each ADDED, MODIFIED and DELETED event to the sink. A watch that ends
(the server's timeout, a dropped connection) is resumed from the last resourceVersion
seen; a ``410 Gone`` (the version was compacted away) or an ``ERROR`` event starts a new
LIST. The first LIST and every re-list take the same path (``_list``).

A bookmark proves nothing about a quiet kind: the API server bookmarks a watch only when
its kind's resourceVersion moved past where the watch began, so a watch of nodes that do
not change may hear nothing for minutes. The kinds whose silence matters
(``Resource.stall_relist``: Pod, Node) are therefore watched with a short server timeout
(``LIVENESS_WATCH_S``): the API server ends each such watch after 30-40 s, and that clean
end, which comes down the same connection after every event before it, tells the sink the
watch is alive as a line does. A watch that delivers nothing, not even its end, is not
quiet but stalled.

There is no local store here: the sink (the operator's cluster cache, through
``runtime.informers``) is the store, so an object is parsed once and kept once. Pages are
decoded with orjson and never held all at once.

Failures are retried with jittered backoff and reported to the sink (``failing``),
never raised, whatever raised them: the informer keeps trying until ``stop``. A watch
of such a kind that delivers nothing, not even its end, for ``IDLE_TIMEOUT_S`` is stalled:
the kind is listed again (a re-list clears the operator's ``consistent`` gate until it is
applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import aiohttp
import orjson

from metricsched.edges import errors, kube_http

logger = logging.getLogger("metricsched.informer")

PAGE = 500
# The server ends each watch after a random 5-10 minutes (client-go's minWatchTimeout
# spread), so that many informers do not re-watch at once.
WATCH_TIMEOUT_S = (300, 600)
# The kinds with ``stall_relist``: the server ends their watch after 30-40 s, so that
# the watch's end proves the connection at least that often, whatever the kind's traffic
# (a re-watch from the last version is served from the API server's watch cache).
LIVENESS_WATCH_S = (30, 40)
BACKOFF_S = (0.5, 30.0)
# The watchdog: a ``stall_relist`` watch that delivers nothing for this long, not even
# the end due after at most ``LIVENESS_WATCH_S``, is stalled (a half-open connection
# after a NAT or load balancer dropped it, a hung proxy), not quiet. It is treated as a
# gap: the kind is listed again, and the operator does not schedule on it meanwhile
# (``Sink.relisting``).
IDLE_TIMEOUT_S = 90.0  # for kinds with ``stall_relist``; others resume their watch


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """What to LIST and WATCH: ``/api/v1/pods`` and the like, and a field selector."""

    kind: str
    path: str
    field_selector: str = ""
    # The kinds whose silence matters: watched with ``LIVENESS_WATCH_S``, so that a watch
    # silent for ``IDLE_TIMEOUT_S`` (no line and no end) is a stall and the kind is listed
    # again. Other kinds keep client-go's long watches: the API server bookmarks a watch
    # only once its kind changed since it started, so a quiet kind (StorageClass, CSINode)
    # may send nothing for the watch's whole life; its silent watch is resumed instead.
    stall_relist: bool = False

    def key(self, body: Mapping[str, Any]) -> str:
        """How the sink names an object: pods by uid, namespaced kinds by namespace/name,
        cluster-scoped kinds by name."""
        meta = body.get("metadata") or {}
        if self.kind in ("Pod", "NominatedPod", "FailedPod"):
            return str(meta.get("uid", ""))
        if meta.get("namespace"):
            return f"{meta['namespace']}/{meta.get('name', '')}"
        return str(meta.get("name", ""))


class Sink(Protocol):
    def event(self, kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        """ADDED, MODIFIED or DELETED from the watch; ``LISTED`` for each listed object."""

    def listed(self, kind: str, keys: set[str], version: str, started: float) -> None:
        """A LIST is complete: ``keys`` are what it held at ``version``; it was sent at
        ``started`` (``time.monotonic()``)."""

    def relisting(self, kind: str) -> None:
        """A re-list has started (the state may miss deletions until ``listed``)."""

    def failing(self, kind: str, reason: str) -> None:
        """LIST or WATCH keeps failing (retried with backoff)."""

    def alive(self, kind: str) -> None:
        """The watch delivered a line (an event or a bookmark) or ended at the server's
        timeout: the connection works."""


class GoneError(Exception):
    """410 Gone: the resourceVersion to watch from is too old."""


class StalledError(Exception):
    """The watch delivered nothing, not even its end, for ``IDLE_TIMEOUT_S``."""


class Reflector:
    def __init__(
        self,
        api: kube_http.AsyncApi,
        resource: Resource,
        sink: Sink,
        *,
        page: int = PAGE,
        clock: Callable[[], float] = time.monotonic,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        list_gate: asyncio.Lock | None = None,
    ) -> None:
        self._api = api
        # Held for a whole LIST: reflectors sharing it list one kind at a time, so that
        # at most one page is decoded at once (each page's objects are 5-6x its JSON).
        self._list_gate = list_gate or asyncio.Lock()
        self.resource = resource
        self._sink = sink
        self._page = page
        self._clock = clock
        self._idle_timeout_s = idle_timeout_s
        self.synced = asyncio.Event()  # the first LIST is complete
        self.lists = 0
        self.watches = 0
        self.stalls = 0
        self.version = ""
        self.running = False

    async def run(self, stop: asyncio.Event) -> None:
        """LIST and WATCH until ``stop``. Every failure is retried here with jittered
        backoff and reported to the sink, whatever raised it: only cancellation ends a
        run. A reflector runs once at a time (a second ``run`` raises), so a restart by
        a supervisor can never double its watches."""
        if self.running:
            raise RuntimeError(f"the {self.resource.kind} reflector is already running")
        self.running = True
        try:
            await self._run(stop)
        finally:
            self.running = False

    async def _run(self, stop: asyncio.Event) -> None:
        delay, cap = BACKOFF_S
        version = ""
        while not stop.is_set():
            try:
                if not version:
                    if self.lists:
                        self._sink.relisting(self.resource.kind)
                    version = await self._list()
                    delay = BACKOFF_S[0]
                version = await self._watch(version, stop)
                delay = BACKOFF_S[0]
                continue
            except GoneError:
                logger.info("%s: watch version too old; listing again", self.resource.kind)
                version = ""
                continue
            except StalledError:
                self.stalls += 1
                logger.warning(
                    "%s: watch silent for %gs (no event, no bookmark, no end): stalled; "
                    "listing again",
                    self.resource.kind,
                    self._idle_timeout_s,
                )
                version = ""
                continue
            except asyncio.CancelledError:
                raise
            except errors.ApiError as e:
                reason = str(e)
            except Exception as e:  # retried and reported, whatever it is
                reason = _describe(e)
                if not isinstance(e, aiohttp.ClientError | TimeoutError | OSError | ValueError):
                    logger.error("%s: unexpected error", self.resource.kind, exc_info=e)
            if version:
                version = self.version  # resume after the last event the watch delivered
            pause = delay * random.uniform(0.8, 1.2)  # jitter: restarts do not align
            logger.warning(
                "%s: %s failed (%s); retrying in %.1fs",
                self.resource.kind,
                "watch" if version else "list",
                reason,
                pause,
            )
            self._sink.failing(self.resource.kind, reason)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=pause)
            delay = min(cap, delay * 2)

    # --- LIST ----------------------------------------------------------------------------

    async def list_once(self) -> str:
        """One LIST to the sink, without a watch after it (errors raise)."""
        return await self._list()

    async def _list(self) -> str:
        """Every object, a page at a time, to the sink; returns the LIST's resourceVersion."""
        async with self._list_gate:
            return await self._list_pages()

    async def _list_pages(self) -> str:
        started = self._clock()
        keys: set[str] = set()
        token = ""
        while True:
            params = {"limit": str(self._page)}
            if self.resource.field_selector:
                params["fieldSelector"] = self.resource.field_selector
            if token:
                params["continue"] = token
            answer = await self._api.request(
                "GET",
                self.resource.path,
                params=params,
                timeout=aiohttp.ClientTimeout(total=60, sock_connect=5),
            )
            if answer.status == 410 and token:
                # The continue token expired mid-list: start the LIST over.
                keys.clear()
                token = ""
                started = self._clock()
                continue
            if not answer.ok:
                raise answer.error()
            body = orjson.loads(answer.data)
            del answer  # the page's bytes
            items = body.pop("items", None) or []
            meta = body.get("metadata") or {}
            del body
            for index, item in enumerate(items):
                items[index] = None  # each object goes once handled, not with its page
                keys.add(self.resource.key(item))
                self._sink.event(self.resource.kind, "LISTED", item)
            del items
            token = str(meta.get("continue") or "")
            if not token:
                version = str(meta.get("resourceVersion") or "")
                break
            await asyncio.sleep(0)  # a page at a time: let the loop breathe
        self._sink.listed(self.resource.kind, keys, version, started)
        self.lists += 1
        self.version = version
        self.synced.set()
        return version

    # --- WATCH ---------------------------------------------------------------------------

    async def _watch(self, version: str, stop: asyncio.Event) -> str:
        """Events from ``version`` until the server ends the watch; returns the last
        resourceVersion seen (``GoneError``: list again). An end at the server's timeout
        tells the sink the watch is alive."""
        seconds = random.randint(
            *(LIVENESS_WATCH_S if self.resource.stall_relist else WATCH_TIMEOUT_S)
        )
        params = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        if self.resource.field_selector:
            params["fieldSelector"] = self.resource.field_selector
        # sock_read is the watchdog: any line (a bookmark included) resets it, and the
        # server's end comes before it for the kinds it judges. The total bound leaves it
        # room: a stalled watch is told by its silence, never by the total (which would
        # take it for a mere failure and resume it without a re-list).
        timeout = aiohttp.ClientTimeout(
            total=seconds + self._idle_timeout_s + 30,
            sock_connect=5,
            sock_read=self._idle_timeout_s,
        )
        self.watches += 1
        try:
            stream = self._api.lines(self.resource.path, params=params, timeout=timeout)
            async for line in stream:
                event = orjson.loads(line)
                kind = event.get("type")
                obj = event.get("object") or {}
                self._sink.alive(self.resource.kind)
                if kind == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise GoneError
                    raise errors.ApiError(int(code or 500), str(obj.get("message")))
                meta = obj.get("metadata") or {}
                if meta.get("resourceVersion"):
                    version = str(meta["resourceVersion"])
                    self.version = version
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._sink.event(self.resource.kind, kind, obj)
                if stop.is_set():
                    return version
        except errors.ApiError as e:
            if e.status == 410:
                raise GoneError from e
            raise
        except aiohttp.SocketTimeoutError as e:  # sock_read: nothing for the idle bound
            if self.resource.stall_relist:
                raise StalledError from e
            # A quiet kind may get no bookmark at all: resume from the last version seen
            # (a version compacted meanwhile answers 410, and the kind is listed again).
            return version
        # The stream ended cleanly, at the server's timeout: every event before the end
        # came through, so the connection worked until now.
        self._sink.alive(self.resource.kind)
        return version


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text}" if text != type(e).__name__ else text
