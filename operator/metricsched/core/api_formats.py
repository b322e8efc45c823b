"""How the API server takes the values we send it: times, and the length of a note.

One home for the wire formats that the cycle, the decision record, the status writers
and the edges all use, so that none of them borrows a formatter from a module with
another job (the parser, the cycle). Purely computational: no I/O, and no clock (the
time is an argument).
"""

from __future__ import annotations

import datetime
from typing import Final

MESSAGE_LIMIT: Final = 1024
"""Bytes an event note may hold; kube-scheduler truncates to it the same way."""


def rfc3339(ts: float) -> str:
    """A unix time as the API writes metav1.Time: RFC 3339, UTC, whole seconds."""
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def truncate_message(message: str, *, limit: int = MESSAGE_LIMIT) -> str:
    """Cut ``message`` to ``limit`` UTF-8 bytes, ending with " ..." when cut."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    suffix = " ..."
    head = encoded[: limit - len(suffix)].decode(errors="ignore")  # never split a character
    return head + suffix
