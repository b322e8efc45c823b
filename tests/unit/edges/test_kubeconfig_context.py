"""Credentials as kubectl reads them: a named context of a kubeconfig."""

from __future__ import annotations

import json
import pathlib

import pytest

from metricsched.edges import kube


@pytest.fixture
def two_contexts(tmp_path: pathlib.Path) -> pathlib.Path:
    def cluster(name: str, port: int) -> dict[str, object]:
        return {"name": name, "cluster": {"server": f"https://127.0.0.1:{port}"}}

    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster("dev", 1111), cluster("prod", 2222)],
                "users": [{"name": "me", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "dev", "context": {"cluster": "dev", "user": "me"}},
                    {"name": "prod", "context": {"cluster": "prod", "user": "me"}},
                ],
                "current-context": "dev",
            }
        )
    )
    return path


def test_the_current_context_is_used_unless_one_is_named(two_contexts):
    assert kube.load_api_client(str(two_contexts)).configuration.host == "https://127.0.0.1:1111"
    named = kube.load_api_client(str(two_contexts), context="prod")
    assert named.configuration.host == "https://127.0.0.1:2222"


def test_an_unknown_context_is_a_kubeconfig_error(two_contexts):
    with pytest.raises(kube.KubeconfigError, match="staging"):
        kube.load_api_client(str(two_contexts), context="staging")
