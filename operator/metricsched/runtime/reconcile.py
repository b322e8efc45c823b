"""Re-list reconciliation: the cache compared with a fresh LIST of nodes and pods.

A watch that restarts from a LIST (kopf after a 410 Gone, after a restart, and at start
after the operator's own initial LIST) sends no DELETED event for objects that vanished
in the gap: a deleted pod would keep its node's capacity forever, a deleted node could
receive Bindings. The reconciler LISTs nodes and pods (in a thread) and then, on the
event loop, in one step:

- removes what the cache holds, the LIST lacks, and no event newer than the LIST has
  shown (resourceVersions compared; assumed pods are left to their Binding's outcome);
- applies listed objects newer than what the cache has (missed ADDED or MODIFIED), except
  pods whose deletion was already seen (tombstones in the cache).

It runs once kopf's (re-)listing has gone quiet, and every ``interval_s`` as a safety
net. Scheduling waits (``Watches.consistent``) from a re-list until its reconciliation is
done, and at start from the operator's own LIST until kopf's first listing has been
reconciled (as kube-scheduler waits for its informers to sync): a decision taken in the
middle of that listing would have to stop for it. A failed LIST is logged and retried
soon (scheduling keeps waiting); it never stops the operator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metricsched.core import model
from metricsched.edges import kube, observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import watches as watches_mod

logger = logging.getLogger("metricsched.reconcile")

# After kopf's (re-)listing, wait until it has been quiet this long (the re-lists of the
# other resources gathered too) before one LIST serves them all (order does not matter:
# resourceVersions decide).
SETTLE_S = 1.0
# At start, scheduling waits for kopf's first listing to be reconciled (see module doc);
# should kopf list nothing this long, a reconciliation runs anyway.
FIRST_LISTING_WAIT_S = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class Listed:
    """A listed object as the reconciler keeps it until ``apply``: its metadata's
    identity and resourceVersion, and, if it may be applied, the whole body as compressed
    JSON, decoded only then. The whole LIST is held at once: a Deployment's pod of ≈ 6 KB
    of JSON takes ≈ 38 KB as Python objects, ≈ 1.7 KB so, and its identity alone ≈ 0.3 KB
    (``python -m bench memory``)."""

    meta: Mapping[str, Any]  # name, namespace, uid and resourceVersion only
    encoded: bytes  # zlib(JSON); empty if the body was not kept

    @classmethod
    def of(cls, body: Mapping[str, Any], *, keep_body: bool = True) -> Listed:
        meta = body.get("metadata") or {}
        identity = {key: meta[key] for key in _IDENTITY if key in meta}
        if not keep_body:
            return cls(meta=identity, encoded=b"")
        text = json.dumps(body, separators=(",", ":"))
        return cls(meta=identity, encoded=zlib.compress(text.encode(), 1))

    def body(self) -> Mapping[str, Any] | None:
        if not self.encoded:
            return None
        decoded: Mapping[str, Any] = json.loads(zlib.decompress(self.encoded))
        return decoded


_IDENTITY = ("name", "namespace", "uid", "resourceVersion")
Item = Mapping[str, Any] | Listed  # a body as listed, or kept as Listed


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    nodes: Sequence[Item]
    nodes_version: str
    pods: Sequence[Item]
    pods_version: str


def _meta(item: Item) -> Mapping[str, Any]:
    return item.meta if isinstance(item, Listed) else (item.get("metadata") or {})


def _body(item: Item) -> Mapping[str, Any] | None:
    return item.body() if isinstance(item, Listed) else item


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    nodes_removed: int
    pods_removed: int
    applied: int


def fetch(api: kube.Api, cache: cache_mod.ClusterCache | None = None) -> Listing:
    """LIST nodes and non-terminal pods (blocking: run in a thread), each object kept as
    ``Listed`` as soon as its page is read.

    With ``cache``, an object keeps its body only if it is newer than the cache's copy
    when listed (one dict lookup per object, safe from this thread): the cache's
    resourceVersion of an object only grows while it holds the object, so one that is not
    newer now is not newer at ``apply`` either, unless the cache let it go meanwhile (a
    deletion, a terminal phase, a Binding that found it gone): a newer event, which a
    stale listed copy must not undo. A quiet re-list then costs an identity per object,
    not a compressed body."""
    nodes = kube.Paged(
        lambda cont: api.list_node(
            limit=500, _continue=cont, _preload_content=False, _request_timeout=(5.0, 60.0)
        )
    )
    pods = kube.Paged(
        lambda cont: api.list_pod_for_all_namespaces(
            limit=500,
            _continue=cont,
            field_selector=watches_mod.POD_FIELD_SELECTOR,
            _preload_content=False,
            _request_timeout=(5.0, 60.0),
        )
    )
    kept_nodes = [Listed.of(body, keep_body=_node_newer(cache, body)) for body in nodes]
    kept_pods = [Listed.of(body, keep_body=_pod_newer(cache, body)) for body in pods]
    return Listing(
        nodes=kept_nodes, nodes_version=nodes.version, pods=kept_pods, pods_version=pods.version
    )


def _node_newer(cache: cache_mod.ClusterCache | None, body: Mapping[str, Any]) -> bool:
    meta = body.get("metadata") or {}
    name = model.NodeName(str(meta.get("name", "")))
    return cache is None or not cache.holds_node_version(name, _version(meta))


def _pod_newer(cache: cache_mod.ClusterCache | None, body: Mapping[str, Any]) -> bool:
    meta = body.get("metadata") or {}
    return cache is None or not cache.holds_pod_version(str(meta.get("uid", "")), _version(meta))


def _version(meta: Mapping[str, Any]) -> str:
    return str(meta.get("resourceVersion") or "")


def apply(
    listing: Listing,
    *,
    cache: cache_mod.ClusterCache,
    on_pod: Callable[[str | None, Mapping[str, Any]], None],
    on_node: Callable[[str | None, Mapping[str, Any]], None],
) -> Outcome:
    """Bring the cache in line with ``listing`` (on the event loop, in one step)."""
    applied = 0
    node_names = set()
    for item in listing.nodes:
        meta = _meta(item)
        name = model.NodeName(str(meta.get("name", "")))
        node_names.add(name)
        if cache_mod.resource_version(meta) > cache.node_version(name):
            body = _body(item)
            if body is not None:  # None: the cache let it go after the LIST (see fetch)
                on_node("MODIFIED", body)
                applied += 1
    node_ghosts = cache.node_ghosts(node_names, list_version=listing.nodes_version)
    for name in node_ghosts:
        cache.remove_node(name, resource_version=listing.nodes_version)
    uids = set()
    for item in listing.pods:
        meta = _meta(item)
        uid = str(meta.get("uid", ""))
        uids.add(uid)
        if cache_mod.resource_version(meta) > cache.pod_version(uid):
            body = _body(item)
            if body is not None:  # None: the cache let it go after the LIST (see fetch)
                on_pod("MODIFIED", body)
                applied += 1
    pod_ghosts = cache.pod_ghosts(uids, list_version=listing.pods_version)
    for uid in pod_ghosts:
        cache.remove_pod(uid, resource_version=listing.pods_version)
    return Outcome(nodes_removed=len(node_ghosts), pods_removed=len(pod_ghosts), applied=applied)


class Reconciler:
    def __init__(
        self,
        *,
        api: kube.Api,
        cache: cache_mod.ClusterCache,
        watches: watches_mod.Watches,
        metrics: observe.Metrics,
        interval_s: float,
    ) -> None:
        self._api = api
        self._cache = cache
        self._watches = watches
        self._metrics = metrics
        self._interval = interval_s

    async def run(self, stop: asyncio.Event) -> None:
        timeout = min(self._interval, FIRST_LISTING_WAIT_S)
        while not stop.is_set():
            try:
                await asyncio.wait_for(self._watches.relisted.wait(), timeout=timeout)
                await self._listing_done()
            except TimeoutError:
                pass
            timeout = self._interval
            self._watches.relisted.clear()
            if await self.once() is not None and not self._watches.relisted.is_set():
                if not self._watches.consistent.is_set():
                    logger.info("watches listed and reconciled: scheduling")
                self._watches.consistent.set()

    async def _listing_done(self) -> None:
        """Wait until kopf's listing has been quiet for ``SETTLE_S``: listing thousands of
        objects takes kopf seconds, and a LIST taken in the middle of it would be followed
        by another (and another) while scheduling waits."""
        while True:
            self._watches.relisted.clear()
            await asyncio.sleep(SETTLE_S)
            if not self._watches.relisted.is_set():
                return

    async def once(self) -> Outcome | None:
        try:
            listing = await asyncio.to_thread(fetch, self._api, self._cache)
        except Exception as e:
            logger.warning("re-list failed (%s); retrying", kube.describe_error(e))
            if not self._watches.consistent.is_set():
                self._watches.relisted.set()  # scheduling waits on it: retry soon
            return None
        outcome = apply(
            listing, cache=self._cache, on_pod=self._watches.on_pod, on_node=self._watches.on_node
        )
        self._metrics.relists.labels(kind="node").inc(outcome.nodes_removed)
        self._metrics.relists.labels(kind="pod").inc(outcome.pods_removed)
        if outcome.nodes_removed or outcome.pods_removed or outcome.applied:
            logger.warning(
                "re-list: removed %d node(s) and %d pod(s) deleted while unwatched; "
                "applied %d missed change(s)",
                outcome.nodes_removed,
                outcome.pods_removed,
                outcome.applied,
            )
        return outcome
