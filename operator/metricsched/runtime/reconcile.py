"""Re-list reconciliation of kopf's kinds: our pending pods and the SchedulingPolicies.

kopf re-lists after a 410 Gone or a restart without DELETED events for what vanished in
the gap. A policy deleted then would keep governing pods and being queried with the
operator's credentials; a pending pod deleted then would be tried once more (its Binding
answers 404, and it is dropped). The reconciler LISTs both (``informers.list_pending``,
``informers.list_policies``) once kopf's listing has gone quiet, and every
``interval_s`` as a safety net, and drops what the LIST lacks and no newer event showed.

The rest of the cluster's state is the informer's, which reconciles every kind after each
of its own LISTs (``runtime.informers``). A failed LIST here is logged and retried at the
next interval; it never stops the operator, and scheduling does not wait for it (what it
removes is harmless meanwhile).
"""

from __future__ import annotations

import asyncio
import logging

from metricsched.edges import kube, kube_http, observe
from metricsched.runtime import informers
from metricsched.runtime import watches as watches_mod

logger = logging.getLogger("metricsched.reconcile")

# After kopf's (re-)listing, wait until it has been quiet this long before one LIST of
# each kind serves it all (resourceVersions decide what is newer).
SETTLE_S = 1.0


class Reconciler:
    def __init__(
        self,
        *,
        api: kube_http.AsyncApi,
        watches: watches_mod.Watches,
        metrics: observe.Metrics,
        interval_s: float,
    ) -> None:
        self._api = api
        self._watches = watches
        self._metrics = metrics
        self._interval = interval_s

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(self._watches.relisted.wait(), timeout=self._interval)
                await self._listing_done()
            except TimeoutError:
                pass
            self._watches.relisted.clear()
            await self.once()

    async def _listing_done(self) -> None:
        """Wait until kopf's listing has been quiet for ``SETTLE_S``."""
        while True:
            self._watches.relisted.clear()
            await asyncio.sleep(SETTLE_S)
            if not self._watches.relisted.is_set():
                return

    async def once(self) -> tuple[int, int] | None:
        """One reconciliation: (pending pods, policies) removed; None if a LIST failed."""
        try:
            pods = await informers.list_pending(
                self._api, self._watches, self._watches.config.scheduler_names
            )
            policies = await informers.list_policies(self._api, self._watches)
        except Exception as e:
            logger.warning("re-list failed (%s); retrying", kube.describe_error(e))
            return None
        self._metrics.relists.labels(kind="pending_pod").inc(pods)
        self._metrics.relists.labels(kind="policy").inc(policies)
        if pods or policies:
            logger.warning(
                "re-list: removed %d pending pod(s) and %d policy(ies) deleted while unwatched",
                pods,
                policies,
            )
        return pods, policies
