"""Policy status: the leader writes, once per policy per interval, only what changed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from metricsched.core import model, policy
from metricsched.edges import kube_http, observe
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import status as status_mod


class FakeApi:
    """``kube_http.AsyncApi`` as the status writer uses it: ``request``, answering
    ``answer`` (or raising ``fail``), each PATCH kept as (policy key, status)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[tuple[str, str, str]] = []  # method, path, content type
        self.fail: BaseException | None = None
        self.answer = kube_http.Answer(200, b"{}")

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str, **_: Any
    ) -> kube_http.Answer:
        if self.fail is not None:
            raise self.fail
        self.sent.append((method, path, content_type))
        if self.answer.ok:
            *_prefix, namespace, _plural, name, _status = path.split("/")
            self.patches.append((f"{namespace}/{name}", body["status"]))
        return self.answer


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
        self.api = FakeApi()
        self.clock = Clock()
        self.policies: dict[model.PolicyKey, model.Policy] = {}
        self.counts: dict[model.PolicyKey, tuple[int, int]] = {}
        self.gates = gates_mod.Gates()
        self.status = status_mod.PolicyStatus(
            api=self.api,  # type: ignore[arg-type]
            policies=lambda: self.policies,
            nodes=lambda: [],
            counters=lambda key: self.counts.get(key, (0, 0)),
            metrics=observe.Metrics(),
            gates=self.gates,
            interval_s=15.0,
            clock=self.clock,
        )

    def add(self, name: str, **kw: Any) -> model.PolicyKey:
        body = _body(name, **kw)
        parsed = policy.policy_from_body(body)
        self.policies[parsed.key] = parsed
        self.status.observe(parsed.key, body)
        return parsed.key

    def lead(self) -> None:
        """What the operator does when this replica begins to lead."""
        self.status.start_leading()
        self.gates.leading.set()

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
    rig.lead()
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
    rig.lead()
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
    rig.lead()
    rig.counts[key] = (2, 1)
    assert rig.write() == 1
    written = rig.api.patches[-1][1]
    assert (written["scheduledPods"], written["fallbackPods"]) == (42, 4)


def test_a_failed_write_is_retried_later_and_never_raises(rig: Rig) -> None:
    rig.lead()
    rig.add("a")
    rig.api.fail = OSError("connection reset")
    assert rig.write() == 0
    rig.api.fail = None
    rig.clock.now += 15
    assert rig.write() == 1


def test_the_written_status_round_trips_as_json(rig: Rig) -> None:
    rig.lead()
    rig.add("a")
    rig.write()
    (_, status) = rig.api.patches[0]
    assert json.loads(json.dumps(status))["observedGeneration"] == 1
    assert {c["type"] for c in status["conditions"]} == {"Ready", "MetricsAvailable"}


def test_the_status_is_merge_patched_on_the_status_subresource(rig: Rig) -> None:
    rig.lead()
    rig.add("a")
    assert rig.write() == 1
    assert rig.api.sent == [
        (
            "PATCH",
            "/apis/metricsched.io/v1alpha1/namespaces/shop/schedulingpolicies/a/status",
            "application/merge-patch+json",
        )
    ]


def test_an_error_answer_is_retried_later_and_never_raises(rig: Rig) -> None:
    rig.lead()
    rig.add("a")
    rig.api.answer = kube_http.Answer(503, b"")
    assert rig.write() == 0
    rig.api.answer = kube_http.Answer(200, b"{}")
    rig.clock.now += 15
    assert rig.write() == 1


def test_a_policy_deleted_meanwhile_is_not_written_again(rig: Rig) -> None:
    rig.lead()
    key = rig.add("a")
    rig.api.answer = kube_http.Answer(404, b"")
    rig.write()
    rig.api.answer = kube_http.Answer(200, b"{}")
    rig.clock.now += 60
    rig.status.mark(key)
    assert rig.write() == 0  # the 404 counted as written: the same status is not sent again
    assert len(rig.api.sent) == 1
