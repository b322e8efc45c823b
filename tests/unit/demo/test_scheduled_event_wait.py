"""hack/demo.py shows a pod's describe only once its Scheduled event exists.

The demo's kubectl is replaced by a stand-in that answers the events API as the API server
would while the scheduler's Event is still on its way: empty lists first, then the event.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DEMO = Path(__file__).resolve().parents[3] / "hack" / "demo.py"


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # hack/demo.py imports hack/kwok_node.py by its name beside it (hack/ is not a package)
    monkeypatch.setitem(sys.modules, "kwok_node", importlib.import_module("hack.kwok_node"))
    spec = importlib.util.spec_from_file_location("metricsched_demo", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module.time, "sleep", lambda _: None)
    return module


def events_api(
    monkeypatch: pytest.MonkeyPatch, demo: ModuleType, answers: list[list[Any]]
) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []

    def kubectl(*args: str, check: bool = True, stdin: str | None = None) -> str:
        calls.append(args)
        items = answers.pop(0) if len(answers) > 1 else answers[0]
        return json.dumps({"items": items})

    monkeypatch.setattr(demo, "kubectl", kubectl)
    return calls


def test_the_describe_waits_until_the_scheduled_event_is_written(
    demo: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    event = {
        "reason": "Scheduled",
        "message": "Successfully assigned metricsched-demo/web-1 to node-3",
    }
    calls = events_api(monkeypatch, demo, [[], [], [event]])
    assert demo.scheduled_event("web-1") == event
    assert len(calls) == 3
    for args in calls:
        assert args[:4] == ("get", "events", "-n", demo.NS)
        selector = args[args.index("--field-selector") + 1]
        assert set(selector.split(",")) == {
            "involvedObject.kind=Pod",
            "involvedObject.name=web-1",
            "reason=Scheduled",
        }


def test_a_scheduled_event_that_never_comes_ends_the_demo_at_the_bound(
    demo: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    events_api(monkeypatch, demo, [[]])
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(demo.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(SystemExit, match="the Scheduled event of web-1"):
        demo.scheduled_event("web-1", timeout=30)
