"""The Kubernetes API's errors in one vocabulary: one error type, one reading of its text.

An error answer becomes an ``ApiError`` once, where it arrives (``from_answer``): an
answer of the one client (``kube_http``: the informers, the Lease, the writers), read with
its HTTP reason phrase where the kubernetes client used to give one (``Answer.
phrased_error``: the policy status, the auth reviews, the command line). Nothing looks at
the kubernetes client's exceptions, and this module imports no client (the Lease's path
holds none). ``message`` is the one reading of an error body's text,
and ``describe`` the one line that logs, probes and the command line show for whatever an
API call raised. A failure that is not an answer (refused, reset, timed
out) is raised as it is: only its caller knows whether the request may have landed.

Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

# Characters of an error body kept when it carries no Status message (a proxy's page),
# and of the one line ``describe`` gives.
TEXT_LIMIT = 1024


class ApiError(Exception):
    """The API answered with an error status: its code, its reason (the HTTP reason
    phrase, when the client gave one, else its Status body's) and its message
    (``message``)."""

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def detail(self) -> str:
        """One line: ``HTTP <status>: <message>``."""
        return f"HTTP {self.status}: {self.message}"[:TEXT_LIMIT]


def message(body: object, fallback: object = "") -> str:
    """The one reading of an API error's text: the ``message`` of a metav1.Status body,
    else the body itself (cut to ``TEXT_LIMIT``), else ``fallback``. ``body`` is an
    answer's bytes or text."""
    return _read(body, fallback)[0]


def from_answer(status: int, body: object, *, fallback: str = "", phrase: str = "") -> ApiError:
    """The error an error answer (``status``, its ``body``) is: ``fallback`` is its
    message when the body is empty; its reason is ``phrase`` (the HTTP reason phrase,
    when the client gives one), else the reason its Status body names."""
    text, reason = _read(body, fallback)
    return ApiError(status, text, reason=phrase or reason)


def describe(e: BaseException) -> str:
    """One line for what an API call raised: an API error's ``detail``, else the error's
    type and text (a transport error), cut to ``TEXT_LIMIT``."""
    if isinstance(e, ApiError):
        return e.detail
    return f"{type(e).__name__}: {e}"[:TEXT_LIMIT]


def _read(body: object, fallback: object) -> tuple[str, str]:
    """An error body's message (``message``) and its Status ``reason`` ("" if none)."""
    if isinstance(body, bytes | bytearray):
        text = bytes(body).decode("utf-8", "replace").strip()
    else:
        text = "" if body is None else str(body).strip()
    try:
        parsed = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        parsed = None
    reason = ""
    if isinstance(parsed, Mapping):
        reason = str(parsed["reason"]) if isinstance(parsed.get("reason"), str) else ""
        if parsed.get("message"):
            return str(parsed["message"]), reason
    return text[:TEXT_LIMIT] or ("" if fallback is None else str(fallback)), reason
