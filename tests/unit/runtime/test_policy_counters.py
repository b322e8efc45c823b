"""A deleted policy's counters go with it: a policy created again under the same name
starts at zero (issue 24, finding 12: ``scheduler.counters`` was never forgotten)."""

from __future__ import annotations

from typing import Any

from metricsched.core import model
from metricsched.runtime import operator as operator_mod
from metricsched.runtime import status as status_mod

KEY = model.PolicyKey("shop/web")


def _policy(uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "web", "namespace": "shop", "uid": uid, "generation": 1},
        "spec": {
            "metrics": [{"name": "price", "nodeAnnotation": "example.com/price", "weight": 1}]
        },
    }


def _counters(op: operator_mod.Operator) -> status_mod.Counters:
    return op.status.counters_of(KEY, op.status.records[KEY])


def _schedule_some(op: operator_mod.Operator) -> None:
    counters = op.scheduler.counters[KEY]
    counters.scheduled, counters.fallback = 7, 2
    assert _counters(op) == status_mod.Counters(scheduled=7, fallback=2)


def test_a_policy_created_again_after_its_deletion_starts_at_zero(
    op: operator_mod.Operator,
) -> None:
    op.ingest.on_policy("ADDED", _policy("uid-1"))
    _schedule_some(op)
    op.ingest.on_policy("DELETED", _policy("uid-1"))
    op.ingest.on_policy("ADDED", _policy("uid-2"))
    assert _counters(op) == status_mod.Counters()
    assert KEY not in op.scheduler.counters


def test_a_policy_created_again_while_its_deletion_went_unseen_starts_at_zero(
    op: operator_mod.Operator,
) -> None:
    op.ingest.on_policy("ADDED", _policy("uid-1"))
    _schedule_some(op)
    op.ingest.on_policy("ADDED", _policy("uid-2"))  # a watch gap hid the deletion
    assert _counters(op) == status_mod.Counters()


def test_an_update_of_the_same_policy_keeps_its_counters(op: operator_mod.Operator) -> None:
    op.ingest.on_policy("ADDED", _policy("uid-1"))
    _schedule_some(op)
    op.ingest.on_policy(
        "MODIFIED",
        {**_policy("uid-1"), "metadata": {**_policy("uid-1")["metadata"], "generation": 2}},
    )
    assert _counters(op) == status_mod.Counters(scheduled=7, fallback=2)
