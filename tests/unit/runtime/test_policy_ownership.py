"""A policy is served by the install whose scheduler names include its spec.schedulerName;
every other install ignores it: no cache entry, no refresh, no status, no events."""

from __future__ import annotations

from typing import Any

import pytest

from metricsched.core import model, policy_defaults, policy_installs
from metricsched.core import policy as policy_mod
from tests.unit.runtime.test_watches_and_relist import _watches

KEY = model.PolicyKey("shop/latency")


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "latency",
            "namespace": "shop",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "metrics": [{"name": "m", "prometheus": {"query": "up"}}],
            **spec,
        },
    }


def test_a_policy_without_a_scheduler_name_belongs_to_the_default_install():
    parsed = policy_mod.policy_from_body(_policy())
    assert parsed.scheduler_name == policy_defaults.DEFAULT_SCHEDULER_NAME == "metricsched"
    assert policy_installs.served_by(_policy(), frozenset({"metricsched"}))
    assert not policy_installs.served_by(_policy(), frozenset({"metricsched-gpu"}))


def test_a_policy_names_the_install_that_serves_it():
    body = _policy(schedulerName="metricsched-gpu")
    assert policy_mod.policy_from_body(body).scheduler_name == "metricsched-gpu"
    assert policy_installs.served_by(body, frozenset({"a", "metricsched-gpu"}))
    assert not policy_installs.served_by(body, frozenset({"metricsched"}))


@pytest.mark.parametrize("bad", ["", "x" * 254, 7])
def test_a_malformed_scheduler_name_is_a_policy_error(bad: object):
    with pytest.raises(policy_mod.PolicyError, match=r"spec\.schedulerName"):
        policy_mod.policy_from_body(_policy(schedulerName=bad))


def test_the_install_ignores_another_installs_policy():
    watches = _watches()  # serves the default scheduler name, metricsched
    watches.on_policy("ADDED", _policy(schedulerName="metricsched-gpu"))
    assert KEY not in watches.cache.policies
    assert KEY not in watches.policies.status.records  # never a status write for it
    assert KEY not in watches.cache.policy_errors


def test_an_invalid_policy_of_another_install_is_not_reported_here():
    watches = _watches()
    watches.on_policy("ADDED", _policy(schedulerName="other", maxMetricAge="soon"))
    assert KEY not in watches.cache.policy_errors
    assert KEY not in watches.policies.status.records


def test_a_policy_moved_to_another_install_is_forgotten_and_one_moved_here_is_served():
    watches = _watches()
    watches.on_policy("ADDED", _policy())
    assert KEY in watches.cache.policies and KEY in watches.policies.status.records
    watches.on_policy("MODIFIED", _policy(schedulerName="metricsched-gpu"))
    assert KEY not in watches.cache.policies
    assert KEY not in watches.policies.status.records
    watches.on_policy("MODIFIED", _policy(schedulerName="metricsched"))
    assert watches.cache.policies[KEY].scheduler_name == "metricsched"


def test_another_installs_policy_is_kept_only_in_the_light_index_that_events_name():
    watches = _watches()
    watches.on_policy("ADDED", _policy(schedulerName="metricsched-gpu", podSelector={}))
    [entry] = watches.cache.elsewhere_in("shop")
    assert (entry.key, entry.scheduler_name, entry.active) == (KEY, "metricsched-gpu", True)
    assert watches.cache.elsewhere_in("other") == []
    # Moved here: served, and out of the index; moved away again: back in it; deleted: gone.
    watches.on_policy("MODIFIED", _policy(schedulerName="metricsched"))
    assert watches.cache.elsewhere_in("shop") == []
    assert KEY in watches.cache.policies
    watches.on_policy("MODIFIED", _policy(schedulerName="metricsched-gpu"))
    assert [e.key for e in watches.cache.elsewhere_in("shop")] == [KEY]
    watches.on_policy("DELETED", _policy(schedulerName="metricsched-gpu"))
    assert watches.cache.elsewhere_in("shop") == []
    assert watches.cache.elsewhere == {}
