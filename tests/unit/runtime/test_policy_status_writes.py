"""Policy status: the leader writes, once per policy per interval, only what changed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from metricsched.core import model, policy
from metricsched.edges import observe
from metricsched.runtime import status as status_mod


class _Raw:
    data = b"{}"

    def release_conn(self) -> None:
        pass


class FakeCustom:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.fail: BaseException | None = None

    def patch_namespaced_custom_object_status(self, *args: Any, **_: Any) -> _Raw:
        if self.fail is not None:
            raise self.fail
        _group, _version, namespace, _plural, name, body = args
        self.patches.append((f"{namespace}/{name}", body["status"]))
        return _Raw()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _body(name: str, *, generation: int = 1, status: dict[str, Any] | None = None) -> Any:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "generation": generation,
        },
        "spec": {
            "metrics": [
                {
                    "name": "price",
                    "nodeAnnotation": "example.com/price",
                    "weight": 1,
                    "goal": "Minimize",
                }
            ]
        },
        "status": status or {},
    }


class Rig:
    def __init__(self) -> None:
        self.api = FakeCustom()
        self.clock = Clock()
        self.policies: dict[model.PolicyKey, model.Policy] = {}
        self.counts: dict[model.PolicyKey, tuple[int, int]] = {}
        self.status = status_mod.PolicyStatus(
            api=self.api,  # type: ignore[arg-type]
            policies=lambda: self.policies,
            nodes=lambda: [],
            counters=lambda key: self.counts.get(key, (0, 0)),
            metrics=observe.Metrics(),
            interval_s=15.0,
            clock=self.clock,
        )

    def add(self, name: str, **kw: Any) -> model.PolicyKey:
        body = _body(name, **kw)
        parsed = policy.policy_from_body(body)
        self.policies[parsed.key] = parsed
        self.status.observe(parsed.key, body)
        return parsed.key

    def write(self) -> int:
        return asyncio.run(self.status.write_due())


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_a_standby_writes_no_status(rig: Rig) -> None:
    rig.add("a")
    assert rig.write() == 0
    assert rig.api.patches == []


def test_many_policies_created_at_once_cost_one_write_each(rig: Rig) -> None:
    rig.status.start_leading()
    keys = [rig.add(f"p{i}") for i in range(100)]
    for key in keys:  # every policy event, and our own writes coming back, mark again
        rig.status.mark(key)
        rig.status.mark()
    assert rig.write() == 100
    rig.status.mark()
    rig.clock.now += 60
    assert rig.write() == 0  # nothing changed: nothing written
    assert len(rig.api.patches) == 100


def test_a_change_within_the_interval_waits_for_it_and_is_not_lost(rig: Rig) -> None:
    rig.status.start_leading()
    key = rig.add("a")
    assert rig.write() == 1
    rig.counts[key] = (1, 0)
    rig.status.mark(key)
    rig.clock.now += 5
    assert rig.write() == 0
    rig.clock.now += 10
    assert rig.write() == 1
    assert rig.api.patches[-1][1]["scheduledPods"] == 1


def test_counters_continue_from_what_the_previous_leader_wrote(rig: Rig) -> None:
    key = rig.add("a", status={"scheduledPods": 40, "fallbackPods": 3})
    rig.status.start_leading()
    rig.counts[key] = (2, 1)
    assert rig.write() == 1
    written = rig.api.patches[-1][1]
    assert (written["scheduledPods"], written["fallbackPods"]) == (42, 4)


def test_a_failed_write_is_retried_later_and_never_raises(rig: Rig) -> None:
    rig.status.start_leading()
    rig.add("a")
    rig.api.fail = OSError("connection reset")
    assert rig.write() == 0
    rig.api.fail = None
    rig.clock.now += 15
    assert rig.write() == 1


def test_the_written_status_round_trips_as_json(rig: Rig) -> None:
    rig.status.start_leading()
    rig.add("a")
    rig.write()
    (_, status) = rig.api.patches[0]
    assert json.loads(json.dumps(status))["observedGeneration"] == 1
    assert {c["type"] for c in status["conditions"]} == {"Ready", "MetricsAvailable"}
