"""`metricsched shadow NAMESPACE/POLICY`: one GET of the policy, its shadow block printed;
a policy that cannot be read is one line."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import orjson
import pytest

from metricsched import cli
from metricsched.edges import kube_http
from metricsched.runtime import operator as operator_mod

POLICY_PATH = "/apis/metricsched.io/v1alpha1/namespaces/shop/schedulingpolicies/trial"


class Api:
    def __init__(self) -> None:
        self.answers: dict[str, kube_http.Answer] = {}  # by path; 404 if none
        self.asked: list[str] = []


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Api:
    """The API server as the command sees it, and no local cluster's settings."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    fake = Api()
    monkeypatch.setattr(
        operator_mod, "load_api_client", lambda *_, **__: kubernetes.client.ApiClient()
    )

    async def request(self: Any, method: str, path: str, **_: Any) -> kube_http.Answer:
        assert method == "GET"
        fake.asked.append(path)
        return fake.answers.get(path, kube_http.Answer(404, b""))

    monkeypatch.setattr(kube_http.AsyncApi, "request", request)
    return fake


def test_the_report_reads_the_policy_once_and_prints_its_mode(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"spec": {"mode": "Shadow", "metrics": []}, "status": {}}
    api.answers[POLICY_PATH] = kube_http.Answer(200, orjson.dumps(body))
    assert cli.main(["shadow", "shop/trial"]) == 0
    assert api.asked == [POLICY_PATH]
    out = capsys.readouterr().out
    assert out.startswith("Policy:    shop/trial (mode Shadow)")
    assert "No shadow evaluation reported yet" in out


def test_a_policy_that_cannot_be_read_is_one_line(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["shadow", "shop/trial"]) == 1
    err = capsys.readouterr().err
    assert err == "metricsched shadow: cannot read policy shop/trial: HTTP 404: Not Found\n"
