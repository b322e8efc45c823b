"""Limits a tenant cannot abuse (issue 32, review findings N9 and N10): candidates only
from the policy's own namespace and install, Job pods only when asked, and a
per-workload limit that a replacement's new name does not reset."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import model, rebalance
from tests.unit.conftest import NOW, build_snapshot
from tests.unit.rebalance.test_plan import (
    HOT_AND_COOL,
    POLICY,
    SPEC,
    moved,
    node_with,
    placed,
    run,
    skipped,
)

# --- whose pods are candidates ---------------------------------------------------------


@pytest.mark.parametrize(
    "stranger",
    [
        {"namespace": "evil"},  # another namespace's pod naming this policy
        {"scheduler_name": "default-scheduler"},  # a forged decision annotation
        {"scheduler_name": "other-install"},  # another install of metricsched
    ],
)
def test_pods_naming_the_policy_from_elsewhere_spend_no_dry_run(stranger):
    forged = dataclasses.replace(placed("forged", "hot"), **stranger)
    snapshot = build_snapshot(node_with("hot", forged), node_with("cool"))
    plan = run(snapshot, HOT_AND_COOL)
    assert (moved(plan), plan.skipped) == ([], ())


# --- Job pods --------------------------------------------------------------------------


def test_job_pods_stay_unless_the_policy_asks_for_them():
    snapshot = build_snapshot(
        node_with("hot", placed("job-1", "hot", owner="Job")), node_with("cool")
    )
    assert skipped(run(snapshot, HOT_AND_COOL)) == {"job-1": rebalance.Skip.JOB}

    asked = dataclasses.replace(POLICY, rebalance=dataclasses.replace(SPEC, evict_job_pods=True))
    assert moved(run(snapshot, HOT_AND_COOL, policy=asked)) == [("job-1", "hot", "cool")]


# --- the per-workload limit ------------------------------------------------------------

LIMITED = dataclasses.replace(
    POLICY, rebalance=dataclasses.replace(SPEC, max_per_workload=1, workload_interval_s=300.0)
)


def revision(name: str, node: str, template: str) -> model.PodInfo:
    """A pod of Deployment ``web``'s ReplicaSet ``web-<template>``."""
    pod = placed(name, node)
    return dataclasses.replace(
        pod,
        owner=f"ReplicaSet/web-{template}",
        labels={**pod.labels, "pod-template-hash": template},
    )


def test_a_workload_moved_within_its_interval_stays_whatever_its_pods_names():
    snapshot = build_snapshot(node_with("hot", revision("web-new", "hot", "b2")), node_with("cool"))
    earlier = rebalance.Eviction(
        pod=model.PodKey("shop/web-old"),
        node=model.NodeName("hot"),
        time=NOW - 299,
        workload="shop/Deployment/web",
    )
    history = (earlier,)
    since = {"hot": NOW - 600}
    plan = run(snapshot, HOT_AND_COOL, policy=LIMITED, history=history, since=since)
    assert skipped(plan) == {"web-new": rebalance.Skip.WORKLOAD_LIMIT}

    later = (dataclasses.replace(earlier, time=NOW - 301),)
    plan = run(snapshot, HOT_AND_COOL, policy=LIMITED, history=later, since=since)
    assert moved(plan) == [("web-new", "hot", "cool")]


def test_one_pass_moves_a_deployment_once_across_its_replica_sets():
    snapshot = build_snapshot(
        node_with("hot-1", revision("web-a", "hot-1", "a1")),
        node_with("hot-2", revision("web-b", "hot-2", "b2")),
        node_with("cool", cpu=64000),
    )
    plan = run(snapshot, {"hot-1": 0.9, "hot-2": 0.8, "cool": 0.1}, policy=LIMITED)
    assert moved(plan) == [("web-a", "hot-1", "cool")]
    assert skipped(plan) == {"web-b": rebalance.Skip.WORKLOAD_LIMIT}


def test_a_refused_eviction_does_not_count_against_the_workload():
    snapshot = build_snapshot(node_with("hot", revision("web-1", "hot", "a1")), node_with("cool"))
    refused = rebalance.Eviction(
        pod=model.PodKey("shop/web-0"),
        node=model.NodeName("elsewhere"),
        time=NOW - 100,
        blocked=True,
        workload="shop/Deployment/web",
    )
    plan = run(snapshot, HOT_AND_COOL, policy=LIMITED, history=(refused,))
    assert moved(plan) == [("web-1", "hot", "cool")]


SCALED = dataclasses.replace(
    POLICY, rebalance=dataclasses.replace(SPEC, max_per_workload=None, workload_interval_s=300.0)
)
THREE_HOT = {"hot-0": 0.9, "hot-1": 0.9, "hot-2": 0.9, "cool": 0.1}


def test_unset_the_workload_limit_scales_with_the_workloads_pods():
    hot = [node_with(f"hot-{i}", revision(f"web-h{i}", f"hot-{i}", "a1")) for i in range(3)]
    # A Deployment of three pods, one on each hot node: one move per workloadInterval.
    plan = run(build_snapshot(*hot, node_with("cool", cpu=64000)), THREE_HOT, policy=SCALED)
    assert len(moved(plan)) == 1
    assert list(skipped(plan).values()) == [rebalance.Skip.WORKLOAD_LIMIT] * 2
    # The same three with 17 more of its pods running on the cool node (20 in all): two.
    rest = [revision(f"web-c{i}", "cool", "a1") for i in range(17)]
    plan = run(build_snapshot(*hot, node_with("cool", *rest, cpu=64000)), THREE_HOT, policy=SCALED)
    assert len(moved(plan)) == 2
    # A count written is the limit whatever the size.
    counted = dataclasses.replace(
        SCALED, rebalance=dataclasses.replace(SCALED.rebalance, max_per_workload=1)
    )
    plan = run(build_snapshot(*hot, node_with("cool", *rest, cpu=64000)), THREE_HOT, policy=counted)
    assert len(moved(plan)) == 1
