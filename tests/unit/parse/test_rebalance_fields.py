"""PodInfo fields read by rebalancing: the controller's kind and the placing policy."""

from __future__ import annotations

import pytest

from metricsched.core import parse


def test_the_controllers_kind_is_kept_whatever_it_is(pod_body):
    job = pod_body()
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u0"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u2", "controller": True},
    ]
    assert parse.pod_from_body(job).owner == "Job/j"
    assert parse.pod_from_body(job).owner_kind == "Job"
    assert parse.pod_from_body(pod_body()).owner_kind == ""


def test_the_policy_named_by_the_decision_record_is_kept(pod_body):
    body = pod_body(node_name="node-1")
    body["metadata"]["annotations"] = {
        "metricsched.io/decision": '{"v":1,"policy":"shop/web-latency","node":"node-1",'
        '"score":90,"metrics":{},"runnerUp":null,"fallback":null,"time":"2026-11-23T05:00:00Z"}'
    }
    assert parse.pod_from_body(body).placed_by == "shop/web-latency"


@pytest.mark.parametrize(
    "annotation",
    [
        None,
        "",
        "not json",
        '{"v":1,"policy":null}',  # the operator's default policy
        '{"v":2,"policy":"shop/web"}',
        '["shop/web"]',
    ],
)
def test_pods_without_a_readable_record_of_a_policy_have_none(pod_body, annotation):
    body = pod_body(node_name="node-1")
    if annotation is not None:
        body["metadata"]["annotations"] = {"metricsched.io/decision": annotation}
    assert parse.pod_from_body(body).placed_by == ""
