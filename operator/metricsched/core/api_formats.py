"""How the API server writes the values we send it: times.

One home for the wire formats that the decision record, the status writers and the edges
all use, so that none of them borrows a formatter from a module that has another job
(the parser). Purely computational: no I/O, and no clock (the
time is an argument).
"""

from __future__ import annotations

import datetime


def rfc3339(ts: float) -> str:
    """A unix time as the API writes metav1.Time: RFC 3339, UTC, whole seconds."""
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
