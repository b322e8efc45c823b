"""A policy's lifecycle has one owner (``runtime.policies``, issue 33): forgetting a
policy (deleted, moved to another install, created again under its name, a ghost after a
re-list) reaches every party that keeps state for it, once and at once, and a late
deletion of an older object of the name forgets nothing of the newer one."""

from __future__ import annotations

import argparse
import asyncio
import collections
from typing import Any

import pytest

from metricsched import config as config_mod
from metricsched.core import model
from metricsched.edges import observe, query_rounds
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import operator as operator_mod
from metricsched.runtime import policies as policies_mod
from metricsched.runtime import rebalancer as rebalancer_mod
from metricsched.runtime import status as status_mod

from . import test_policy_gaps as gaps

KEY = model.PolicyKey("shop/web")


def _policy(
    *, uid: str = "uid-1", rv: str = "10", scheduler: str = "metricsched", valid: bool = True
) -> dict[str, Any]:
    metric: dict[str, Any] = {"name": "price", "nodeAnnotation": "example.com/price"}
    if not valid:
        metric["weight"] = -1
    return {
        "apiVersion": "metricsched.io/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": uid,
            "resourceVersion": rv,
            "generation": 1,
        },
        "spec": {"schedulerName": scheduler, "metrics": [metric]},
    }


def _config() -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args([]), {})


def owner(
    cache: cache_mod.ClusterCache,
    status: status_mod.PolicyStatus,
    *,
    forget: tuple[policies_mod.Forget, ...] = (),
) -> policies_mod.Policies:
    """The policies' owner of the default configuration on ``cache`` and ``status``."""
    return policies_mod.Policies(
        config=_config(),
        cache=cache,
        status=status,
        signals=policies_mod.Signals(record=lambda *a, **kw: None, refresh_now=asyncio.Event()),
        forget=forget,
    )


class Rig:
    """The owner on a real cache and status record, with two recording parties."""

    def __init__(self) -> None:
        self.cache = cache_mod.ClusterCache()
        self.told: dict[str, list[model.PolicyKey]] = collections.defaultdict(list)
        status = status_mod.PolicyStatus(
            api=None,  # type: ignore[arg-type]
            policies=lambda: self.cache.policies,
            nodes=self.cache.nodes,
            counters=lambda key: (0, 0),
            metrics=observe.Metrics(),
            gates=gates_mod.Gates(),
            interval_s=15.0,
        )
        forget = (self.told["scheduler"].append, self.told["shadow"].append)
        self.policies = owner(self.cache, status, forget=forget)

    def told_of(self) -> dict[str, list[model.PolicyKey]]:
        return dict(self.told)


@pytest.fixture
def rig() -> Rig:
    return Rig()


class TestForgettingReachesEveryPartyOnce:
    def test_a_deleted_policy_is_forgotten_by_every_registered_party_once(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy())
        assert KEY in rig.cache.policies and KEY in rig.policies.status.records
        rig.policies.on_event("DELETED", _policy(rv="20"))
        assert rig.told_of() == {"scheduler": [KEY], "shadow": [KEY]}
        assert KEY not in rig.cache.policies and KEY not in rig.policies.status.records

    def test_a_policy_moved_to_another_install_is_forgotten_the_same_way(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy())
        rig.policies.on_event("MODIFIED", _policy(rv="20", scheduler="metricsched-gpu"))
        assert rig.told_of() == {"scheduler": [KEY], "shadow": [KEY]}
        assert KEY not in rig.cache.policies and KEY not in rig.policies.status.records
        assert [e.key for e in rig.cache.elsewhere_in("shop")] == [KEY]

    def test_a_rejected_policy_is_forgotten_from_the_index_the_same_way(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy(valid=False))
        assert KEY in rig.cache.policy_errors
        assert rig.policies.status.records[KEY].invalid
        rig.policies.on_event("DELETED", _policy(rv="20"))
        assert rig.told_of() == {"scheduler": [KEY], "shadow": [KEY]}
        assert KEY not in rig.cache.policy_errors and KEY not in rig.policies.status.records

    def test_a_policy_seen_with_a_new_uid_is_forgotten_once_and_the_new_one_kept(
        self, rig: Rig
    ) -> None:
        rig.policies.on_event("ADDED", _policy())
        rig.policies.on_event("ADDED", _policy(uid="uid-2", rv="30"))  # the deletion unseen
        assert rig.told_of() == {"scheduler": [KEY], "shadow": [KEY]}
        assert KEY in rig.cache.policies
        assert rig.policies.status.records[KEY].uid == "uid-2"


class TestALateDeletionOfTheOldObject:
    def test_does_not_forget_the_policy_created_again_under_its_name(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy())
        rig.policies.on_event("ADDED", _policy(uid="uid-2", rv="30"))
        rig.policies.on_event("DELETED", _policy(uid="uid-1", rv="25"))  # late
        assert KEY in rig.cache.policies
        assert rig.policies.status.records[KEY].uid == "uid-2"
        assert rig.told_of() == {"scheduler": [KEY], "shadow": [KEY]}  # the uid change only
        rig.policies.on_event("MODIFIED", _policy(uid="uid-2", rv="35"))  # still applies
        rig.policies.on_event("DELETED", _policy(uid="uid-2", rv="40"))
        assert KEY not in rig.cache.policies
        assert rig.told_of() == {"scheduler": [KEY, KEY], "shadow": [KEY, KEY]}


class TestGhostsAfterARelist:
    def test_a_policy_the_list_no_longer_has_is_forgotten_by_every_party_once(self) -> None:
        told: list[model.PolicyKey] = []
        w = gaps._watches(forget=(told.append,))
        w.on_policy("ADDED", gaps._policy("web", "10"))
        w.on_policy("ADDED", gaps._policy("kept", "11"))
        asyncio.run(gaps._reconciler(w, gaps.PolicyListApi([gaps._policy("kept", "11")])).once())
        assert told == [KEY]
        assert sorted(w.cache.policies) == ["shop/kept"]
        assert sorted(w.policies.status.records) == ["shop/kept"]


def test_the_operator_registers_every_party_that_keeps_per_policy_state(
    op: operator_mod.Operator,
) -> None:
    """Deleted: the scheduler's counters, the rebalancer's and the shadow's state go at
    once, not at their next pass."""
    op.on_policy("ADDED", _policy())
    op.scheduler.counters[KEY].scheduled = 3
    op.rebalancer.states[KEY] = rebalancer_mod.PolicyState()
    op.shadow._record(KEY)
    op.on_policy("DELETED", _policy(rv="20"))
    assert KEY not in op.scheduler.counters
    assert KEY not in op.rebalancer.states
    assert KEY not in op.shadow.policies
    assert KEY not in op.status.records and KEY not in op.cache.policies


def _result(*, error: model.QueryErrorKind | None = None) -> query_rounds.RefreshResult:
    return query_rounds.RefreshResult(
        policy=KEY,
        metric="price",
        nodes_reporting=0 if error else 3,
        nodes_missing=0,
        error=error,
        error_message="down" if error else "",
        duration_s=0.1,
        series_unknown_node=0,
        series_duplicate=0,
        queried=True,
        finished_at=1.0,
    )


class TestTheStatusRecordKeepsEachRefreshResult:
    def test_with_the_metrics_health_before_it(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy())
        failed = _result(error=model.QueryErrorKind.UNREACHABLE)
        assert rig.policies.refreshed(failed) == policies_mod.Refreshed(was_ok=None)
        record = rig.policies.status.records[KEY]
        assert record.metrics["price"] == failed and record.health["price"].ok is False
        assert rig.policies.refreshed(_result()) == policies_mod.Refreshed(was_ok=False)
        assert record.health["price"].ok is True

    def test_not_for_a_policy_forgotten_meanwhile(self, rig: Rig) -> None:
        rig.policies.on_event("ADDED", _policy())
        rig.policies.on_event("DELETED", _policy(rv="20"))
        assert rig.policies.refreshed(_result()) is None
        assert KEY not in rig.policies.status.records
