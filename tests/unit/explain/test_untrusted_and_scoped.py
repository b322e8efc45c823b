"""explain is not a second, unguarded deputy (issue 24, finding 12): the decision it
prints from the pod is escaped (a pod's author can forge it), it queries only the policy
that decides the pod, with the operator's query rules when told which operator, and a
user whose rights end at a namespace gets one line, not a traceback."""

from __future__ import annotations

import json
import os
from typing import Any

import kubernetes.client
import orjson
import pytest

from metricsched import cli
from metricsched.core import decision_record, explain
from metricsched.edges import errors, kube_http
from metricsched.runtime import operator as operator_mod

FORGED = json.dumps(
    {
        "v": 1,
        "policy": "shop/web\x1b]0;pwned\x07\x1b[2J",
        "node": "node-1\n  Runner-up: node-9  score 100",
        "score": 10**400,  # beyond any float: not a score
        "metrics": {"lat\x1b[31mency": 10**400, "cpu\u202e": 0.5},
        "fallback": {"strategy": "Wait\r", "reason": "x" * 10_000},
        "time": "2026-11-23T05:00:00Z",
    }
)


@pytest.fixture(autouse=True)
def no_local_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No development cluster's env file and no METRICSCHED_* of the caller's shell."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("METRICSCHED_") or name == "KUBECONFIG":
            monkeypatch.delenv(name)


def _printable_lines(text: str) -> bool:
    return all(line.isprintable() for line in text.split("\n"))


def test_a_forged_record_without_a_score_is_refused():
    with pytest.raises(ValueError, match="no score"):
        decision_record.decode(FORGED)


def test_a_forged_record_prints_escaped_and_bounded():
    body = json.loads(FORGED)
    body["score"] = 50
    record = decision_record.decode(json.dumps(body))
    text = explain.render_recorded(record, bound_to="node-1")
    assert _printable_lines(text)
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert "shop/web\\x1b]0;pwned\\x07\\x1b[2J" in text
    assert "node-1\\x0a  Runner-up: node-9" in text  # one line, not a forged second one
    assert len(text.splitlines()) == 5  # heading, policy, placed on, fallback, the note
    assert record.winner.metrics == {"lat\\x1b[31mency": None, "cpu\\u202e": 0.5}
    assert len(record.fallback_reason) == 4 * decision_record.MAX_TEXT
    assert "which its author can edit" in text.splitlines()[0]


def test_a_record_with_many_values_keeps_a_bounded_number():
    body = json.loads(FORGED)
    body["score"] = 50
    body["metrics"] = {f"m{i}": i for i in range(10_000)}
    record = decision_record.decode(json.dumps(body))
    assert len(record.winner.metrics) == decision_record.MAX_ENTRIES


def _deployment(env: list[dict[str, Any]], *, name: str = "metricsched") -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": name, "env": env}]}}}}


def test_the_operators_query_rules_are_read_from_its_deployment():
    env = [
        {"name": "METRICSCHED_PROMETHEUS_URL", "value": "http://prom:9090"},
        {"name": "METRICSCHED_QUERY_REQUIRED_MATCHERS", "value": "namespace={namespace}"},
    ]
    assert cli.operator_rules_env(_deployment(env)) == {
        "METRICSCHED_QUERY_ALLOWED_METRICS": "",  # the operator has none: neither has explain
        "METRICSCHED_QUERY_REQUIRED_MATCHERS": "namespace={namespace}",
    }


def test_a_rule_the_deployment_takes_from_elsewhere_is_not_guessed():
    env = [{"name": "METRICSCHED_QUERY_ALLOWED_METRICS", "valueFrom": {"configMapKeyRef": {}}}]
    with pytest.raises(cli._ExplainError, match="not a plain value"):
        cli.operator_rules_env(_deployment(env))


FORBIDDEN = kube_http.Answer(403, b"")  # what a LIST of nodes answers a namespace-scoped user


def _answering(monkeypatch: pytest.MonkeyPatch, answers: dict[str, kube_http.Answer]) -> None:
    """The API server as explain's reads see it: the answer of each path (404 if none),
    with a real kubernetes ApiClient for credentials."""
    monkeypatch.setattr(
        operator_mod, "load_api_client", lambda *_, **__: kubernetes.client.ApiClient()
    )

    async def request(self: Any, method: str, path: str, **_: Any) -> kube_http.Answer:
        assert method == "GET"
        return answers.get(path, kube_http.Answer(404, b""))

    monkeypatch.setattr(kube_http.AsyncApi, "request", request)


POD_PATH = "/api/v1/namespaces/shop/pods/web"
POLICIES_PATH = "/apis/metricsched.io/v1alpha1/namespaces/shop/schedulingpolicies"
DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/metricsched/deployments/metricsched"


def test_a_namespace_scoped_user_gets_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = {"metadata": {"name": "web", "namespace": "shop", "uid": "u"}, "spec": {}}
    _answering(
        monkeypatch,
        {POD_PATH: kube_http.Answer(200, orjson.dumps(pod)), POLICIES_PATH: FORBIDDEN},
    )

    async def listing_forbidden(self: Any) -> None:  # the informers' first LIST
        raise errors.ApiError(403, 'nodes is forbidden: User "jane" cannot list')

    monkeypatch.setattr(operator_mod.Operator, "load_once", listing_forbidden)
    monkeypatch.setattr(operator_mod.Operator, "__init__", lambda self, *_, **__: None)
    assert cli.main(["explain", "shop/web", "--prometheus-url", "http://prom:9090"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        'metricsched explain: not allowed: HTTP 403: nodes is forbidden: User "jane" cannot'
        " list." in err
    )
    assert "explain reads what the scheduler reads, cluster-wide" in err


def test_explain_without_rules_says_its_queries_go_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "explain_pod", lambda *_, **__: 0)
    assert cli.main(["explain", "shop/web", "--prometheus-url", "http://prom:9090"]) == 0
    assert "note: no query rules" in capsys.readouterr().err
    assert cli.main(["explain", "shop/web", "--query-allowed-metric", "node_*"]) == 0
    assert "no query rules" not in capsys.readouterr().err


def test_the_operator_flag_applies_its_rules_over_the_callers_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(cli, "explain_pod", lambda config, *_, **__: seen.append(config) or 0)
    env = [{"name": "METRICSCHED_QUERY_ALLOWED_METRICS", "value": "node_*,up"}]
    _answering(
        monkeypatch, {DEPLOYMENT_PATH: kube_http.Answer(200, orjson.dumps(_deployment(env)))}
    )
    monkeypatch.setenv("METRICSCHED_QUERY_REQUIRED_MATCHERS", "cluster=dev")
    assert cli.main(["explain", "shop/web", "--operator", "metricsched/metricsched"]) == 0
    (config,) = seen
    assert config.query_rules.allowed_metrics == ("node_*", "up")
    assert config.query_rules.required_matchers == ()  # the operator has none
    assert "applying the query rules of deployment metricsched/metricsched" in (
        capsys.readouterr().err
    )


def test_an_unreadable_operator_deployment_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _answering(monkeypatch, {DEPLOYMENT_PATH: FORBIDDEN})
    assert cli.main(["explain", "shop/web", "--operator", "metricsched/metricsched"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("metricsched explain: cannot read the operator's query rules")
    assert "HTTP 403: Forbidden" in err  # the reason phrase, as the kubernetes client said
    assert "Traceback" not in err
