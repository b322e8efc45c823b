"""Every Binding the scheduler sends carries the decision record, and a bound pod still
costs two writes: the Binding and its Event."""

from __future__ import annotations

from typing import Any

import pytest

from metricsched.core import decision_record
from tests.unit.runtime import test_bind_outcomes as bind_rig


class RecordingCore(bind_rig.FakeCore):
    def __init__(self) -> None:
        super().__init__()
        self.annotations: dict[str, str] | None = None

    def create_binding(self, body: dict[str, Any]) -> Any:
        self.annotations = body["metadata"].get("annotations")
        return super().create_binding(body)


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> bind_rig.Rig:
    monkeypatch.setattr(bind_rig, "FakeCore", RecordingCore)
    return bind_rig.Rig()


def test_the_binding_carries_the_decision_and_the_pod_costs_two_writes(rig) -> None:
    decision = rig.schedule()
    assert rig.api.calls == [f"bind {decision.node}", "event Scheduled"]
    assert rig.api.annotations is not None
    record = decision_record.decode(rig.api.annotations[decision_record.ANNOTATION])
    assert record.winner.node == decision.node
    assert record.policy is None  # the default policy placed it
    assert record.fallback_strategy == "LeastAllocated"
    assert record.time == 1.0
