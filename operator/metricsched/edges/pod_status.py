"""The PodScheduled condition: ``False`` with kube-scheduler's reason and message.

Cluster autoscalers read it. ``unschedulable`` decides (pure: the condition, or None when
the pod already has it); ``write`` sends it on the event loop (``edges.kube_http``). API
errors are returned as ``StatusWrite`` values and logged, never raised.
"""

from __future__ import annotations

import enum
import logging
import typing
from collections.abc import Mapping, Sequence

from metricsched.edges import kube, kube_http, observe, wire

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = wire.DEFAULT_TIMEOUT_S


class StatusWrite(enum.StrEnum):
    WRITTEN = "Written"
    UNCHANGED = "Unchanged"  # the pod already had exactly this condition: no write
    GONE = "Gone"  # 404
    ERROR = "Error"


Condition = dict[str, str]


def unschedulable(
    current_conditions: Sequence[Mapping[str, typing.Any]],
    *,
    message: str,
    reason: str = "Unschedulable",
    now: float | None = None,
) -> Condition | None:
    """The ``PodScheduled=False`` condition to write, as kube-scheduler sets it, or None.

    None when the pod (as last seen by the watch: ``current_conditions`` is
    ``status.conditions``) already carries the same status, reason and message, so a pod
    retried every few seconds costs one write, not one per attempt.
    ``lastTransitionTime`` moves only when the status changes (kube-scheduler's
    ``UpdatePodCondition``).
    """
    message = wire.truncate_message(message)
    existing = next((c for c in current_conditions if c.get("type") == "PodScheduled"), None)
    if (
        existing is not None
        and existing.get("status") == "False"
        and existing.get("reason") == reason
        and existing.get("message") == message
    ):
        return None
    if existing is not None and existing.get("status") == "False":
        transition = existing.get("lastTransitionTime") or wire.rfc3339(now)
    else:
        transition = wire.rfc3339(now)
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }


async def write(
    http: kube_http.AsyncApi,
    *,
    namespace: str,
    name: str,
    condition: Condition,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    metrics: observe.Metrics | None = None,
) -> StatusWrite:
    """PATCH ``condition`` onto the pod's status. Pod ``status.conditions`` is a strategic
    merge list keyed by ``type``, so the patch leaves the other conditions alone."""
    if metrics is not None:
        metrics.api_writes.labels(kind="status").inc()
    try:
        answer = await http.request(
            "PATCH",
            kube.path("api/v1/namespaces", namespace, "pods", name, "status"),
            body={"status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
            timeout=kube_http.timeout(timeout_s),
        )
    except kube_http.TRANSPORT_ERRORS as e:
        detail = wire.transport_message(e)
    else:
        if answer.ok:
            return StatusWrite.WRITTEN
        if answer.status == 404:
            return StatusWrite.GONE
        detail = wire.answer_error(answer).detail
    logger.warning("cannot set PodScheduled=False on %s/%s: %s", namespace, name, detail)
    return StatusWrite.ERROR


async def set_pod_scheduled_false(
    http: kube_http.AsyncApi,
    *,
    namespace: str,
    name: str,
    message: str,
    current_conditions: Sequence[Mapping[str, typing.Any]],
    reason: str = "Unschedulable",
    now: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    metrics: observe.Metrics | None = None,
) -> StatusWrite:
    """``unschedulable``, then ``write`` if the pod does not have it yet."""
    condition = unschedulable(current_conditions, message=message, reason=reason, now=now)
    if condition is None:
        return StatusWrite.UNCHANGED
    return await write(
        http,
        namespace=namespace,
        name=name,
        condition=condition,
        timeout_s=timeout_s,
        metrics=metrics,
    )
