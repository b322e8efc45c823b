"""The wire between the edges and the API server: messages, times and failures.

Shared by the writers (``binder``, ``pod_status``, ``events``, ``eviction``): the text of
a transport error, the writers' reading of an error answer (``errors``'s, an empty body
saying its status), the fence as a request's gate, the one fenced POST of a write as
leader (a Binding, an Eviction), Event note truncation and RFC 3339 times.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from metricsched.core import api_formats
from metricsched.edges import errors, kube_http, observe

DEFAULT_TIMEOUT_S = 10.0
MESSAGE_LIMIT = api_formats.MESSAGE_LIMIT  # bytes; the API's limit for event notes


def decode(data: object) -> str:
    if isinstance(data, bytes | bytearray):
        return bytes(data).decode("utf-8", "replace")
    return "" if data is None else str(data)


def transport_message(e: BaseException) -> str:
    kind = type(e).__name__
    if isinstance(e, aiohttp.ClientConnectorError):
        kind += f" ({type(e.os_error).__name__})"  # e.g. ConnectionRefusedError
    return f"{kind}: {e}"[:MESSAGE_LIMIT]


# A write as leader (a Binding, an Eviction) is sent only with at least this much
# leadership left. The client gives up at the fence, but a slow network can still deliver
# what it sent later: the Lease outlives the fence by lease duration - renew deadline (5 s
# by default), so a request is safe if it arrives within that slack plus what was left
# when it was sent. At 1 s, the fault suite's "4 s per chunk" delay (headers and body:
# 8 s) landed Bindings after the Lease ran out (le-inflight, 3 of 250); at 4 s such a
# request still arrives in time.
MIN_FENCE_S = 4.0


def fenced(fence: Callable[[], float] | None, timeout_s: float) -> tuple[str, float]:
    """Whether a write as leader may go, read from ``fence`` (the time this replica may
    still write as leader) right before sending: a refusal ("" when it may go) and the
    request's timeout, cut to what is left so nothing of ours is in flight when a
    successor may start."""
    if fence is None:
        return "", timeout_s
    left = fence()
    if left < MIN_FENCE_S:
        return f"not sent: this replica may write as leader for {left:.1f}s more", timeout_s
    return "", min(timeout_s, left)


def fence_gate(
    fence: Callable[[], float] | None,
    timeout_s: float,
    *,
    on_send: Callable[[], None] | None = None,
) -> kube_http.Gate:
    """``fenced`` as a request's gate (``kube_http.AsyncApi.request``), read right before
    each send: refused, ``NotSent``; else the send's timeout (connect and total), cut to
    the leadership left. ``on_send`` counts what goes out."""

    def gate() -> aiohttp.ClientTimeout:
        refusal, total_s = fenced(fence, timeout_s)
        if refusal:
            raise kube_http.NotSent(refusal)
        if on_send is not None:
            on_send()
        return kube_http.timeout(total_s)

    return gate


@dataclasses.dataclass(frozen=True, slots=True)
class Posted:
    """What a write as leader came to: the answer's HTTP status (None: no answer arrived,
    or nothing was sent) and the message (the API's, the transport error's, or why it was
    not sent; "" on success)."""

    status: int | None
    message: str
    fenced: bool = False  # not sent: this replica may no longer write as leader

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


async def fenced_post(
    http: kube_http.AsyncApi,
    resource_path: str,
    *,
    body: Mapping[str, Any] | bytes,
    kind: str,
    timeout_s: float,
    fence: Callable[[], float] | None,
    metrics: observe.Metrics | None,
) -> Posted:
    """POST a write as leader (a Binding, an Eviction): exactly one API write, or none if
    fenced. The fence is read right before each send (``fence_gate``: the first, and the
    one after a 401, sent again once after a credential refresh by ``kube_http``); ``body``
    is an object or its JSON bytes (a pre-serialised Binding, ``binder.body``); each
    send is counted in ``api_writes`` under ``kind``. Nothing raises: a send the fence
    refused is ``fenced``; no answer (refused, reset, timed out: the write may have been
    accepted, only a read can tell) has no status and the transport error's message; an
    error answer has its status and message (``answer_error``)."""
    count = metrics.api_write_counters[kind].inc if metrics is not None else None
    try:
        answer = await http.request(
            "POST",
            resource_path,
            body=body,
            gate=fence_gate(fence, timeout_s, on_send=count),
        )
    except kube_http.NotSent as e:
        return Posted(None, str(e), fenced=True)
    except kube_http.TRANSPORT_ERRORS as e:
        return Posted(None, transport_message(e))
    if answer.ok:
        return Posted(answer.status, "")
    failed = answer_error(answer)
    return Posted(failed.status, failed.message)


def answer_error(answer: kube_http.Answer) -> errors.ApiError:
    """A writer's error answer: its status and Status message, ``HTTP <status>`` when the
    body is empty."""
    return answer.error(fallback=f"HTTP {answer.status}")


def truncate_message(message: str) -> str:
    """Cut to 1024 bytes of UTF-8 with a `` ...`` suffix, as kube-scheduler does (the
    cycle's rule, ``core.api_formats.truncate_message``)."""
    return api_formats.truncate_message(message, limit=MESSAGE_LIMIT)


def rfc3339(now: float | None) -> str:
    """``now`` (default: the wall clock) as the API writes metav1.Time."""
    return api_formats.rfc3339(time.time() if now is None else now)
