"""kube.Api: the generated client's method names, sent as raw requests through its ApiClient
(what goes over the wire, answers and errors), and no generated API module loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Callable
from typing import Any

import edges_fakes as fakes
import pytest

from metricsched.edges import errors, kube, kube_http


def _echo(request: fakes.Request) -> tuple[int, Any]:
    if request.path.endswith("/missing"):
        return 404, fakes.status_body(404, "NotFound", "missing not found")
    return 200, {"kind": "Echo", "path": request.path}


def _read_policy(api: kube.Api, namespace: str, name: str, **kw: Any) -> Any:
    return api.get_namespaced_custom_object(
        "metricsched.io", "v1alpha1", namespace, "schedulingpolicies", name, **kw
    )


# (call, method, path, query, body sent)
CASES: list[tuple[Callable[[kube.Api], Any], str, str, dict[str, list[str]], Any]] = [
    (
        lambda a: a.get_namespaced_custom_object(
            "metricsched.io", "v1alpha1", "shop", "schedulingpolicies", "web"
        ),
        "GET",
        "/apis/metricsched.io/v1alpha1/namespaces/shop/schedulingpolicies/web",
        {},
        None,
    ),
    (
        lambda a: a.patch_namespaced_custom_object_status(
            "metricsched.io", "v1alpha1", "shop", "schedulingpolicies", "web", {"status": {}}
        ),
        "PATCH",
        "/apis/metricsched.io/v1alpha1/namespaces/shop/schedulingpolicies/web/status",
        {},
        {"status": {}},
    ),
    (
        lambda a: a.create_token_review({"spec": {"token": "t"}}),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        {},
        {"spec": {"token": "t"}},
    ),
    (
        lambda a: a.create_subject_access_review({"spec": {}}),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {},
        {"spec": {}},
    ),
]


class TestWhatGoesOverTheWire:
    @pytest.mark.parametrize(("call", "method", "path", "query", "body"), CASES)
    def test_each_call_is_one_raw_request(
        self,
        call: Callable[[kube.Api], Any],
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
    ) -> None:
        server = fakes.FakeServer(_echo)
        try:
            answer = call(fakes.api(server.url))
            assert kube.read_json(answer) == {"kind": "Echo", "path": path}
            [request] = server.requests
            assert (request.method, request.path, request.query) == (method, path, query)
            assert request.headers["accept"] == "application/json"
            if body is None:
                assert request.body == b""
            else:
                assert request.json() == body
                expected = (
                    "application/merge-patch+json" if method == "PATCH" else "application/json"
                )
                assert request.headers["content-type"] == expected
        finally:
            server.close()

    def test_names_are_quoted_into_the_path(
        self, fake_kube: fakes.FakeServer, kube_api: kube.Api
    ) -> None:
        with pytest.raises(errors.ApiError):
            _read_policy(kube_api, "ns", "a/b")
        assert (
            fake_kube.requests[0].path
            == "/apis/metricsched.io/v1alpha1/namespaces/ns/schedulingpolicies/a%2Fb"
        )

    @pytest.mark.parametrize(
        "segment", ["web-7d4.x_y~z", "a/b", "a b", "ü", "%41", "", "a?b#c", "a+b=c&d"]
    )
    def test_a_segment_is_quoted_exactly_as_quote_with_nothing_safe(self, segment: str) -> None:
        # Plain names skip the quoting call; the path is the same either way.
        assert kube.path("api/v1", segment) == "/api/v1/" + urllib.parse.quote(segment, safe="")
        # ... and a path kube_http takes as already quoted never keeps a reserved character.
        assert kube_http._QUOTED_PATH.fullmatch(kube.path("api/v1", segment))


class TestAnswers:
    def test_a_non_2xx_answer_raises_the_clients_api_exception(self) -> None:
        server = fakes.FakeServer(_echo)
        try:
            with pytest.raises(errors.ApiError) as caught:
                _read_policy(fakes.api(server.url), "ns", "missing")
            assert caught.value.status == 404
            assert "missing not found" in errors.describe(caught.value)
        finally:
            server.close()

    def test_preloaded_answers_are_refused(self, kube_api: kube.Api) -> None:
        with pytest.raises(ValueError, match="raw"):
            _read_policy(kube_api, "ns", "web", _preload_content=True)


def test_the_operator_loads_no_generated_api_module() -> None:
    """CoreV1Api and its siblings cost ≈ 26 MiB and ≈ 1 s of CPU to import: building the
    operator (and the CLI) must not load them."""
    script = textwrap.dedent(
        """
        import argparse, sys
        import kubernetes.client
        from metricsched import cli, config
        from metricsched.runtime import operator
        parser = argparse.ArgumentParser()
        config.add_run_arguments(parser)
        cfg = config.from_args(parser.parse_args([]), {})
        operator.Operator(cfg, kubernetes.client.ApiClient(kubernetes.client.Configuration()))
        loaded = sorted(m for m in sys.modules if m.startswith("kubernetes.client.api."))
        print(" ".join(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == []
    # The check can fail: the generated class is one attribute away.
    probe = script.replace("loaded = ", "kubernetes.client.CoreV1Api\nloaded = ", 1)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert "kubernetes.client.api.core_v1_api" in done.stdout.split()


class TestCredentialRefresh:
    def test_the_hook_runs_at_most_once_per_interval(self) -> None:
        now = [100.0]
        calls: list[float] = []
        hook = kube.RefreshAtMost(lambda _: calls.append(now[0]), 1.0, clock=lambda: now[0])
        for t in (100.0, 100.2, 100.9, 101.0, 101.5, 102.3):
            now[0] = t
            hook(object())
        assert calls == [100.0, 101.0, 102.3]

    def test_a_loaded_kubeconfig_gets_the_throttled_hook_and_its_token_still_applies(
        self, tmp_path: Any, fake_kube: fakes.FakeServer
    ) -> None:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            textwrap.dedent(
                f"""
                apiVersion: v1
                kind: Config
                clusters: [{{name: c, cluster: {{server: "{fake_kube.url}"}}}}]
                users: [{{name: u, user: {{token: secret}}}}]
                contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
                current-context: x
                """
            )
        )
        client = kube.load_api_client(str(kubeconfig))
        hook = client.configuration.refresh_api_key_hook
        assert isinstance(hook, kube.RefreshAtMost)
        for _ in range(3):
            with pytest.raises(errors.ApiError):
                _read_policy(kube.Api(client), "ns", "p")
        # The token still rides on every request.
        assert [r.headers["authorization"] for r in fake_kube.requests] == ["Bearer secret"] * 3


def test_a_call_without_a_timeout_gets_the_default_one(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_request(*args: Any, timeout_s: Any = None, **kw: Any) -> None:
        seen.append(timeout_s)

    monkeypatch.setattr(kube, "request", fake_request)
    api = kube.Api(object())
    _read_policy(api, "ns", "p")
    api.create_token_review({"spec": {}}, _request_timeout=(5.0, 60.0))
    assert seen == [kube.DEFAULT_TIMEOUT_S, (5.0, 60.0)]
