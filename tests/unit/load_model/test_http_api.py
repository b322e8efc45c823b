"""The test servers' HTTP API (hack/exporter.py and hack/loadmodel.py over
hack/json_http.py): JSON in and out, a bad request is a 400 with its reason, the server
stays up."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

import prometheus_client

from tests.unit.load_model.conftest import _load, loadmodel

exporter = _load("hack_exporter", "exporter.py")


@contextmanager
def serving(handler: type) -> Iterator[http.client.HTTPConnection]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    finally:
        server.shutdown()
        server.server_close()


def call(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[int, Any]:
    conn.request(method, path, body=body)
    answer = conn.getresponse()
    data = answer.read()
    assert answer.getheader("Content-Length") == str(len(data))
    return answer.status, json.loads(data)


def test_the_exporter_takes_values_as_json_and_answers_a_bad_body_with_400(tmp_path):
    state = exporter.State(tmp_path / "state.json", 1)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    with serving(exporter.make_handler(state, registry)) as conn:
        sent = json.dumps({"metric": "m", "values": {"node-1": 0.5}}).encode()
        assert call(conn, "POST", "/values", sent) == (200, {"ok": True})
        status, values = call(conn, "GET", "/values")
        assert status == 200 and values["m"] == {"node-1": 0.5}
        status, answer = call(conn, "POST", "/values", b"{not json")
        assert status == 400 and answer["error"].startswith("bad request: ")
        assert call(conn, "GET", "/nowhere") == (404, {"error": "not found"})


def test_the_load_model_takes_a_hot_spot_as_json_and_answers_a_bad_body_with_400():
    model = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    with serving(loadmodel.make_handler(model, {})) as conn:
        sent = json.dumps({"node": "n1", "cpu": 0.6}).encode()
        assert call(conn, "POST", "/background", sent) == (200, {"ok": True})
        assert model.overrides["n1"] == (0.6, 0.0)
        status, answer = call(conn, "POST", "/background", b"{not json")
        assert status == 400 and answer["error"].startswith("bad request: ")
        assert call(conn, "DELETE", "/background?node=n1") == (200, {"ok": True})
        assert "n1" not in model.overrides
