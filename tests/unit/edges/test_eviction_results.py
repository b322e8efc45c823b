"""Eviction: one policy/v1 Eviction per pod with its uid as a precondition, fenced like a
Binding; a PodDisruptionBudget's 429 is an answer (Blocked), not an error."""

from __future__ import annotations

import edges_fakes as fakes
import pytest

from metricsched.edges import eviction, kube_http, observe

Kind = eviction.EvictOutcome


def evict(run: fakes.Runner, api: kube_http.AsyncApi, **overrides: object) -> eviction.EvictResult:
    args: dict[str, object] = {"namespace": "shop", "name": "web-7d4", "uid": "uid-123"}
    return run(eviction.evict(api, **{**args, **overrides}))  # type: ignore[arg-type]


def test_an_eviction_posts_exactly_one_eviction_with_the_pod_uid(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    metrics = observe.Metrics()
    result = evict(run, writes_api, metrics=metrics)
    assert result == eviction.EvictResult(kind=Kind.EVICTED, message="", http_status=201)
    (request,) = fake_kube.requests
    assert (request.method, request.path) == (
        "POST",
        "/api/v1/namespaces/shop/pods/web-7d4/eviction",
    )
    assert request.json() == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-7d4", "namespace": "shop"},
        "deleteOptions": {"preconditions": {"uid": "uid-123"}},
    }
    assert (
        metrics.registry.get_sample_value("metricsched_api_writes_total", {"kind": "eviction"}) == 1
    )


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (
            429,
            "TooManyRequests",
            Kind.BLOCKED,
        ),  # "Cannot evict pod as it would violate the pod's disruption budget."
        (404, "NotFound", Kind.GONE),
        (409, "Conflict", Kind.GONE),  # the uid precondition: a re-created pod
        (403, "Forbidden", Kind.FORBIDDEN),
        (500, "InternalError", Kind.FAILED),
    ],
)
def test_answers_map_to_their_kind(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    *,
    status: int,
    reason: str,
    kind: Kind,
) -> None:
    fake_kube.responder = lambda r: (status, fakes.status_body(status, reason, f"says {reason}"))
    result = evict(run, writes_api)
    assert (result.kind, result.http_status) == (kind, status)
    assert f"says {reason}" in result.message
    assert len(fake_kube.requests) == 1


def test_nothing_is_sent_without_enough_leadership_left(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    result = evict(run, writes_api, fence=lambda: 3.9)
    assert result.kind is Kind.FENCED
    assert fake_kube.requests == []
    assert evict(run, writes_api, fence=lambda: 4.0).kind is Kind.EVICTED


def test_an_unreachable_api_server_is_a_failure(run: fakes.Runner) -> None:
    api = fakes.async_api(f"http://127.0.0.1:{fakes.closed_port()}")
    result = evict(run, api, timeout_s=1.0)
    run(api.close())
    assert (result.kind, result.http_status) == (Kind.FAILED, None)
