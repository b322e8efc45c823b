"""Fixtures of the fault suite: the local control plane, the CRD, one Scenario per test.

Every test under tests/faults is marked ``faults``. The cluster fixture is the e2e one
(it starts the control plane on demand, with the audit log this suite reads).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Cluster, cluster
from tests.e2e.scheduling.conftest import crd
from tests.faults import harness

__all__ = ["cluster", "crd"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/faults/" in str(item.fspath):
            item.add_marker(pytest.mark.faults)


ScenarioFactory = Callable[[str, str], harness.Scenario]


@pytest.fixture
def scenario(cluster: Cluster, crd: None) -> Iterator[ScenarioFactory]:
    """scenario(key, title): a fresh namespace, nodes and replicas, torn down afterwards."""
    if not (harness.STATE / "audit" / "audit.log").exists():
        pytest.fail(
            "kube-apiserver writes no audit log: the running cluster predates it; "
            "`make cluster-down` and run again (the suite starts a new one)"
        )
    made: list[harness.Scenario] = []

    namespaces: list[str] = []

    def make(key: str, title: str) -> harness.Scenario:
        ns = f"f-{key}-{uuid.uuid4().hex[:5]}"
        namespaces.append(ns)
        core: Any = cluster.core
        harness.retry(lambda: core.create_namespace({"metadata": {"name": ns}}))
        # Pods need the "default" ServiceAccount (admission). The controller manager makes
        # it, but after a kube-apiserver kill it can take a while to resync: make it here.
        harness.retry(
            lambda: core.create_namespaced_service_account(ns, {"metadata": {"name": "default"}})
        )
        s = harness.Scenario(cluster, ns, key=key, title=title)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
    for ns in namespaces[len(made) :]:  # a scenario that failed while being set up
        with contextlib.suppress(Exception):
            cluster.core.delete_namespace(ns)
