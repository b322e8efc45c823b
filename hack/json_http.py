"""The test servers' HTTP replies (hack/exporter.py, hack/loadmodel.py): quiet, JSON in
and out, every reply with its length. Bound to loopback by its callers."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

# A mixin: the handler names BaseHTTPRequestHandler itself, after this (its do_GET, ...
# then read as the overrides they are); type checkers see the base's methods here too.
if TYPE_CHECKING:
    _Base = BaseHTTPRequestHandler
else:
    _Base = object


class Replies(_Base):
    """Put before ``BaseHTTPRequestHandler`` in a handler's bases."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def reply(self, code: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> Any:
        """The request's JSON body (``{}`` when empty)."""
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")
