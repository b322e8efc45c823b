"""The PodScheduled condition: ``False`` with kube-scheduler's reason and message.

Cluster autoscalers read it. One blocking call, run in a worker thread; API errors are
returned as ``StatusWrite`` values and logged, never raised.
"""

from __future__ import annotations

import enum
import logging
import typing
from collections.abc import Mapping, Sequence

import kubernetes.client.exceptions

from metricsched.edges import kube, observe, wire

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = wire.DEFAULT_TIMEOUT_S


class StatusWrite(enum.StrEnum):
    WRITTEN = "Written"
    UNCHANGED = "Unchanged"  # the pod already had exactly this condition: no write
    GONE = "Gone"  # 404
    ERROR = "Error"


def set_pod_scheduled_false(
    api: kube.Api,
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
    """Set ``PodScheduled=False`` with ``reason`` and ``message``, as kube-scheduler does.

    Cluster autoscalers read this condition. Skips the write when the pod (as last seen
    by the watch: ``current_conditions`` is ``status.conditions``) already carries the
    same status, reason and message, so a pod retried every few seconds costs one write,
    not one per attempt. ``lastTransitionTime`` moves only when the status changes
    (kube-scheduler's ``UpdatePodCondition``). Pod ``status.conditions`` is a strategic
    merge list keyed by ``type``, so the patch leaves the other conditions alone.
    """
    message = wire.truncate_message(message)
    existing = next((c for c in current_conditions if c.get("type") == "PodScheduled"), None)
    if (
        existing is not None
        and existing.get("status") == "False"
        and existing.get("reason") == reason
        and existing.get("message") == message
    ):
        return StatusWrite.UNCHANGED
    if existing is not None and existing.get("status") == "False":
        transition = existing.get("lastTransitionTime") or wire.rfc3339(now)
    else:
        transition = wire.rfc3339(now)
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if metrics is not None:
        metrics.api_writes.labels(kind="status").inc()
    try:
        response = kube.write(
            api,
            "PATCH",
            kube.path("api/v1/namespaces", namespace, "pods", name, "status"),
            {"status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
            timeout_s=timeout_s,
        )
        kube.read_and_release(response)
    except wire.API_ERRORS as e:
        if isinstance(e, kubernetes.client.exceptions.ApiException) and e.status == 404:
            return StatusWrite.GONE
        logger.warning(
            "cannot set PodScheduled=False on %s/%s: %s", namespace, name, wire.failure(e).detail
        )
        return StatusWrite.ERROR
    return StatusWrite.WRITTEN
