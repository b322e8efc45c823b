"""Binding when things go wrong: fencing, lost answers read back, connections reused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import edges_fakes as fakes
import kubernetes.client
import pytest

from metricsched.edges import binder, events, kube, pod_status

Kind = binder.BindOutcome


def _pod_body(*, uid: str = "uid-123", node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-7d4", "namespace": "shop", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": {"nodeName": node}}


def _read_back(api: kube.Api) -> binder.BindResult:
    return binder.read_back(api, namespace="shop", name="web-7d4", uid="uid-123", node="node-3")


def _bind(api: kube.Api, **kw: Any) -> binder.BindResult:
    return binder.bind(api, namespace="shop", name="web-7d4", uid="uid-123", node="node-3", **kw)


# --- fencing ----------------------------------------------------------------------------


def test_a_fenced_binding_is_not_sent(fake_kube: fakes.FakeServer, kube_api: kube.Api) -> None:
    result = _bind(kube_api, fence=lambda: binder.MIN_FENCE_S / 2)
    assert result.kind is Kind.FENCED
    assert fake_kube.requests == []


def test_a_binding_within_the_fence_is_sent_with_a_timeout_no_longer_than_the_fence(
    fake_kube: fakes.FakeServer, kube_api: kube.Api
) -> None:
    seen: list[object] = []
    original = kube_api.api_client.call_api

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("_request_timeout"))
        return original(*args, **kwargs)

    kube_api.api_client.call_api = spy  # type: ignore[method-assign]
    result = _bind(kube_api, fence=lambda: 6.0, timeout_s=10.0)
    assert result.kind is Kind.BOUND
    assert seen == [6.0]


# --- read-back of a lost answer ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "kind", "node"),
    [
        (_pod_body(node="node-3"), Kind.BOUND, "node-3"),
        (_pod_body(node="node-9"), Kind.ALREADY_BOUND, "node-9"),
        (_pod_body(), Kind.NOT_BOUND, ""),
        (_pod_body(uid="uid-456", node=""), Kind.GONE, ""),
        (_pod_body(node="", deleting=True), Kind.GONE, ""),
    ],
)
def test_a_lost_binding_answer_is_resolved_by_reading_the_pod(
    fake_kube: fakes.FakeServer,
    kube_api: kube.Api,
    pod: dict[str, Any],
    kind: binder.BindOutcome,
    node: str,
) -> None:
    fake_kube.responder = lambda r: (200, pod)
    result = _read_back(kube_api)
    assert (result.kind, result.node) == (kind, node)
    (request,) = fake_kube.requests
    assert (request.method, request.path) == ("GET", "/api/v1/namespaces/shop/pods/web-7d4")


def test_a_deleted_pod_reads_back_as_gone(fake_kube: fakes.FakeServer, kube_api: kube.Api) -> None:
    assert _read_back(kube_api).kind is Kind.GONE


def test_a_read_back_that_fails_too_stays_unknown() -> None:
    api = fakes.api(f"http://127.0.0.1:{fakes.closed_port()}")
    api.api_client.configuration.retries = 0
    assert _read_back(api).kind is Kind.UNKNOWN


# --- connections ------------------------------------------------------------------------


@pytest.fixture
def keep_alive_kube() -> Iterator[fakes.FakeServer]:
    server = fakes.FakeServer(fakes.kube_default, keep_alive=True)
    yield server
    server.close()


def test_a_binding_after_other_writes_on_one_pooled_connection_is_not_lost(
    keep_alive_kube: fakes.FakeServer,
) -> None:
    """Regression: answers released unread left their body on the pooled connection and
    the next request on it (here the Binding) failed with ResponseNotReady."""
    configuration = kubernetes.client.Configuration()
    configuration.host = keep_alive_kube.url
    configuration.connection_pool_maxsize = 1
    api = kube.Api(kubernetes.client.ApiClient(configuration))
    recorder = events.EventRecorder(api, component="metricsched")
    pod = events.ObjectRef.pod(namespace="shop", name="web-7d4", uid="uid-123")
    for _ in range(3):
        written = pod_status.set_pod_scheduled_false(
            api, namespace="shop", name="web-7d4", message="0/3 nodes", current_conditions=()
        )
        assert written is pod_status.StatusWrite.WRITTEN
        assert (
            recorder.record(pod, event_type="Warning", reason="FailedScheduling", message="x")
            is not events.Recorded.FAILED
        )
        result = _bind(api)
        assert result.kind is Kind.BOUND, result.message
