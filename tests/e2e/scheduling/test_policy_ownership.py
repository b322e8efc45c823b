"""Two installs never fight over a policy: each serves only the policies whose
spec.schedulerName is one of its scheduler names (default ``metricsched``)."""

from __future__ import annotations

import time

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    GROUP,
    PLURAL,
    REFRESH_S,
    VERSION,
    OperatorProcess,
    apply_policy,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)


def test_another_installs_policy_gets_no_status_and_governs_no_pod_until_it_names_us(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    """Before policies named their install, every install refreshed every policy and
    wrote its status: two installs overwrote each other's conditions and counters."""
    set_and_wait(cluster, metric, {"node-1": 0.4, "node-2": 0.1, "node-3": 0.3, "node-4": 0.4})
    theirs = {
        "schedulerName": "metricsched-elsewhere",
        "podSelector": {"matchLabels": {"app": "web"}},
        "priority": 10,  # would win over "ours" if this install used it
        "metrics": [{**prom_metric(metric), "goal": "Maximize"}],
        "burstPenalty": 0,
    }
    apply_policy(cluster, namespace, "theirs", theirs)
    apply_policy(
        cluster,
        namespace,
        "ours",
        {"podSelector": {"matchLabels": {"app": "web"}}, "metrics": [prom_metric(metric)]},
    )
    wait_policy_refreshed(cluster, namespace, "ours")
    time.sleep(3 * REFRESH_S)  # three refresh rounds in which "theirs" was not ours to serve
    assert "status" not in get_policy(cluster, namespace, "theirs")

    cluster.create_pod(namespace, "web", labels={"app": "web"})
    assert wait_bound(cluster, namespace, "web") == "node-2"  # "ours" (Minimize), not "theirs"
    # The pod's event says why "theirs", which selects it, did not place it.
    [scheduled] = wait_event(cluster, namespace, "web", "Scheduled")
    assert scheduled.startswith(f"Successfully assigned {namespace}/web to node-2 (policy")
    assert scheduled.endswith(
        f" (policy {namespace}/theirs selects this pod but is served by scheduler"
        " metricsched-elsewhere)"
    )

    cluster.custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "theirs", {"spec": {"schedulerName": "metricsched"}}
    )
    wait_for(
        "the policy served once it names this install",
        lambda: "status" in get_policy(cluster, namespace, "theirs"),
        timeout=30,
    )
