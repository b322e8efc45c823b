"""The load model reads a paged LIST whole: every page's items, the first page's version,
each page asked with its limit, selector and continue token."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from typing import Any

import kubernetes.client

from tests.unit.load_model.conftest import loadmodel

kube_sync = sys.modules["kube_sync"]  # hack/kube_sync.py, loaded by the conftest


class _Raw:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


def _pages(*pages: list[str]) -> tuple[list[str | None], Any]:
    asked: list[str | None] = []

    def fetch(cont: str | None) -> _Raw:
        asked.append(cont)
        index = int(cont or 0)
        more = str(index + 1) if index + 1 < len(pages) else None
        return _Raw(
            {
                "metadata": {"resourceVersion": f"rv-{index}", "continue": more},
                "items": [{"metadata": {"name": name}} for name in pages[index]],
            }
        )

    return asked, fetch


def test_every_page_is_read_and_the_version_is_the_first_page_s() -> None:
    asked, fetch = _pages(["a", "b"], ["c"], [])
    items, version = loadmodel.list_all(fetch)
    assert [item["metadata"]["name"] for item in items] == ["a", "b", "c"]
    assert version == "rv-0"
    assert asked == [None, "1", "2"]


def test_each_page_is_asked_with_its_limit_selector_and_continue_token() -> None:
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            raw = json.dumps({"metadata": {"resourceVersion": "7"}, "items": []}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        configuration = kubernetes.client.Configuration()
        configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
        client = kubernetes.client.ApiClient(configuration)
        fetch = loadmodel.lister(client, "/api/v1/pods", "app=web,tier in (a)")
        assert loadmodel.list_all(fetch) == ([], "7")
        kube_sync.read_json(fetch("tok/1"))
    finally:
        server.shutdown()
        server.server_close()
    assert asked == [
        "/api/v1/pods?limit=500&labelSelector=app%3Dweb%2Ctier+in+%28a%29",
        "/api/v1/pods?limit=500&labelSelector=app%3Dweb%2Ctier+in+%28a%29&continue=tok%2F1",
    ]
