"""The Binding: one POST pods/binding per pod, fenced, and the read-back of a lost answer.

On the event loop (``edges.kube_http``: aiohttp, no thread hop). Nothing here raises on
API errors; results are returned as values (``BindResult``) and logged, so the caller
decides what to retry. The PodScheduled condition is ``edges.pod_status``; Events are
``edges.events``.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
import typing
from collections.abc import Callable, Mapping

import orjson

from metricsched.edges import kube, kube_http, observe, wire

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = wire.DEFAULT_TIMEOUT_S


# --- binding ---------------------------------------------------------------------------


class BindOutcome(enum.StrEnum):
    BOUND = "Bound"  # 201: the pod is on the node
    ALREADY_BOUND = "AlreadyBound"  # 409 "is already assigned to node": done, by whoever
    GONE = "Gone"  # 404, or 409 "is being deleted": forget the pod
    GATED = "Gated"  # 409 "non-empty .spec.schedulingGates": wait for the gates to go
    CONFLICT = "Conflict"  # other 409, e.g. the uid precondition (a re-created pod)
    FORBIDDEN = "Forbidden"  # 403: RBAC for pods/binding is missing
    REJECTED = "Rejected"  # a definite "no" (4xx other than the above, 429): retry later
    UNKNOWN = "Unknown"  # the answer was lost (transport error, timeout, 5xx): read the pod
    FENCED = "Fenced"  # not sent: this replica may no longer write as leader
    NOT_BOUND = "NotBound"  # read back after a lost answer: the pod is still unbound


@dataclasses.dataclass(frozen=True, slots=True)
class BindResult:
    kind: BindOutcome
    message: str  # the API server's message, or the transport error
    http_status: int | None  # None when no HTTP answer arrived
    node: str = ""  # where the pod is: the target if BOUND, the other node if ALREADY_BOUND


_ASSIGNED_TO = re.compile(r'is already assigned to node "([^"]*)"')

# A Binding's JSON around its two variable parts (the metadata, the node's name).
_BODY_HEAD = b'{"apiVersion":"v1","kind":"Binding","metadata":'
_BODY_TARGET = b',"target":{"apiVersion":"v1","kind":"Node","name":'


def body(
    *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None
) -> bytes:
    """A Binding's JSON, serialised once: the fixed parts are bytes made at import."""
    metadata: dict[str, typing.Any] = {"name": name, "namespace": namespace, "uid": uid}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return b"".join((_BODY_HEAD, orjson.dumps(metadata), _BODY_TARGET, orjson.dumps(node), b"}}"))


async def bind(
    http: kube_http.AsyncApi,
    *,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fence: Callable[[], float] | None = None,
    metrics: observe.Metrics | None = None,
    annotations: Mapping[str, str] | None = None,
) -> BindResult:
    """POST pods/binding for one pod: exactly one API write, or none if fenced.

    ``annotations`` (the decision record, ``metricsched.io/decision``) ride on the
    Binding: kube-apiserver copies a Binding's annotations onto the pod it binds.

    ``fence`` (the leader elector's) is read right before sending (``wire.fenced_post``):
    the time this replica may still write as leader. Less than ``wire.MIN_FENCE_S`` left:
    nothing is sent (``FENCED``); otherwise the request's timeout is cut to what is left,
    so no Binding of ours is still in flight when a successor may start. A 401 is sent
    again once, after a credential refresh (``kube_http``), through the same gate.

    The Binding carries the pod's uid, which the API server checks as a precondition, so
    a pod deleted and re-created under the same name is never bound by mistake. The
    success answer is a ``Status``: only its status code is read.
    """
    path = kube.path("api/v1/namespaces", namespace, "pods", name, "binding")
    posted = await wire.fenced_post(
        http,
        path,
        body=body(namespace=namespace, name=name, uid=uid, node=node, annotations=annotations),
        kind="binding",
        timeout_s=timeout_s,
        fence=fence,
        metrics=metrics,
    )
    if posted.fenced:
        return BindResult(kind=BindOutcome.FENCED, message=posted.message, http_status=None)
    if posted.ok:
        return BindResult(kind=BindOutcome.BOUND, message="", http_status=posted.status, node=node)
    # No answer (status None): sent, maybe accepted, only reading the pod can tell.
    result = _bind_failure(posted.status, posted.message)
    if metrics is not None:
        metrics.binding_errors.labels(result=result.kind.value).inc()
    quiet = (BindOutcome.ALREADY_BOUND, BindOutcome.GONE, BindOutcome.GATED)  # normal in a race
    log = logger.info if result.kind in quiet else logger.warning
    log("binding %s/%s to %s: %s: %s", namespace, name, node, result.kind.value, result.message)
    return result


async def read_back(
    http: kube_http.AsyncApi,
    *,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> BindResult:
    """Resolve a Binding whose answer was lost (``UNKNOWN``) by reading the pod.

    Bound to ``node``: ``BOUND``; to another node: ``ALREADY_BOUND`` naming it; gone or
    re-created: ``GONE``; unbound: ``NOT_BOUND``; the read failed too: ``UNKNOWN``.
    """
    try:
        answer = await http.request(
            "GET",
            kube.path("api/v1/namespaces", namespace, "pods", name),
            timeout=kube_http.timeout(timeout_s),
        )
        body = answer.json() if answer.ok else None
    except (*kube_http.TRANSPORT_ERRORS, orjson.JSONDecodeError) as e:
        return BindResult(
            kind=BindOutcome.UNKNOWN, message=wire.transport_message(e), http_status=None
        )
    if answer.status == 404:
        return BindResult(kind=BindOutcome.GONE, message="pod deleted", http_status=404)
    if not isinstance(body, dict):
        failed = wire.answer_error(answer)
        return BindResult(
            kind=BindOutcome.UNKNOWN, message=failed.detail, http_status=answer.status
        )
    meta = body.get("metadata") or {}
    if meta.get("uid") != uid or meta.get("deletionTimestamp"):
        return BindResult(
            kind=BindOutcome.GONE, message="pod deleted or re-created", http_status=200
        )
    bound_to = str((body.get("spec") or {}).get("nodeName") or "")
    if bound_to == node:
        return BindResult(kind=BindOutcome.BOUND, message="", http_status=200, node=node)
    if bound_to:
        return BindResult(
            kind=BindOutcome.ALREADY_BOUND,
            message=f"bound to {bound_to} by another binder",
            http_status=200,
            node=bound_to,
        )
    return BindResult(kind=BindOutcome.NOT_BOUND, message="the pod is not bound", http_status=200)


def _bind_failure(status: int | None, message: str) -> BindResult:
    kind = BindOutcome.REJECTED
    bound_to = ""
    if status is None or status == 0 or status >= 500:
        kind = BindOutcome.UNKNOWN  # a 5xx (e.g. a 504) may come after etcd accepted it
    elif status == 404:
        kind = BindOutcome.GONE
    elif status == 403:
        kind = BindOutcome.FORBIDDEN
    elif status == 409:
        assigned = _ASSIGNED_TO.search(message)
        if assigned is not None:
            kind, bound_to = BindOutcome.ALREADY_BOUND, assigned.group(1)
        elif "is being deleted" in message:
            kind = BindOutcome.GONE
        elif "schedulingGates" in message:
            kind = BindOutcome.GATED
        else:
            kind = BindOutcome.CONFLICT
    return BindResult(kind=kind, message=message, http_status=status, node=bound_to)
