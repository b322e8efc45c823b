"""A SchedulingPolicy's lifecycle, owned in one place: observed, parsed, rejected, forgotten.

Every policy event (kopf's watch, or a copy from the reconciler's LIST, both handed over
by ``runtime.ingest``) comes here. A policy this install serves is parsed
(``core.policy.policy_from_body``) into the cache; one that cannot be parsed is rejected
with the clear error (its status record says it, and a Warning Event on the policy),
governs no pod until fixed, and its pods get the reason. Another install's policy is kept
only as an index that names it in the events of the pods it selects.

A policy is forgotten when it is deleted, when it moves to another install, when it is
created again under its name (a new uid, even when a watch gap hid the deletion), and
when a LIST after a gap no longer has it (a ghost). Forgetting is written once
(``forget``) and fans out, on that one schedule, to every party that keeps per-policy
state: they register at construction (``forget=``), the cache index, the status record
and the policy events first. It is uid-aware: a deletion of an older object of the name
(its uid is not the one known) forgets nothing of the newer one.

The gate ``confirmed``: any gap in what the watches delivered (kopf listing again, kopf
restarted, an informer re-listing) clears it while a policy is cached, and only a policy
LIST sent after the last gap sets it again, so no pod is placed (nor evicted) under a
policy deleted in the gap. Copies of a policy older than one already seen (a LIST in
flight while kopf delivered a change or a deletion) are dropped: a deletion is final for
the object it deleted.

The policy status record is written here: what the spec makes of it (new, invalid, its
metrics replaced) and the refresher's results (``refreshed``); ``status.PolicyStatus``
keeps the records, derives the status from them and PATCHes it. No I/O here but through
the status writer, the policy events and the Event recorder handed in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metricsched.config import Config
from metricsched.core import model, policy, policy_installs
from metricsched.edges import events, query_rounds
from metricsched.edges import policy_events as policy_events_mod
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import status as status_mod

logger = logging.getLogger("metricsched.policies")

_MAX_POLICY_TOMBSTONES = 10_000

Forget = Callable[[model.PolicyKey], object]
"""A party's forgetting of one policy's state (its return value is not read)."""


def policy_ref(key: model.PolicyKey, record: status_mod.PolicyRecord | None) -> events.ObjectRef:
    namespace, _, name = key.partition("/")
    return events.ObjectRef.policy(namespace=namespace, name=name, uid=record.uid if record else "")


@dataclasses.dataclass(frozen=True, slots=True)
class Signals:
    """What the owner tells besides forgetting: a rejected policy's Warning (through the
    policy events when there are, else the Event recorder ``record``), the refresher,
    woken when a policy's metrics are new (``refresh_now``), and the gate the scheduler
    and the rebalancer wait on, set while the policies are confirmed after a gap
    (``confirmed``, the Operator's ``runtime.gates``; None: the owner's own, set)."""

    record: Callable[..., None]
    refresh_now: asyncio.Event
    policy_events: policy_events_mod.PolicyEvents | None = None
    confirmed: asyncio.Event | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Refreshed:
    """A metric's health before its latest refresh result (None: not refreshed yet)."""

    was_ok: bool | None


class Policies:
    """The owner of every SchedulingPolicy's lifecycle (see the module docstring)."""

    def __init__(
        self,
        *,
        config: Config,
        cache: cache_mod.ClusterCache,
        status: status_mod.PolicyStatus,
        signals: Signals,
        forget: Sequence[Forget] = (),
    ) -> None:
        self.config = config
        self.cache = cache
        self.status = status
        self._record = signals.record
        self._refresh_now = signals.refresh_now
        self._policy_events = signals.policy_events
        # --namespace narrows which policies apply.
        self._namespaces = frozenset(config.namespaces)
        # Who keeps per-policy state, told once when a policy is forgotten: the cache
        # index, the status record and the policy events are always told, the parties
        # handed in (the metric series, the scheduler, the refresher, ...) after them.
        forgets: list[Forget] = [self.cache.remove_policy, self.status.forget]
        if self._policy_events is not None:
            forgets.append(self._policy_events.forget)
        self._forgets: tuple[Forget, ...] = (*forgets, *forget)
        # The uid of the object each served policy is, as last seen (the one a deletion
        # must name to forget it).
        self._uids: dict[model.PolicyKey, str] = {}
        self._rv: dict[model.PolicyKey, int] = {}  # last resourceVersion seen
        # key -> (resourceVersion, uid, deletion count) of the policy's last deletion: no
        # copy of that object, or older than its deletion, may bring it back.
        self._tombstones: dict[model.PolicyKey, tuple[int, str, int]] = {}
        self._deletions = 0
        # Set while the cached policies are confirmed by a LIST sent after the last gap
        # (see the module docstring): the Operator's gate (runtime.gates), which the
        # scheduler and the rebalancer wait on; a rig of its own gets one, set.
        if signals.confirmed is not None:
            self.confirmed = signals.confirmed
        else:
            self.confirmed = asyncio.Event()
            self.confirmed.set()  # nothing cached yet: nothing to confirm
        self.clock: Callable[[], float] = time.monotonic
        self.unconfirmed_since: float | None = None  # self.clock()
        self.gap_reason = ""
        self._gaps = 0

    # --- observe -----------------------------------------------------------------------

    def applies(self, body: Mapping[str, Any]) -> bool:
        """Whether a policy's namespace is one this operator schedules (--namespace)."""
        meta = body.get("metadata") or {}
        return not self._namespaces or meta.get("namespace") in self._namespaces

    def on_event(
        self,
        event_type: str | None,
        body: Mapping[str, Any],
        *,
        listed_since: int | None = None,
    ) -> None:
        """A policy event from kopf, or (``listed_since``: ``deletions`` when that LIST
        was sent) a copy from the reconciler's LIST."""
        if not self.applies(body):
            return
        meta = body.get("metadata") or {}
        key = model.PolicyKey(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        version = cache_mod.resource_version(meta)
        uid = str(meta.get("uid") or "")
        if event_type == "DELETED":
            self._tombstone(key, version=version, uid=uid)
        elif self._stale(key, version=version, uid=uid, listed_since=listed_since):
            return  # older than what was seen: applying it would undo a change
        elif version:
            self._rv[key] = max(self._rv.get(key, 0), version)
            tombstone = self._tombstones.get(key)
            if tombstone is not None and version > tombstone[0]:
                del self._tombstones[key]  # created again since
        served = event_type == "DELETED" or policy_installs.served_by(
            body, self.config.scheduler_names
        )
        # Another install's policies are kept only as an index that names them in the
        # events of the pods they select (policy_installs.elsewhere_note).
        if served:
            self.cache.forget_elsewhere(key)
        else:
            self.cache.note_elsewhere(key, policy_installs.elsewhere_from_body(body))
        if event_type == "DELETED":
            self.forget(key, uid=uid)
            return
        if not served:
            # Another install's policy (or moved to one): forget it as if it were deleted.
            if key in self.cache.policies or key in self.status.records:
                self.forget(key)
            return
        known = self._uids.get(key)
        if known and uid and known != uid:
            # Deleted and created again while the deletion went unseen: a new policy.
            self.forget(key)
        if uid:
            self._uids[key] = uid
        self._apply(key, body)

    def _apply(self, key: model.PolicyKey, body: Mapping[str, Any]) -> None:
        """A served policy's copy: parsed into the cache, or rejected with the reason."""
        record, changed = self.status.observe(key, body)
        try:
            parsed = policy.policy_from_body(body)
        except policy.PolicyError as e:
            self._reject(key, record, changed=changed, message="; ".join(e.problems))
            return
        if record.invalid:
            record.invalid = ""
            self.status.mark(key)
        if self._policy_events is not None:
            self._policy_events.resolve(policy_ref(key, record), topic="spec")
        old = self.cache.policies.get(key)
        if old == parsed:
            return  # our own status write coming back, or a label/annotation change
        self.cache.upsert_policy(parsed)
        if old is None or old.metrics != parsed.metrics:
            record.health.clear()
            record.metrics.clear()
            if self._policy_events is not None:  # the refresh re-raises what still fails
                self._policy_events.forget(key, topic_prefix="metric/")
            self._refresh_now.set()  # new metrics: query them now, not at the next tick

    # --- reject ------------------------------------------------------------------------

    def _reject(
        self,
        key: model.PolicyKey,
        record: status_mod.PolicyRecord,
        *,
        changed: bool,
        message: str,
    ) -> None:
        """An invalid policy governs no pod until fixed: its status and a Warning say why."""
        self.cache.reject_policy(key, message)
        if self._policy_events is not None:
            self._policy_events.warn(
                policy_ref(key, record),
                topic="spec",
                reason="InvalidPolicy",
                action="Validate",
                message=f"policy ignored until fixed: {message}",
            )
        elif changed or not record.invalid:
            self._record(
                policy_ref(key, record),
                event_type="Warning",
                reason="InvalidPolicy",
                action="Validate",
                message=f"policy ignored until fixed: {message}",
            )
        record.invalid = message
        self.status.mark(key)

    # --- what the status record says of the refresh ------------------------------------

    def refreshed(self, result: query_rounds.RefreshResult) -> Refreshed | None:
        """A metric's refresh result, kept for the policy's status; None when the policy
        has no record (gone meanwhile). Says whether the metric was healthy before."""
        record = self.status.records.get(result.policy)
        if record is None:
            return None
        record.metrics[result.metric] = result
        health = record.health.setdefault(result.metric, status_mod.MetricHealth())
        was = Refreshed(was_ok=health.ok)
        health.ok = result.error is None
        self.status.mark(result.policy)
        return was

    # --- forget ------------------------------------------------------------------------

    def forget(self, key: model.PolicyKey, *, uid: str = "") -> bool:
        """The policy is gone: every party that keeps state for it forgets it, once, in
        registration order. ``uid``: the object that went; a deletion of another (older)
        object of this name forgets nothing. Returns whether it was forgotten."""
        known = self._uids.get(key)
        if uid and known and uid != known:
            logger.info("policy %s: a deletion of an older object (uid %s) ignored", key, uid)
            return False
        self._uids.pop(key, None)
        for forget in self._forgets:
            forget(key)
        return True

    def _tombstone(self, key: model.PolicyKey, *, version: int, uid: str) -> None:
        """A deletion: no copy of that object, nor one older than it, comes back."""
        known = self._uids.get(key)
        if not (uid and known and uid != known):
            self._rv.pop(key, None)  # the live object's versions go with it
        self._deletions += 1
        self._tombstones.pop(key, None)  # re-inserted last: FIFO by deletion
        self._tombstones[key] = (version, uid, self._deletions)
        while len(self._tombstones) > _MAX_POLICY_TOMBSTONES:
            del self._tombstones[next(iter(self._tombstones))]

    def _stale(
        self, key: model.PolicyKey, *, version: int, uid: str, listed_since: int | None
    ) -> bool:
        """A copy older than one already seen: the deleted object itself, a copy older
        than its deletion, or (from a LIST) one deleted after the LIST was sent, unless
        it is known to be a new object of that name; or older than the last change."""
        tombstone = self._tombstones.get(key)
        if tombstone is not None:
            deleted_at, deleted_uid, deletion = tombstone
            if uid and uid == deleted_uid:
                return True
            if version and deleted_at and version <= deleted_at:
                return True
            if listed_since is not None and deletion > listed_since and not (uid and deleted_uid):
                return True  # a DELETED seen after the LIST was sent is final
        return bool(version) and version < self._rv.get(key, 0)

    # --- gaps and the LIST that confirms -----------------------------------------------

    @property
    def deletions(self) -> int:
        """How many policy deletions were seen: read before a LIST is sent."""
        return self._deletions

    @property
    def gaps(self) -> int:
        """How many gaps were seen: read before the reconciler's policy LIST is sent."""
        return self._gaps

    def gap(self, reason: str) -> None:
        """A gap in what kopf (or the API path) delivered: a policy deleted meanwhile got
        no DELETED. Decisions wait until a LIST sent after it confirms the policies (as
        long as a policy is cached: with none, no pod can be placed under a ghost)."""
        self._gaps += 1
        if not self.confirmed.is_set():
            return
        if not (self.cache.policies or self.cache.policy_errors):
            return
        self.confirmed.clear()
        self.unconfirmed_since = self.clock()
        self.gap_reason = reason
        logger.info(
            "policies unconfirmed after a watch gap (%s): no decision until a LIST confirms them",
            reason,
        )

    def listed(self, *, gaps_before: int) -> None:
        """A policy LIST, sent when ``gaps`` was ``gaps_before``, has been applied: the
        policies are confirmed unless another gap began meanwhile."""
        if self._gaps != gaps_before or self.confirmed.is_set():
            return
        since = self.unconfirmed_since
        waited = self.clock() - since if since is not None else 0.0
        self.unconfirmed_since = None
        self.gap_reason = ""
        self.confirmed.set()
        logger.info("policies confirmed by a LIST after %.1fs: scheduling", waited)

    def ghosts(self, listed: set[str], *, list_version: str) -> list[model.PolicyKey]:
        """Policies known here that a LIST taken at ``list_version`` does not have, and
        that no event newer than the LIST has shown: deleted while kopf did not watch."""
        version = cache_mod.resource_version({"resourceVersion": list_version})
        known = set(self.cache.policies) | set(self.cache.policy_errors) | set(self.status.records)
        known |= {k for entries in self.cache.elsewhere.values() for k in entries}
        return sorted(key for key in known if key not in listed and self._rv.get(key, 0) <= version)

    def ghost_deleted(self, key: model.PolicyKey, *, list_version: str) -> dict[str, Any]:
        """The DELETED body of a ghost: deleted as of the LIST's version (a copy at or
        before it never comes back), of the object known under its name."""
        namespace, _, name = key.partition("/")
        meta = {"namespace": namespace, "name": name, "resourceVersion": list_version}
        return {"metadata": {**meta, "uid": self._uids.get(key, "")}}
