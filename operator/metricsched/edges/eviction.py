"""The Eviction API: how rebalancing moves a pod, so that PodDisruptionBudgets hold.

``evict`` sends one policy/v1 Eviction (``pods/{name}/eviction``), fenced exactly as a
Binding is (``wire.fenced_post``): nothing is sent with less leadership left, and the
request's timeout is cut to what is left. The Eviction carries the pod's uid as a delete
precondition, so a pod re-created under the same name (a StatefulSet's) is never evicted
by mistake. A 429 is a PodDisruptionBudget saying "not now": an answer, not an error.

On the event loop (``edges.kube_http``). Nothing here raises on API errors.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable

from metricsched.edges import kube, kube_http, observe, wire

logger = logging.getLogger(__name__)


class EvictOutcome(enum.StrEnum):
    EVICTED = "Evicted"  # 2xx: the pod is being deleted; its controller makes another
    BLOCKED = "Blocked"  # 429: a PodDisruptionBudget does not allow it now
    GONE = "Gone"  # 404, or 409 (the uid precondition: the pod was re-created)
    FORBIDDEN = "Forbidden"  # 403: RBAC for pods/eviction is missing
    FENCED = "Fenced"  # not sent: this replica may no longer write as leader
    FAILED = "Failed"  # another answer, or none (the eviction may or may not have happened)


@dataclasses.dataclass(frozen=True, slots=True)
class EvictResult:
    kind: EvictOutcome
    message: str
    http_status: int | None


async def evict(
    http: kube_http.AsyncApi,
    *,
    namespace: str,
    name: str,
    uid: str,
    timeout_s: float = wire.DEFAULT_TIMEOUT_S,
    fence: Callable[[], float] | None = None,
    metrics: observe.Metrics | None = None,
) -> EvictResult:
    """POST one Eviction for the pod, or nothing if fenced (read right before sending)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    path = kube.path("api/v1/namespaces", namespace, "pods", name, "eviction")
    posted = await wire.fenced_post(
        http, path, body=body, kind="eviction", timeout_s=timeout_s, fence=fence, metrics=metrics
    )
    if posted.fenced:
        return EvictResult(kind=EvictOutcome.FENCED, message=posted.message, http_status=None)
    if posted.ok:
        return EvictResult(kind=EvictOutcome.EVICTED, message="", http_status=posted.status)
    result = _failure(posted.status, posted.message)
    quiet = (EvictOutcome.BLOCKED, EvictOutcome.GONE)  # normal: a budget, or a race
    log = logger.info if result.kind in quiet else logger.warning
    log("evicting %s/%s: %s: %s", namespace, name, result.kind.value, result.message)
    return result


def _failure(status: int | None, message: str) -> EvictResult:
    kind = EvictOutcome.FAILED
    if status == 429:
        kind = EvictOutcome.BLOCKED
    elif status in (404, 409):
        kind = EvictOutcome.GONE
    elif status == 403:
        kind = EvictOutcome.FORBIDDEN
    return EvictResult(kind=kind, message=message, http_status=status)
