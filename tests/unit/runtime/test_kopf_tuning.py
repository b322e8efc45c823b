"""kopf tuning: no diff-base essence, no stored state, and only event handlers to allow it."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import kopf
import pytest

from metricsched import config as config_mod
from metricsched.edges import observe
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import kopf_tuning
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import status as status_mod
from metricsched.runtime import watches as watches_mod


def _watches() -> watches_mod.Watches:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    cache = cache_mod.ClusterCache()
    metrics = observe.Metrics()
    return watches_mod.Watches(
        config=config_mod.from_args(parser.parse_args([]), {}),
        api_client=None,
        cache=cache,
        queue=queue_mod.SchedulingQueue(),
        status=status_mod.PolicyStatus(
            custom_api=None,  # type: ignore[arg-type]
            policies=lambda: cache.policies,
            nodes=cache.nodes,
            counters=lambda key: (0, 0),
            metrics=metrics,
            interval_s=15.0,
        ),
        store=prom.MetricStore(),
        metrics=metrics,
        health=observe.HealthState(),
        record=lambda *a, **k: None,
        refresh_now=asyncio.Event(),
    )


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
    registry = watches_mod.build_registry(_watches())
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


def test_operator_settings_use_the_null_diffbase_and_freeze_start_up_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen: list[bool] = []
    monkeypatch.setattr(kopf_tuning.gc, "freeze", lambda: frozen.append(True))
    settings = kopf.OperatorSettings()
    watches_mod.configure_kopf(settings)
    assert isinstance(settings.persistence.diffbase_storage, kopf_tuning.NoDiffBase)
    assert frozen == [True]
    assert settings.posting.enabled is False
