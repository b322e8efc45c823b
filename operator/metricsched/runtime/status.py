"""SchedulingPolicy status: derived from the refresher's results, written by the leader only.

- Derivation (``status_of``) is a function of what the operator knows; writing is a
  separate, single task (``run``) that coalesces: each policy is written at most once per
  ``interval_s``, and only when its status changed. ``lastRefreshTime`` alone is not a
  change (it moves every refresh); it is carried along with real changes, or written
  when it is older than ``refresh_stale_s``.
- Only the leader writes. Counters survive a change of leader: the status a replica last
  saw on the policy (every replica watches it) is the base its own counts add to.
- A failed write is logged and retried at the next pass; nothing here ever raises into
  the operator.
- The PATCH goes out on the event loop (``kube_http.AsyncApi``, the writers' pool): one
  writer task, one request at a time, no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from metricsched.core import api_formats, estimate, model, policy, scoring
from metricsched.edges import errors, kube, kube_http, observe, query_rounds
from metricsched.runtime import gates as gates_mod

logger = logging.getLogger("metricsched.status")

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
# A status PATCH ends within this (connecting within ``kube_http.CONNECT_S``): the thread's
# client gave it 5 s to connect and 10 s to read.
WRITE_TIMEOUT_S = 15.0

LEARNED_CONDITION = "LearnedEstimateApplied"
"""Shown by policies with a metric whose estimate learns: False while their decisions
leave a learned estimate out because it would rule out every node (fail-open)."""
FAIL_OPEN_REASON = "EstimateRulesOutEveryNode"
"""The condition's reason then, and the Warning Event's on the policy."""


def fail_open_message(metrics: str) -> str:
    """What the condition and the Warning Event say while ``metrics``' learned estimates
    are left out."""
    return (
        f"the learned estimate of {metrics} would rule out every node whose sample is "
        "within the thresholds: pods are placed without it (fail-open) until it no longer "
        "does; it keeps learning from this policy's own binds, and its observations expire"
    )


@dataclasses.dataclass(slots=True)
class MetricHealth:
    ok: bool | None = None  # None = not refreshed yet


@dataclasses.dataclass(slots=True)
class Counters:
    scheduled: int = 0
    fallback: int = 0


@dataclasses.dataclass(slots=True)
class PolicyRecord:
    uid: str = ""
    generation: int = 0
    invalid: str = ""  # validation error, "" if valid
    metrics: dict[str, query_rounds.RefreshResult] = dataclasses.field(default_factory=dict)
    health: dict[str, MetricHealth] = dataclasses.field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    seen: Counters = dataclasses.field(default_factory=Counters)  # on the object, last seen
    base: Counters | None = None  # ``seen`` when this replica began to lead
    last_written: str = ""  # status written last, without lastRefreshTime
    last_write_at: float = -float("inf")  # monotonic
    last_refresh_written: float = -float("inf")  # monotonic


class PolicyStatus:
    def __init__(
        self,
        *,
        api: kube_http.AsyncApi,
        policies: Callable[[], Mapping[model.PolicyKey, model.Policy]],
        nodes: Callable[[], list[model.NodeInfo]],
        counters: Callable[[model.PolicyKey], tuple[int, int]],
        metrics: observe.Metrics,
        gates: gates_mod.Gates,
        interval_s: float,
        refresh_stale_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        shadow: Callable[[model.PolicyKey], Mapping[str, object] | None] | None = None,
        rebalance: Callable[[model.PolicyKey], Mapping[str, object] | None] | None = None,
        fail_open: Callable[[model.PolicyKey], frozenset[str]] | None = None,
    ) -> None:
        self._api = api
        self._policies = policies
        self._nodes = nodes
        self._counters = counters
        self._metrics = metrics
        self._interval = interval_s
        self._refresh_stale = refresh_stale_s
        self._clock = clock
        self._shadow = shadow  # status.shadow of shadow-mode policies (runtime/shadow.py)
        self._rebalance = rebalance  # status.rebalance (runtime/rebalancer.py)
        # The metrics whose learned estimate the policy's decisions leave out now.
        self._fail_open = fail_open
        self.records: dict[model.PolicyKey, PolicyRecord] = {}
        self._dirty: set[model.PolicyKey] = set()
        self._wake = asyncio.Event()
        self.gates = gates  # written only while ``gates.leading`` is set

    # --- inputs --------------------------------------------------------------------------

    def observe(self, key: model.PolicyKey, body: Mapping[str, Any]) -> tuple[PolicyRecord, bool]:
        """A policy event: returns its record and whether it is new or its spec changed."""
        meta = body.get("metadata") or {}
        record = self.records.get(key)
        fresh = record is None
        if record is None:
            record = self.records[key] = PolicyRecord()
        generation = int(meta.get("generation") or 0)
        changed = fresh or generation != record.generation or record.uid != meta.get("uid")
        record.uid = str(meta.get("uid", ""))
        record.generation = generation
        status = body.get("status") or {}
        record.seen = Counters(
            scheduled=_int(status.get("scheduledPods")), fallback=_int(status.get("fallbackPods"))
        )
        if fresh:
            # Keep transition times across restarts and leaders.
            for cond in status.get("conditions") or ():
                if isinstance(cond, dict) and cond.get("type") and cond.get("lastTransitionTime"):
                    record.conditions[str(cond["type"])] = dict(cond)
        if changed:
            self.mark(key)
        return record, changed

    def forget(self, key: model.PolicyKey) -> None:
        """The policy is gone (``runtime.policies`` decides when): its record goes."""
        self.records.pop(key, None)
        self._dirty.discard(key)

    def mark(self, key: model.PolicyKey | None = None) -> None:
        """Something this policy's status shows may have changed (None: every policy)."""
        if key is None:
            self._dirty.update(self.records)
        else:
            self._dirty.add(key)
        self._wake.set()

    def start_leading(self) -> None:
        """This replica begins to lead (before ``gates.leading`` is set): each policy's
        counts are taken from what the last leader wrote."""
        for record in self.records.values():
            record.base = dataclasses.replace(record.seen)
        self.mark()

    # --- the writer ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Write dirty statuses, each at most once per interval; supervised, never raises."""
        while not stop.is_set():
            try:
                await self.write_due()
            except Exception:
                logger.exception("policy status pass failed; retrying")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)

    async def write_due(self) -> int:
        """One pass: write what is due; returns how many PATCHes went out."""
        if not self.gates.leading.is_set():
            return 0
        now = self._clock()
        written = 0
        for key in sorted(self._dirty):
            record = self.records.get(key)
            if record is None:
                self._dirty.discard(key)
                continue
            if now - record.last_write_at < self._interval:
                continue  # stays dirty: the next pass after the interval writes it
            self._dirty.discard(key)
            status = self.status_of(key, record)
            text = _comparable(status)
            refresh_stale = now - record.last_refresh_written >= self._refresh_stale
            if text == record.last_written and not (refresh_stale and _has_refresh(status)):
                continue
            if await self._patch(key, status):
                written += 1
                record.last_written = text
                record.last_write_at = now
                record.last_refresh_written = now
            else:
                self._dirty.add(key)  # retried at a later pass
                record.last_write_at = now
        return written

    async def _patch(self, key: model.PolicyKey, status: dict[str, Any]) -> bool:
        namespace, _, name = key.partition("/")
        self._metrics.api_writes.labels(kind="status").inc()  # policy status patch
        try:
            answer = await self._api.request(
                "PATCH",
                kube.path(f"apis/{GROUP}/{VERSION}/namespaces", namespace, PLURAL, name, "status"),
                body={"status": status},
                content_type="application/merge-patch+json",
                timeout=kube_http.timeout(WRITE_TIMEOUT_S),
            )
            if not answer.ok:
                raise answer.phrased_error()
        except errors.ApiError as e:
            if e.status == 404:
                return True  # deleted meanwhile: nothing to write, nothing to retry
            logger.warning("could not write status of %s: %s", key, errors.describe(e))
            return False
        except Exception as e:
            logger.warning("could not write status of %s: %s", key, errors.describe(e))
            return False
        return True

    # --- derivation ------------------------------------------------------------------------

    def counters_of(self, key: model.PolicyKey, record: PolicyRecord) -> Counters:
        scheduled, fallback = self._counters(key)
        base = record.base or Counters()
        return Counters(scheduled=base.scheduled + scheduled, fallback=base.fallback + fallback)

    def status_of(self, key: model.PolicyKey, record: PolicyRecord) -> dict[str, Any]:
        counters = self.counters_of(key, record)
        pol = self._policies().get(key)
        metrics_status: list[dict[str, Any]] = []
        kinds: list[model.QueryErrorKind] = []
        pending = False
        if pol is not None:
            nodes = self._nodes()
            for m in pol.metrics:
                annotation = m.source.node_annotation
                if annotation is not None:
                    n = sum(
                        1
                        for node in nodes
                        if scoring.annotation_value(node.annotations.get(annotation)) is not None
                    )
                    metrics_status.append(
                        {
                            "name": m.name,
                            "nodesReporting": n,
                            "nodesMissing": len(nodes) - n,
                            "lastError": "",
                        }
                    )
                    continue
                r = record.metrics.get(m.name)
                if r is None:
                    pending = True
                    metrics_status.append(
                        {"name": m.name, "nodesReporting": 0, "nodesMissing": 0, "lastError": ""}
                    )
                    continue
                if r.error is not None:
                    kinds.append(r.error)
                metrics_status.append(
                    {
                        "name": m.name,
                        "nodesReporting": r.nodes_reporting,
                        "nodesMissing": r.nodes_missing,
                        "lastRefreshTime": api_formats.rfc3339(r.finished_at),
                        "lastError": f"{r.error}: {r.error_message}" if r.error else "",
                    }
                )
        if record.invalid:
            ready = ("False", "InvalidSpec", record.invalid)
            available = ("Unknown", "InvalidSpec", "the policy is not in use until fixed")
        elif model.QueryErrorKind.BAD_QUERY in kinds:
            bad = [s["name"] for s in metrics_status if "BadQuery" in s["lastError"]]
            ready = (
                "False",
                "BadQuery",
                f"the query of {', '.join(bad)} was rejected by Prometheus or refused by"
                " the cluster's query rules",
            )
            available = ("False", "BadQuery", _first_error(metrics_status))
        elif kinds:
            reason = str(kinds[0])
            ready = (
                "False",
                "MetricsUnavailable",
                f"pods are placed by fallback {pol.fallback if pol else ''}: "
                + _first_error(metrics_status),
            )
            available = ("False", reason, _first_error(metrics_status))
        elif pending:
            ready = ("Unknown", "Pending", "waiting for the first metric refresh")
            available = ("Unknown", "Pending", "waiting for the first metric refresh")
        else:
            ready = ("True", "MetricsFresh", "all metrics refreshed")
            available = (
                "True",
                "AllMetricsReporting",
                "every metric returned values at the last refresh",
            )
        conditions = [
            _condition(record, "Ready", *ready),
            _condition(record, "MetricsAvailable", *available),
        ]
        if pol is not None and any(estimate.learns(m) for m in pol.metrics):
            left_out = sorted(self._fail_open(key)) if self._fail_open is not None else []
            learned = (
                ("False", FAIL_OPEN_REASON, fail_open_message(", ".join(left_out)))
                if left_out
                else (
                    "True",
                    "Applied",
                    "learned estimates apply once enough observations agree, and never "
                    "rule out every node the samples allow",
                )
            )
            conditions.append(_condition(record, LEARNED_CONDITION, *learned))
        status: dict[str, Any] = {
            "observedGeneration": record.generation,
            "conditions": conditions,
            # The Metrics printer column reads this (JSONPath columns show one match only).
            "metricNames": policy.metric_names(pol) if pol is not None else "",
            "metrics": metrics_status,
            "scheduledPods": counters.scheduled,
            "fallbackPods": counters.fallback,
        }
        if self._shadow is not None:
            # None (JSON null) removes a block left from shadow mode: the status is merge-patched.
            shadow = self._shadow(key)
            status["shadow"] = dict(shadow) if shadow is not None else None
        if self._rebalance is not None:
            block = self._rebalance(key)
            status["rebalance"] = dict(block) if block is not None else None
        return status


def _condition(
    record: PolicyRecord, ctype: str, status: str, reason: str, message: str
) -> dict[str, Any]:
    previous = record.conditions.get(ctype)
    since = (
        previous["lastTransitionTime"]
        if previous and previous.get("status") == status
        else api_formats.rfc3339(time.time())
    )
    cond = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": since,
        "observedGeneration": record.generation,
    }
    record.conditions[ctype] = cond
    return cond


def _comparable(status: dict[str, Any]) -> str:
    """The status as compared for change: without the refresh timestamps."""
    trimmed = copy.deepcopy(status)
    for m in trimmed.get("metrics") or ():
        m.pop("lastRefreshTime", None)
    return json.dumps(trimmed, sort_keys=True)


def _has_refresh(status: dict[str, Any]) -> bool:
    return any("lastRefreshTime" in m for m in status.get("metrics") or ())


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _first_error(metrics_status: list[dict[str, Any]]) -> str:
    for s in metrics_status:
        if s.get("lastError"):
            return f"{s['name']}: {s['lastError']}"
    return ""
