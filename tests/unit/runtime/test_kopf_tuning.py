"""kopf tuning: no diff-base essence, no stored state, and only event handlers to allow it."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import kopf
import pytest

from metricsched import config as config_mod
from metricsched.edges import webhook
from metricsched.runtime import kopf_source, kopf_tuning
from tests.unit.runtime.test_watches_and_relist import _kopf, _watches


def _pod_body() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u1",
            "labels": {"app": "web"},
            "annotations": {"example.com/owner": "team"},
        },
        "spec": {"schedulerName": "metricsched", "containers": [{"name": "app"}]},
        "status": {"phase": "Pending"},
    }


def test_every_handler_of_the_registry_is_a_stateless_event_handler() -> None:
    # The null diff-base is only safe while no handler asks kopf for old/new/diff.
    registry = kopf_source.build_registry(_kopf(_watches()))
    assert registry._watching.get_all_handlers()
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()


def test_no_diffbase_builds_an_empty_essence_of_a_pod() -> None:
    storage = kopf_tuning.NoDiffBase()
    assert storage.build(body=kopf.Body(_pod_body())) == {}
    assert storage.fetch(body=kopf.Body(_pod_body())) is None


def test_no_diffbase_stores_nothing_on_the_object() -> None:
    body = kopf.Body(_pod_body())
    patch = kopf.Patch()
    kopf_tuning.NoDiffBase().store(body=body, patch=patch, essence=kopf.BodyEssence())
    assert not patch


def test_kopf_default_diffbase_would_copy_the_pod_spec() -> None:
    # What the tuning saves: kopf's default builds a deep copy of the spec per event.
    essence = kopf.OperatorSettings().persistence.diffbase_storage.build(
        body=kopf.Body(_pod_body())
    )
    assert essence["spec"] == _pod_body()["spec"]


class FakeGc:
    """``gc.freeze`` and ``gc.get_freeze_count``, counting freezes (a real freeze in a
    test would pin the test run's objects)."""

    def __init__(self) -> None:
        self.freezes = 0
        self.frozen_objects = 0

    def freeze(self) -> None:
        self.freezes += 1
        self.frozen_objects += 1000

    def get_freeze_count(self) -> int:
        return self.frozen_objects


@pytest.fixture
def fake_gc(monkeypatch: pytest.MonkeyPatch) -> FakeGc:
    fake = FakeGc()
    monkeypatch.setattr(kopf_tuning, "gc", fake)
    return fake


def test_operator_settings_use_the_null_diffbase_and_freeze_start_up_objects(
    fake_gc: FakeGc,
) -> None:
    settings = kopf.OperatorSettings()
    kopf_source.configure_kopf(settings)
    assert isinstance(settings.persistence.diffbase_storage, kopf_tuning.NoDiffBase)
    assert fake_gc.freezes == 1
    assert settings.posting.enabled is False


def test_a_kopf_restart_does_not_freeze_again(fake_gc: FakeGc) -> None:
    """Regression (issue 24, finding 12): every kopf restart froze the failed run's
    cyclic garbage out of the collector's reach for good."""
    for _ in range(3):  # start-up, then two restarts of kopf after API errors
        kopf_source.configure_kopf(kopf.OperatorSettings())
    assert fake_gc.freezes == 1


def _webhook_kopf(*argv: str) -> kopf_source.KopfSource:
    k = _kopf(_watches())
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    k.config = config_mod.from_args(parser.parse_args(list(argv)), {})
    return k


def _started_settings(registry: kopf.OperatorRegistry) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    (startup,) = [h for h in registry._activities.get_all_handlers() if h.id.endswith("configure")]
    asyncio.run(startup.fn(settings=settings))  # type: ignore[call-arg]
    return settings


def test_without_the_webhook_there_is_no_admission_handler_nor_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kopf_tuning, "gc", FakeGc())
    registry = kopf_source.build_registry(_webhook_kopf())
    assert not registry._webhooks.get_all_handlers()
    assert _started_settings(registry).admission.server is None


def test_the_webhook_is_one_mutating_handler_for_created_pods_served_by_kopf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kopf_tuning, "gc", FakeGc())
    k = _webhook_kopf(
        "--webhook", "--webhook-cert-file", "/c/tls.crt", "--webhook-key-file", "/c/tls.key"
    )
    registry = kopf_source.build_registry(k)
    (handler,) = registry._webhooks.get_all_handlers()
    assert handler.id == webhook.HANDLER_ID
    assert list(handler.operations or []) == ["CREATE"]
    assert handler.selector is not None and handler.selector.any_name == "pods"
    settings = _started_settings(registry)
    server = settings.admission.server
    assert isinstance(server, webhook.WebhookServer)
    assert (server.port, server.certfile, server.pkeyfile) == (9443, "/c/tls.crt", "/c/tls.key")
    # The chart owns the MutatingWebhookConfiguration; kopf must not rewrite it.
    assert settings.admission.managed is None
