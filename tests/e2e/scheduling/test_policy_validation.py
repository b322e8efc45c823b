"""Bad policies: the API server rejects what the schema can check; the operator reports the rest."""

from __future__ import annotations

from tests.e2e.conftest import Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    api_error,
    apply_policy,
    condition,
    get_policy,
    prom_metric,
    set_and_wait,
    wait_bound,
    wait_policy_refreshed,
)


def test_invalid_promql_is_accepted_but_not_ready_while_other_policies_work(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metric: str
) -> None:
    set_and_wait(cluster, metric, {"node-1": 0.4, "node-2": 0.1, "node-3": 0.3, "node-4": 0.4})
    bad = {"name": "broken", "prometheus": {"query": "sum(rate(oops[", "nodeLabel": "node"}}
    apply_policy(
        cluster,
        namespace,
        "bad",
        {"podSelector": {"matchLabels": {"app": "bad"}}, "metrics": [bad]},
    )
    apply_policy(
        cluster,
        namespace,
        "good",
        {
            "podSelector": {"matchLabels": {"app": "good"}},
            "metrics": [prom_metric(metric)],
            "burstPenalty": 0,
        },
    )
    policy = wait_for(
        "bad policy Ready=False",
        lambda: (
            (p := get_policy(cluster, namespace, "bad"))
            and condition(p, "Ready").get("status") == "False"
            and p
        ),
    )
    ready = condition(policy, "Ready")
    assert ready["reason"] == "BadQuery"
    assert "broken" in ready["message"]
    assert "parse error" in policy["status"]["metrics"][0]["lastError"]
    wait_for(
        "MetricQueryFailed event on the bad policy",
        lambda: [
            e for e in cluster.events_for(namespace, "bad") if e["reason"] == "MetricQueryFailed"
        ],
    )

    wait_policy_refreshed(cluster, namespace, "good")
    assert condition(get_policy(cluster, namespace, "good"), "Ready")["status"] == "True"
    cluster.create_pod(namespace, "good-pod", labels={"app": "good"})
    assert wait_bound(cluster, namespace, "good-pod") == "node-2"


def test_schema_invalid_policy_is_rejected_with_a_readable_message(
    cluster: Cluster, crd: None, namespace: str
) -> None:
    cases = {
        "weight": ({"name": "a", "nodeAnnotation": "x/y", "weight": 0}, "weight"),
        "goal": ({"name": "a", "nodeAnnotation": "x/y", "goal": "Smallest"}, "goal"),
        "two sources": (
            {
                "name": "a",
                "nodeAnnotation": "x/y",
                "prometheus": {"query": "up", "nodeLabel": "node"},
            },
            "exactly one",
        ),
        "metricsServer beside another source": (
            {"name": "a", "nodeAnnotation": "x/y", "metricsServer": {"resource": "cpu"}},
            "not several",
        ),
        "no source": (
            {"name": "a", "weight": 1},
            "set prometheus, nodeAnnotation or metricsServer",
        ),
        "metricsServer of another resource": (
            {"name": "a", "metricsServer": {"resource": "gpu"}},
            "Unsupported value",
        ),
        "estimate on an annotation": (
            {"name": "a", "nodeAnnotation": "x/y", "estimate": {"from": "Learned"}},
            "prometheus and metricsServer metrics only",
        ),
        "min above max": (
            {"name": "a", "nodeAnnotation": "x/y", "threshold": {"min": 5, "max": 1}},
            "min",
        ),
        "zero range": ({"name": "a", "nodeAnnotation": "x/y", "range": 0}, "range must be more"),
        "negative tolerance": (
            {"name": "a", "nodeAnnotation": "x/y", "tolerance": -1},
            "tolerance",
        ),
        "tolerance over 100%": (
            {"name": "a", "nodeAnnotation": "x/y", "tolerancePercent": 101},
            "tolerancePercent",
        ),
    }
    for case, (metric, needle) in cases.items():
        err = api_error(lambda m=metric: apply_policy(cluster, namespace, "bad", {"metrics": [m]}))
        assert err.status == 422, (case, err.status)
        assert needle in str(err.body), (case, err.body)
    err = api_error(
        lambda: apply_policy(
            cluster,
            namespace,
            "dup",
            {
                "metrics": [
                    {"name": "a", "nodeAnnotation": "x/y"},
                    {"name": "a", "nodeAnnotation": "x/z"},
                ]
            },
        )
    )
    assert err.status == 422 and "Duplicate value" in str(err.body), err.body
    err = api_error(lambda: apply_policy(cluster, namespace, "none", {"metrics": []}))
    assert err.status == 422 and "metrics" in str(err.body), err.body


def test_max_per_workload_takes_a_count_or_a_percentage_and_nothing_else(
    cluster: Cluster, crd: None, namespace: str
) -> None:
    def spec(limit: object) -> dict[str, object]:
        rebalance = {"trigger": {"metric": "a", "above": 1}, "maxPerWorkload": limit}
        return {"metrics": [{"name": "a", "nodeAnnotation": "x/y"}], "rebalance": rebalance}

    for name, limit in (("count", 3), ("share", "10%"), ("none", "0%")):
        apply_policy(cluster, namespace, name, spec(limit))
        stored = get_policy(cluster, namespace, name)["spec"]["rebalance"]["maxPerWorkload"]
        assert stored == limit, (name, stored)
    for limit, needle in (("101%", "should match"), ("10", "should match"), (-1, "greater")):
        err = api_error(lambda limit=limit: apply_policy(cluster, namespace, "bad", spec(limit)))
        assert err.status == 422 and needle in str(err.body), (limit, err.body)
