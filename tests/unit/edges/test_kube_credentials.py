"""edges/kube.py, the kubernetes client for credentials only: the loaded credentials and
their throttled refresh ride on the loop's requests, API paths are quoted as the client
quotes them, and no generated API module is loaded."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import urllib.parse
from typing import Any

import edges_fakes as fakes
import pytest

from metricsched.edges import kube, kube_http


class TestPaths:
    @pytest.mark.parametrize(
        "segment", ["web-7d4.x_y~z", "a/b", "a b", "ü", "%41", "", "a?b#c", "a+b=c&d"]
    )
    def test_a_segment_is_quoted_exactly_as_quote_with_nothing_safe(self, segment: str) -> None:
        # Plain names skip the quoting call; the path is the same either way.
        assert kube.path("api/v1", segment) == "/api/v1/" + urllib.parse.quote(segment, safe="")
        # ... and a path kube_http takes as already quoted never keeps a reserved character.
        assert kube_http._QUOTED_PATH.fullmatch(kube.path("api/v1", segment))


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
        api = kube_http.AsyncApi(client)
        path = kube.path("apis/metricsched.io/v1alpha1/namespaces", "ns", "policies", "p")

        async def read_three_times() -> list[int]:
            try:
                return [(await api.request("GET", path)).status for _ in range(3)]
            finally:
                await api.close()

        assert asyncio.run(read_three_times()) == [404] * 3
        # The token still rides on every request.
        assert [r.headers["authorization"] for r in fake_kube.requests] == ["Bearer secret"] * 3
