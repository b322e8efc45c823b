"""The fault suite's own judges: the audit rule for Bindings and the overcommit count.

These run without a cluster (``make unit``): a checker that cannot fail would make every
fault scenario pass, so its rules are pinned here with hand-made audit lines and objects.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from tests.faults import audit, checker

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
A = "system:serviceaccount:ns:r0"
B = "system:serviceaccount:ns:r1"


def _line(
    at: float,
    user: str,
    resource: str,
    *,
    code: int = 201,
    holder: str | None = None,
    name: str = "p",
) -> dict[str, Any]:
    group_resource, _, sub = resource.partition("/")
    ref: dict[str, Any] = {"resource": group_resource, "namespace": "ns", "name": name}
    if sub:
        ref["subresource"] = sub
    raw: dict[str, Any] = {
        "stage": "ResponseComplete",
        "stageTimestamp": (T0 + datetime.timedelta(seconds=at)).isoformat().replace("+00:00", "Z"),
        "user": {"username": user},
        "verb": "create",
        "objectRef": ref,
        "responseStatus": {"code": code},
    }
    if holder is not None:
        raw["requestObject"] = {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}
    return raw


def _violations(tmp_path: Path, lines: list[dict[str, Any]], **kw: Any) -> list[audit.Violation]:
    (tmp_path / "audit.log").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return audit.non_holder_writes(
        audit.read(tmp_path),
        lease_namespace="ns",
        lease_name="p",
        resource="pods/binding",
        users=frozenset({A, B}),
        **kw,
    )


def test_a_binding_by_the_replica_that_renewed_the_lease_is_legitimate(tmp_path: Path) -> None:
    lines = [_line(0, A, "leases", holder="r0_x", code=200), _line(5, A, "pods/binding", name="a")]
    assert _violations(tmp_path, lines) == []


def test_a_binding_after_another_replica_took_the_lease_is_a_violation(tmp_path: Path) -> None:
    lines = [
        _line(0, A, "leases", holder="r0_x", code=200),
        _line(16, B, "leases", holder="r1_y", code=200),
        _line(17, A, "pods/binding", name="a"),
    ]
    assert [v.entry.name for v in _violations(tmp_path, lines)] == ["a"]


def test_a_binding_after_the_lease_ran_out_is_a_violation_even_with_no_new_holder(
    tmp_path: Path,
) -> None:
    lines = [_line(0, A, "leases", holder="r0_x", code=200), _line(15.5, A, "pods/binding")]
    assert len(_violations(tmp_path, lines)) == 1


def test_a_lease_write_naming_another_holder_does_not_make_the_writer_a_holder(
    tmp_path: Path,
) -> None:
    lines = [_line(0, A, "leases", holder="r1_y", code=200), _line(1, A, "pods/binding")]
    assert len(_violations(tmp_path, lines)) == 1


def test_a_failed_lease_write_does_not_make_a_holder(tmp_path: Path) -> None:
    lines = [
        _line(0, A, "leases", holder="r0_x", code=200),
        _line(1, B, "leases", holder="r1_y", code=409),
        _line(2, B, "pods/binding"),
    ]
    assert len(_violations(tmp_path, lines)) == 1


def test_a_timed_out_binding_of_a_pod_that_ended_bound_counts_as_applied(tmp_path: Path) -> None:
    lines = [
        _line(0, A, "leases", holder="r0_x", code=200),
        _line(16, B, "leases", holder="r1_y", code=200),
        _line(20, A, "pods/binding", code=504, name="a"),
    ]
    assert len(_violations(tmp_path, lines, bound=frozenset({"a"}))) == 1
    assert _violations(tmp_path, lines) == []


def _node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "1Gi", "pods": "10"}
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


def _pod(node: str, cpu: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": phase},
    }


def test_a_node_whose_bound_pods_request_more_than_it_allocates_is_overcommitted() -> None:
    over = checker.overcommitted([_node("n", "1")], [_pod("n", "600m"), _pod("n", "0.5")])
    assert [(o.node, o.resource) for o in over] == [("n", "cpu")]


def test_a_full_node_and_finished_pods_are_not_overcommitted() -> None:
    pods = [_pod("n", "500m"), _pod("n", "500m"), _pod("n", "2", phase="Succeeded")]
    assert checker.overcommitted([_node("n", "1000m")], pods) == []


def test_a_pod_bound_to_a_node_that_does_not_exist_is_lost() -> None:
    pods = [{"metadata": {"name": "a"}, "spec": {"nodeName": "gone"}}]
    lost = checker.lost_pods(
        pods, created=["a"], deleted=set(), unschedulable=set(), node_names={"n"}
    )
    assert lost == ["a: bound to gone, which does not exist"]
