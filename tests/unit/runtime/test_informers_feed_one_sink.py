"""The informers feed one sink (the translation) and write no cache themselves: every event,
every LIST's keys, every object that could not be handled and every re-list go to it, and
the informers own the ``consistent`` gate they are handed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metricsched.edges import observe, probes
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers


class RecordingSink:
    """Every call the informers make, in order; no cache behind it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)

        def handle(event_type: str | None, body: Mapping[str, Any]) -> None:
            if name == "on_node" and body.get("raise"):
                raise ValueError("cannot handle it")
            self.calls.append((name, event_type, body["metadata"]["name"]))

        return handle

    def listed(self, kind: str, keys: set[str], *, version: str, started: float) -> int:
        self.calls.append(("listed", kind, sorted(keys), version))
        return 1

    def pending_listed(self, uids: set[str], *, version: str) -> int:
        self.calls.append(("pending_listed", sorted(uids), version))
        return 0

    def skipped(self, kind: str, name: str, reason: str) -> None:
        self.calls.append(("skipped", kind, name, reason))

    def policy_gap(self, reason: str) -> None:
        self.calls.append(("policy_gap", reason))


def _state(sink: RecordingSink, gates: gates_mod.Gates) -> informers.ClusterState:
    return informers.ClusterState(
        api=None,  # type: ignore[arg-type]
        sink=sink,
        gates=gates,
        metrics=observe.Metrics(),
        health=probes.HealthState(),
        resources=tuple(r for r in informers.RESOURCES if r.kind in ("Node", "Pod")),
    )


def test_events_lists_failures_and_relists_go_to_the_sink_and_the_gate() -> None:
    sink, gates = RecordingSink(), gates_mod.Gates()
    state = _state(sink, gates)
    state.event("Node", "LISTED", {"metadata": {"name": "n1"}})
    state.event("Pod", "MODIFIED", {"metadata": {"name": "p1"}})
    state.event("Node", "ADDED", {"metadata": {"name": "bad"}, "raise": True})
    state.listed("Node", {"n1"}, "5", 0.0)
    assert not gates.consistent.is_set()  # Pod not listed yet
    state.listed("Pod", {"p1"}, "5", 0.0)
    assert gates.consistent.is_set()
    state.relisting("Pod")
    assert not gates.consistent.is_set()
    assert sink.calls == [
        ("on_node", "ADDED", "n1"),
        ("on_bound_pod", "MODIFIED", "p1"),
        ("skipped", "Node", "/bad", "ValueError: cannot handle it"),
        ("listed", "Node", ["n1"], "5"),
        ("listed", "Pod", ["p1"], "5"),
        ("policy_gap", "Pod listed again"),
    ]
