"""The opt-in webhook's edge: kopf's patch for a pod, the request's namespace, and a
handler that never refuses a pod."""

from __future__ import annotations

import argparse
import asyncio
import copy
from typing import Any

import aiohttp
import kopf
import pytest

from metricsched import config as config_mod
from metricsched.core import opt_in
from metricsched.edges import observe, webhook

RULES = opt_in.rules(scheduler_name="metricsched", excluded_namespaces=["metricsched"])


def pod(namespace: str | None = "shop", scheduler: str = "default-scheduler") -> dict[str, Any]:
    meta: dict[str, Any] = {"generateName": "web-abc-", "labels": {"app": "web"}}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": scheduler, "containers": [{"name": "a", "image": "a"}]},
    }


def review(obj: dict[str, Any], namespace: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "namespace": namespace,
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": obj,
        },
    }


def admitted(body: dict[str, Any], metrics: observe.Metrics) -> list[dict[str, Any]]:
    patch = kopf.Patch(body=kopf.Body(body))
    webhook.admit(kopf.Body(body), patch, rules=RULES, metrics=metrics)
    return list(patch.as_json_patch())


def count(metrics: observe.Metrics, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "metricsched_webhook_admissions_total", {"result": result}
    )
    return value or 0.0


def test_an_opted_in_pod_gets_one_json_patch_op_for_its_scheduler_name() -> None:
    metrics = observe.Metrics()
    ops = admitted(pod(), metrics)
    assert ops == [{"op": "replace", "path": "/spec/schedulerName", "value": "metricsched"}]
    assert count(metrics, "Assigned") == 1


def test_a_pod_naming_its_own_scheduler_gets_no_patch() -> None:
    metrics = observe.Metrics()
    assert admitted(pod(scheduler="gpu-scheduler"), metrics) == []
    assert count(metrics, "NamesAScheduler") == 1


def test_the_release_namespace_gets_no_patch() -> None:
    metrics = observe.Metrics()
    assert admitted(pod(namespace="metricsched"), metrics) == []
    assert count(metrics, "ExcludedNamespace") == 1


def test_an_unreadable_pod_is_admitted_unchanged_and_counted() -> None:
    metrics = observe.Metrics()
    body = pod()
    body["metadata"]["labels"] = ["not", "a", "mapping"]
    assert admitted(body, metrics) == []
    assert count(metrics, webhook.ERROR) == 1


def test_the_request_namespace_fills_a_pod_that_has_none() -> None:
    request = review(pod(namespace=None), namespace="shop")
    assert webhook.with_request_namespace(request)["request"]["object"]["metadata"] == {
        "generateName": "web-abc-",
        "labels": {"app": "web"},
        "namespace": "shop",
    }


def test_a_pod_own_namespace_is_kept_and_odd_reviews_pass_through() -> None:
    request = review(pod(namespace="shop"), namespace="other")
    assert (
        webhook.with_request_namespace(request)["request"]["object"]["metadata"]["namespace"]
        == "shop"
    )
    for odd in ({}, {"request": None}, {"request": {"object": None}}, []):
        assert webhook.with_request_namespace(copy.deepcopy(odd)) == odd


def test_kopf_server_hands_the_handler_the_request_namespace() -> None:
    """kopf's own HTTP server (insecure: no certificate needed) with our wrapper."""
    seen: list[dict[str, Any]] = []

    async def fn(request: Any, **_: Any) -> dict[str, Any]:
        seen.append(request)
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    async def scenario() -> dict[str, Any]:
        server = webhook.WebhookServer(addr="127.0.0.1", insecure=True)
        configs = server(fn)
        client_config = await configs.__anext__()
        try:
            async with aiohttp.ClientSession() as session:
                url = f"{client_config['url']}{webhook.PATH}"
                async with session.post(url, json=review(pod(namespace=None))) as answer:
                    return dict(await answer.json())
        finally:
            await configs.aclose()

    answer = asyncio.run(scenario())
    assert answer["response"]["allowed"] is True
    assert seen[0]["request"]["object"]["metadata"]["namespace"] == "shop"


def test_each_answer_is_timed_in_the_admission_duration_histogram() -> None:
    metrics = observe.Metrics()

    async def fn(request: Any, **_: Any) -> dict[str, Any]:
        await asyncio.sleep(0.03)  # a handler held up, as by a busy event loop
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    async def scenario() -> None:
        server = webhook.WebhookServer(addr="127.0.0.1", insecure=True, metrics=metrics)
        configs = server(fn)
        client_config = await configs.__anext__()
        try:
            async with aiohttp.ClientSession() as session:
                url = f"{client_config['url']}{webhook.PATH}"
                for _ in range(2):
                    async with session.post(url, json=review(pod())) as answer:
                        await answer.read()
        finally:
            await configs.aclose()

    asyncio.run(scenario())
    registry = metrics.registry
    name = "metricsched_webhook_admission_duration_seconds"
    assert registry.get_sample_value(f"{name}_count") == 2
    assert registry.get_sample_value(f"{name}_bucket", {"le": "0.025"}) == 0
    assert registry.get_sample_value(f"{name}_bucket", {"le": "0.1"}) == 2


def _parse(argv: list[str], env: dict[str, str] | None = None) -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args(argv), env or {})


def test_the_webhook_is_off_by_default_and_always_excludes_kube_system() -> None:
    cfg = _parse([])
    assert cfg.webhook_enabled is False
    assert cfg.webhook_port == 9443
    assert cfg.webhook_scheduler_name == "metricsched"
    assert cfg.webhook_excluded_namespaces == ("kube-system",)


def test_webhook_flags_and_their_environment_variables() -> None:
    env = {
        "METRICSCHED_WEBHOOK": "true",
        "METRICSCHED_WEBHOOK_PORT": "10250",
        "METRICSCHED_WEBHOOK_CERT_FILE": "/certs/tls.crt",
        "METRICSCHED_WEBHOOK_KEY_FILE": "/certs/tls.key",
        "METRICSCHED_WEBHOOK_EXCLUDED_NAMESPACES": "infra,monitoring",
        "METRICSCHED_SCHEDULER_NAMES": "metricsched,metricsched-gpu",
        "POD_NAMESPACE": "metricsched",
    }
    cfg = _parse(["--webhook-scheduler-name", "metricsched-gpu"], env)
    assert cfg.webhook_enabled is True
    assert cfg.webhook_port == 10250
    assert (cfg.webhook_cert_file, cfg.webhook_key_file) == ("/certs/tls.crt", "/certs/tls.key")
    assert cfg.webhook_scheduler_name == "metricsched-gpu"
    assert cfg.webhook_excluded_namespaces == ("infra", "monitoring", "kube-system", "metricsched")
    assert webhook.rules(cfg).excluded_namespaces == {
        "infra",
        "monitoring",
        "kube-system",
        "metricsched",
    }
    assert _parse(["--no-webhook"], env).webhook_enabled is False


def test_the_pod_opt_in_label_is_a_flag_and_an_environment_variable() -> None:
    assert _parse([]).webhook_pod_label == "metricsched.io/scheduler"
    env = {"METRICSCHED_WEBHOOK_POD_LABEL": "example.com/sched"}
    assert _parse([], env).webhook_pod_label == "example.com/sched"
    cfg = _parse(["--webhook-pod-label", "team.io/sched"], env)
    assert webhook.rules(cfg).pod_label == "team.io/sched"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--webhook"], "needs --webhook-cert-file"),
        (["--webhook-cert-file", "/c"], "both a certificate file and a key file"),
        (["--webhook-scheduler-name", "other"], "not one this operator serves"),
        (["--webhook-port", "0"], "outside"),
    ],
)
def test_webhook_settings_that_cannot_work_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(config_mod.ConfigError, match=message):
        _parse(argv)


def test_admission_reviews_are_answered_while_idle_and_slow_connections_flood_the_port() -> None:
    """Issue 28, item 4: the webhook port keeps answering under a connection flood (any
    pod can reach it: the API server must). kopf's server (aiohttp) serves every connection
    on the loop without a thread per connection, so 400 connections that never send a
    request and 100 that trickle half a header do not stand between the API server and
    an answer. Each review is given 10 s (the longest a user would set the chart's
    ``webhook.timeoutSeconds``, default 2): the assertion is that it is answered at all,
    not how fast."""

    async def fn(request: Any, **_: Any) -> dict[str, Any]:
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    async def scenario() -> list[bool]:
        server = webhook.WebhookServer(addr="127.0.0.1", insecure=True)
        configs = server(fn)
        client_config = await configs.__anext__()
        url = f"{client_config['url']}{webhook.PATH}"
        host, port = "127.0.0.1", int(str(client_config["url"]).rsplit(":", 1)[1].split("/")[0])
        flood: list[asyncio.StreamWriter] = []
        try:
            for i in range(500):
                _, writer = await asyncio.open_connection(host, port)
                if i % 5 == 0:  # a slow loris: half a request line, never finished
                    writer.write(b"POST /scheduler-name HTTP/1.1\r\nHost: x\r\nContent-Le")
                    await writer.drain()
                flood.append(writer)
            answered = []
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                for _ in range(20):
                    async with session.post(url, json=review(pod())) as answer:
                        answered.append((await answer.json())["response"]["allowed"] is True)
            return answered
        finally:
            for writer in flood:
                writer.close()
            await configs.aclose()

    assert asyncio.run(scenario()) == [True] * 20
