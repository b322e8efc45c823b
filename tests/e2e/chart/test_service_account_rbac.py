"""The chart's RBAC is enough for the operator and no more.

The operator runs locally with nothing but a TokenRequest token of the chart's
ServiceAccount, and schedules, reports and leads as it would in the cluster; then
``kubectl auth can-i`` shows what that account may not do.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.chart.conftest import Release, ServiceAccountOperator
from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    apply_policy,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_event,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.conftest import condition as condition_of


def test_the_operator_schedules_end_to_end_as_the_chart_service_account(
    cluster: Cluster, sa_operator: ServiceAccountOperator, namespace: str, metric: str
) -> None:
    scheduler = sa_operator.scheduler_name
    set_and_wait(cluster, metric, {"node-1": 0.4, "node-2": 0.1, "node-3": 0.3, "node-4": 0.2})
    apply_policy(
        cluster, namespace, "lat", {"schedulerName": scheduler, "metrics": [prom_metric(metric)]}
    )
    ready = wait_policy_refreshed(cluster, namespace, "lat")
    assert condition_of(ready, "Ready")["status"] == "True"

    # pods/binding create, events create: a pod placed by the metric, and its event.
    cluster.create_pod(namespace, "web", scheduler=scheduler)
    assert wait_bound(cluster, namespace, "web") == "node-2"
    (scheduled,) = wait_event(cluster, namespace, "web", "Scheduled")
    assert f"policy {namespace}/lat" in scheduled

    # pods/status patch: a pod that fits nowhere gets PodScheduled=False/Unschedulable.
    cluster.create_pod(namespace, "huge", scheduler=scheduler, cpu="1000")
    wait_event(cluster, namespace, "huge", "FailedScheduling")
    condition = wait_for(
        "PodScheduled=False on the unschedulable pod",
        lambda: [
            c
            for c in (cluster.pod(namespace, "huge").get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
    )
    assert condition[0]["reason"] == "Unschedulable"

    # schedulingpolicies/status patch: the policy's status and counters.
    policy = wait_for(
        "policy status written",
        lambda: (
            (p := get_policy(cluster, namespace, "lat")).get("status", {}).get("scheduledPods")
            and p
        ),
    )
    assert policy["status"]["scheduledPods"] == 1

    # leases create/get/update in the release namespace: this process leads.
    lease = cluster.coordination.read_namespaced_lease(
        sa_operator.release.fullname, sa_operator.release.namespace
    )
    assert lease.spec.holder_identity

    sa_operator.stop()
    log = sa_operator.log_text()
    denied = [
        line
        for line in log.splitlines()
        if "forbidden" in line.lower() or '"code": 403' in line or "status=403" in line
    ]
    assert denied == []
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    placed = [r for r in records if r.get("pod") == f"{namespace}/web" and r.get("node")]
    assert placed and placed[0]["node"] == "node-2"


# (verb, resource, namespace or None for all namespaces): `{ns}` is the release namespace,
# `{lease}` its Lease; `resource:sub` names a subresource, `resource/name` one object.
ALLOWED = [
    ("list", "nodes", None),
    ("watch", "nodes", None),
    ("list", "namespaces", None),
    ("watch", "namespaces", None),
    ("watch", "persistentvolumeclaims", None),
    ("list", "persistentvolumes", None),
    ("watch", "pods", None),
    ("get", "pods", None),
    ("create", "pods:binding", None),
    ("patch", "pods:status", None),
    ("create", "events", None),
    ("patch", "events", None),
    ("list", "schedulingpolicies.metricsched.io", None),
    ("patch", "schedulingpolicies.metricsched.io:status", None),
    ("create", "leases.coordination.k8s.io", "{ns}"),
    ("update", "leases.coordination.k8s.io/{lease}", "{ns}"),
    # Secure /metrics (on by default): who scrapes, and may they.
    ("create", "tokenreviews.authentication.k8s.io", None),
    ("create", "subjectaccessreviews.authorization.k8s.io", None),
]
DENIED = [
    ("delete", "pods", None),
    ("create", "pods", None),
    ("update", "pods", None),
    ("create", "pods:eviction", None),
    ("create", "pods:exec", None),
    ("update", "pods:status", None),
    ("get", "secrets", None),
    ("get", "secrets", "{ns}"),
    ("list", "secrets", "{ns}"),
    ("create", "deployments.apps", None),
    ("create", "deployments.apps", "{ns}"),
    ("patch", "nodes", None),
    ("delete", "nodes", None),
    ("update", "schedulingpolicies.metricsched.io", None),
    ("delete", "schedulingpolicies.metricsched.io", None),
    ("delete", "events", None),
    ("get", "configmaps", None),
    ("create", "serviceaccounts:token", "{ns}"),
    ("delete", "customresourcedefinitions.apiextensions.k8s.io", None),
    ("update", "namespaces", None),
    ("patch", "persistentvolumeclaims", None),
    ("delete", "persistentvolumes", None),
    ("delete", "namespaces", None),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
    ("update", "leases.coordination.k8s.io/another-lease", "{ns}"),
    ("create", "leases.coordination.k8s.io", "kube-system"),
    ("delete", "leases.coordination.k8s.io/{lease}", "{ns}"),
]


def _fill(release: Release, resource: str, namespace: str | None) -> tuple[str, str | None]:
    ns = namespace.format(ns=release.namespace) if namespace else None
    return resource.format(lease=release.fullname), ns


@pytest.mark.parametrize(("verb", "resource", "namespace"), ALLOWED)
def test_the_service_account_can_do_what_scheduling_needs(
    ha_release: Release, verb: str, resource: str, namespace: str | None
) -> None:
    resource, ns = _fill(ha_release, resource, namespace)
    assert ha_release.can_i(verb, resource, namespace=ns)


@pytest.mark.parametrize(("verb", "resource", "namespace"), DENIED)
def test_the_service_account_cannot_do_what_it_has_no_business_with(
    ha_release: Release, verb: str, resource: str, namespace: str | None
) -> None:
    resource, ns = _fill(ha_release, resource, namespace)
    assert not ha_release.can_i(verb, resource, namespace=ns)
