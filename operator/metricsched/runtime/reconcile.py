"""Re-list reconciliation of kopf's kinds: our pending pods and the SchedulingPolicies.

kopf re-lists after a 410 Gone or a restart without DELETED events for what vanished in
the gap. A policy deleted then would keep governing pods and being queried with the
operator's credentials; a pending pod deleted then would be tried once more (its Binding
answers 404, and it is dropped). The reconciler LISTs both (``informers.list_pending``,
``informers.list_policies``) once kopf's listing has gone quiet, and every
``interval_s`` as a safety net, and drops what the LIST lacks and no newer event showed.

The LIST of pending pods right after kopf's first listing is skipped when the operator's
own LIST of them was sent less than ``FRESH_S`` before (``pending_listed``): at start-up,
kopf's first listing follows that LIST by about a second, and a pending pod deleted in
between is only tried once more (its Binding answers 404, and it is dropped). The policy
LIST is never skipped (a policy deleted in between would keep governing pods), nor any
later LIST (kopf restarted, a re-list: a gap of any length).

The rest of the cluster's state is the informer's, which reconciles every kind after each
of its own LISTs (``runtime.informers``). A failed LIST here is logged and retried: at the
next interval while the policies are confirmed, with backoff (1 s doubling to 30 s) while
they are not. After a gap, decisions wait for the policy LIST (``Policies.confirmed``),
but never silently: unconfirmed for ``CONFIRM_BOUND_S``, /readyz is false with the reason
and an ERROR is logged (again each bound) until a LIST confirms them.
"""

from __future__ import annotations

import asyncio
import logging

from metricsched.edges import errors, kube_http, observe, probes
from metricsched.runtime import informers, ingest, supervise

logger = logging.getLogger("metricsched.reconcile")

# After kopf's (re-)listing, wait until it has been quiet this long before one LIST of
# each kind serves it all (resourceVersions decide what is newer).
SETTLE_S = 1.0
# A failed LIST while decisions wait for it: retried after this, doubling to the max.
RETRY_S = (1.0, 30.0)
CONFIRM_BOUND_S = 60.0
FRESH_S = 30.0
"""The operator's own LIST of pending pods, sent less than this before the first
reconciliation, serves as that reconciliation's (see the module docstring)."""
"""How long the policies may stay unconfirmed after a gap (decisions waiting) before
/readyz turns false with the reason."""


class Reconciler:
    def __init__(
        self,
        *,
        api: kube_http.AsyncApi,
        watches: ingest.Ingest,
        metrics: observe.Metrics,
        interval_s: float,
        health: probes.HealthState | None = None,
        confirm_bound_s: float = CONFIRM_BOUND_S,
    ) -> None:
        self._api = api
        self._watches = watches
        self._metrics = metrics
        self._interval = interval_s
        self._health = health
        self._confirm_bound_s = confirm_bound_s
        self._pending_listed_at: float | None = None  # the operator's own LIST, once

    def pending_listed(self, *, at: float) -> None:
        """The operator LISTed the pending pods itself (its initial sync), sent at ``at``
        (``watches.clock``): the first reconciliation need not LIST them again."""
        self._pending_listed_at = at

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile after each gap and every interval, and say when decisions have
        waited too long for it. One task group: both end together."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._reconcile(stop), name="reconcile")
            group.create_task(self._watch_confirmed(stop), name="reconcile-watchdog")

    async def _reconcile(self, stop: asyncio.Event) -> None:
        retry = RETRY_S[0]
        while not stop.is_set():
            # Decisions wait for this LIST while the policies are unconfirmed: a failed
            # one is retried soon, not at the next interval.
            confirmed = self._watches.policies.confirmed.is_set()
            try:
                await asyncio.wait_for(
                    self._watches.relisted.wait(), timeout=self._interval if confirmed else retry
                )
                await self._listing_done()
            except TimeoutError:
                pass
            self._watches.relisted.clear()
            listed_at, self._pending_listed_at = self._pending_listed_at, None
            fresh = listed_at is not None and self._watches.clock() - listed_at < FRESH_S
            failed = await self.once(pending=not fresh) is None
            retry = min(RETRY_S[1], retry * 2) if failed else RETRY_S[0]

    async def _watch_confirmed(self, stop: asyncio.Event) -> None:
        """/readyz false (subsystem ``policies``) while the policies have been unconfirmed
        for ``confirm_bound_s``, with the gap's reason; logged at ERROR each bound."""
        clock = self._watches.policies.clock
        reported: float | None = None
        while not stop.is_set():
            await supervise.pause(min(5.0, self._confirm_bound_s / 4), stop)
            policies = self._watches.policies
            since = policies.unconfirmed_since
            if since is None or policies.confirmed.is_set():
                if reported is not None:
                    self._set_ready(True, "policies confirmed")
                    reported = None
                continue
            waited = clock() - since
            if waited >= self._confirm_bound_s and (
                reported is None or clock() - reported >= self._confirm_bound_s
            ):
                reason = (
                    f"policies not confirmed for {waited:.0f}s after a watch gap "
                    f"({self._watches.policies.gap_reason}): the policy LIST does not complete"
                )
                logger.error("%s; not scheduling until it does", reason)
                self._set_ready(False, reason)
                reported = clock()

    def _set_ready(self, ready: bool, reason: str) -> None:
        if self._health is not None:
            self._health.set_ready(ready, reason, subsystem="policies")

    async def _listing_done(self) -> None:
        """Wait until kopf's listing has been quiet for ``SETTLE_S``."""
        while True:
            self._watches.relisted.clear()
            await asyncio.sleep(SETTLE_S)
            if not self._watches.relisted.is_set():
                return

    async def once(self, *, pending: bool = True) -> tuple[int, int] | None:
        """One reconciliation: (pending pods, policies) removed; None if a LIST failed.
        ``pending=False``: the policies only."""
        try:
            pods = (
                await informers.list_pending(
                    self._api,
                    self._watches,
                    self._watches.config.scheduler_names,
                    page=self._watches.config.list_page_size,
                )
                if pending
                else 0
            )
            policies = await informers.list_policies(self._api, self._watches)
        except Exception as e:
            logger.warning("re-list failed (%s); retrying", errors.describe(e))
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
