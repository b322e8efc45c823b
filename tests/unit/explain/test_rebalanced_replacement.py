"""explain on a pod that replaces one rebalancing evicted: which, when and why."""

from __future__ import annotations

import dataclasses

from metricsched.core import explain
from tests.unit.conftest import NOW, build_pod_info

MESSAGE = (
    "evicted shop/web-1 of ReplicaSet/web-7d4 from hot (policy shop/web-latency: latency "
    "0.9 above 0.5 for 5m); dry run placed it on cool (latency 0.1, score 100)"
)


def event(message: str = MESSAGE, *, at: str = "2023-11-14T22:13:15Z", reason: str = "Rebalanced"):
    return {"reason": reason, "message": message, "lastTimestamp": at}


def replacement(owner: str = "ReplicaSet/web-7d4"):
    # NOW is 2023-11-14T22:13:20Z
    return dataclasses.replace(build_pod_info("web-2"), owner=owner, creation_timestamp=NOW)


def test_the_latest_rebalanced_event_of_the_pods_controller_is_shown():
    older = event(MESSAGE.replace("web-1", "web-0"), at="2023-11-14T22:12:00Z")
    note = explain.rebalanced_note(replacement(), [older, event()])
    assert note == (
        "note: shop/web-2 replaces a pod that rebalancing moved at 2023-11-14T22:13:15Z: " + MESSAGE
    )


def test_events_of_other_controllers_other_reasons_or_long_before_are_not_shown():
    assert explain.rebalanced_note(replacement("ReplicaSet/api-1"), [event()]) is None
    assert explain.rebalanced_note(replacement(), [event(reason="WouldRebalance")]) is None
    assert explain.rebalanced_note(replacement(), [event(at="2023-11-14T22:00:00Z")]) is None
    assert explain.rebalanced_note(replacement(""), [event()]) is None
