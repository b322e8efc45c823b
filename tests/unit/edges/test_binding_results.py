"""Binding: one POST per pod, with its uid; every API answer becomes a BindResult."""

from __future__ import annotations

import edges_fakes as fakes
import kubernetes.client
import pytest

from metricsched.edges import binder, kube, kube_http, observe

Kind = binder.BindOutcome


def bind(run: fakes.Runner, api: kube_http.AsyncApi, **overrides: object) -> binder.BindResult:
    args: dict[str, object] = {
        "namespace": "shop",
        "name": "web-7d4",
        "uid": "uid-123",
        "node": "node-3",
        **overrides,
    }
    return run(binder.bind(api, **args))  # type: ignore[arg-type]


def conflict(message: str) -> fakes.Responder:
    full = f'Operation cannot be fulfilled on pods/binding "web-7d4": {message}'
    return lambda r: (409, fakes.status_body(409, "Conflict", full))


def test_binding_posts_exactly_one_binding_with_the_pod_uid_and_node_target(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    result = bind(run, writes_api)
    assert result == binder.BindResult(kind=Kind.BOUND, message="", http_status=201, node="node-3")
    (request,) = fake_kube.requests
    assert (request.method, request.path) == (
        "POST",
        "/api/v1/namespaces/shop/pods/web-7d4/binding",
    )
    assert request.json() == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-7d4", "namespace": "shop", "uid": "uid-123"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-3"},
    }


def test_already_assigned_is_done_and_names_the_node(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = conflict('pod web-7d4 is already assigned to node "node-9"')
    result = bind(run, writes_api)
    assert result.kind is Kind.ALREADY_BOUND
    assert result.node == "node-9"
    assert result.http_status == 409
    assert len(fake_kube.requests) == 1


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (409, "pod web-7d4 is being deleted, cannot be assigned to a host", Kind.GONE),
        (409, "pod web-7d4 has non-empty .spec.schedulingGates", Kind.GATED),
        (
            409,
            "Precondition failed: UID in precondition: uid-123, UID in object meta: uid-456",
            Kind.CONFLICT,
        ),
    ],
)
def test_conflicts_are_told_apart_by_the_api_server_message(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    *,
    status: int,
    message: str,
    kind: binder.BindOutcome,
) -> None:
    fake_kube.responder = conflict(message)
    result = bind(run, writes_api)
    assert result.kind is kind
    assert message in result.message


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (404, "NotFound", Kind.GONE),
        (403, "Forbidden", Kind.FORBIDDEN),
        (400, "BadRequest", Kind.REJECTED),
        (429, "TooManyRequests", Kind.REJECTED),
        # A 5xx may come after etcd accepted the Binding: only reading the pod can tell.
        (500, "InternalError", Kind.UNKNOWN),
        (504, "Timeout", Kind.UNKNOWN),
    ],
)
def test_other_statuses_map_to_their_kind(
    fake_kube: fakes.FakeServer,
    run: fakes.Runner,
    writes_api: kube_http.AsyncApi,
    *,
    status: int,
    reason: str,
    kind: binder.BindOutcome,
) -> None:
    fake_kube.responder = lambda r: (status, fakes.status_body(status, reason, f"says {reason}"))
    result = bind(run, writes_api)
    assert result.kind is kind
    assert result.http_status == status
    assert result.message == f"says {reason}"
    assert len(fake_kube.requests) == 1


def test_an_unreachable_api_server_leaves_the_outcome_unknown(run: fakes.Runner) -> None:
    api = fakes.async_api(f"http://127.0.0.1:{fakes.closed_port()}")
    result = bind(run, api, timeout_s=1.0)
    run(api.close())
    assert result.kind is Kind.UNKNOWN
    assert result.http_status is None
    assert "refused" in result.message.lower()


def test_a_non_status_error_body_is_kept_as_the_message(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = lambda r: (502, b"bad gateway")
    result = bind(run, writes_api)
    assert (result.kind, result.message) == (Kind.UNKNOWN, "bad gateway")


def test_binding_writes_and_failures_are_counted(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    metrics = observe.Metrics()
    bind(run, writes_api, metrics=metrics)
    fake_kube.responder = conflict('pod web-7d4 is already assigned to node "node-9"')
    bind(run, writes_api, metrics=metrics)
    registry = metrics.registry
    assert registry.get_sample_value("metricsched_api_writes_total", {"kind": "binding"}) == 2
    assert (
        registry.get_sample_value("metricsched_binding_errors_total", {"result": "AlreadyBound"})
        == 1
    )


def test_writes_carry_the_clients_credentials_and_refreshed_tokens(
    fake_kube: fakes.FakeServer, run: fakes.Runner
) -> None:
    # The writers take the kubernetes client's credentials: its bearer token, and the
    # refresh hook the in-cluster config installs for projected service-account tokens.
    tokens = iter(("first", "second"))
    configuration = kubernetes.client.Configuration()
    configuration.host = fake_kube.url
    configuration.api_key = {"BearerToken": "initial"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(config: kubernetes.client.Configuration) -> None:
        config.api_key = {"BearerToken": next(tokens)}

    configuration.refresh_api_key_hook = refresh
    api = kube_http.AsyncApi(kubernetes.client.ApiClient(configuration))
    bind(run, api)
    bind(run, api)
    run(api.close())
    assert [r.headers["authorization"] for r in fake_kube.requests] == [
        "Bearer first",
        "Bearer second",
    ]


def test_an_expired_token_is_refreshed_at_once_and_the_binding_sent_again_once(
    fake_kube: fakes.FakeServer, run: fakes.Runner
) -> None:
    # In production the hook runs at most once a second (kube.RefreshAtMost): a token
    # that expired within that second gets a 401, which must not fail the Binding.
    tokens = iter(("stale", "fresh", "unused"))
    configuration = kubernetes.client.Configuration()
    configuration.host = fake_kube.url
    configuration.api_key = {"BearerToken": "initial"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.refresh_api_key_hook = kube.RefreshAtMost(
        lambda config: config.api_key.update(BearerToken=next(tokens)), 3600.0
    )
    fake_kube.responder = lambda r: (
        (401, fakes.status_body(401, "Unauthorized", "Unauthorized"))
        if r.headers["authorization"] != "Bearer fresh"
        else fakes.kube_default(r)
    )
    api = kube_http.AsyncApi(kubernetes.client.ApiClient(configuration))
    metrics = observe.Metrics()
    result = bind(run, api, metrics=metrics)
    run(api.close())
    assert result.kind is Kind.BOUND
    assert [r.headers["authorization"] for r in fake_kube.requests] == [
        "Bearer stale",
        "Bearer fresh",
    ]
    assert (
        metrics.registry.get_sample_value("metricsched_api_writes_total", {"kind": "binding"}) == 2
    )


def test_a_token_refused_twice_is_a_rejection_not_a_loop(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = lambda r: (401, fakes.status_body(401, "Unauthorized", "Unauthorized"))
    result = bind(run, writes_api)
    assert (result.kind, result.http_status) == (Kind.REJECTED, 401)
    assert len(fake_kube.requests) == 2
