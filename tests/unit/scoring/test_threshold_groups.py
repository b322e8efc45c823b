"""A threshold per node group: the first override whose selector matches a node applies
there, in the filter, its reasons and the FailedScheduling message."""

from __future__ import annotations

import dataclasses

import numpy as np

from metricsched.core import columns, framework, model
from metricsched.core.plugins import metric_threshold


def pool(name: str, value: str) -> model.ThresholdOverride:
    return model.ThresholdOverride(
        node_selector=model.LabelSelector(match_labels={name: value}, match_expressions=()),
        threshold_min=None,
        threshold_max=None,
    )


def gpu_pool_cpu(make_metric, *overrides: tuple[model.ThresholdOverride, float]):
    """cpu with max 0.8, and each override given its own max."""
    return dataclasses.replace(
        make_metric("cpu", threshold_max=0.8),
        threshold_overrides=tuple(
            dataclasses.replace(override, threshold_max=high) for override, high in overrides
        ),
    )


def test_a_node_of_an_overridden_group_meets_its_groups_bound(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[gpu_pool_cpu(make_metric, (pool("pool", "gpu"), 0.9))])
    cluster = make_cluster(make_node("general-1"), make_node("gpu-1", labels={"pool": "gpu"}))
    view = make_view(policy, {"cpu": {"general-1": 0.85, "gpu-1": 0.85}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.BIND
    assert decision.node == "gpu-1"
    verdicts = {verdict.node: verdict for verdict in decision.verdicts}
    assert verdicts["general-1"].reason == "node(s) exceeded threshold cpu > 0.8"


def test_the_failed_scheduling_message_names_the_bound_that_applied_on_each_node(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    policy = make_policy(metrics=[gpu_pool_cpu(make_metric, (pool("pool", "gpu"), 0.9))])
    cluster = make_cluster(
        make_node("general-1"),
        make_node("general-2"),
        make_node("gpu-1", labels={"pool": "gpu"}),
    )
    view = make_view(policy, {"cpu": {"general-1": 0.85, "general-2": 0.9, "gpu-1": 0.95}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "2 node(s) exceeded threshold cpu > 0.8" in decision.message
    assert "1 node(s) exceeded threshold cpu > 0.9" in decision.message


def test_the_first_matching_override_wins(
    *, make_node, make_cluster, make_pod, make_metric, make_policy, make_view, schedule
):
    metric = gpu_pool_cpu(make_metric, (pool("pool", "gpu"), 0.9), (pool("size", "xl"), 0.95))
    policy = make_policy(metrics=[metric])
    cluster = make_cluster(make_node("gpu-xl", labels={"pool": "gpu", "size": "xl"}))
    view = make_view(policy, {"cpu": {"gpu-xl": 0.92}})

    decision = schedule(pod=make_pod(), snapshot=cluster, policies=[policy], metrics=view)

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "1 node(s) exceeded threshold cpu > 0.9" in decision.message


def test_an_override_of_a_min_names_its_own_bound(*, make_node, make_metric, make_policy):
    metric = dataclasses.replace(
        make_metric("free-gpu", threshold_min=2),
        threshold_overrides=(dataclasses.replace(pool("pool", "big"), threshold_min=4),),
    )
    policy = make_policy(metrics=[metric])
    table = columns.NodeTable.build([make_node("small"), make_node("big", labels={"pool": "big"})])
    bounds = metric_threshold.row_bounds(metric=metric, table=table, memo=framework.Memo())

    result = metric_threshold.threshold_filter(
        policy=policy, values=[np.array([3.0, 3.0])], bounds=[bounds]
    )

    big, small = table.rows["big"], table.rows["small"]
    assert result.passed[small] and not result.passed[big]
    assert result.reasons == {big: ("node(s) fell below threshold free-gpu < 4",)}


def test_each_rows_bounds_are_laid_out_once_per_node_table_version(
    *, make_node, make_metric, monkeypatch
):
    metric = gpu_pool_cpu(make_metric, (pool("pool", "gpu"), 0.9))
    table = columns.NodeTable.build([make_node("general-1"), make_node("gpu-1")])
    memo = framework.Memo()
    looked_up: list[str] = []
    node_bounds = metric_threshold.node_bounds

    def counting(spec, labels):
        looked_up.append(labels["kubernetes.io/hostname"])
        return node_bounds(spec, labels)

    monkeypatch.setattr(metric_threshold, "node_bounds", counting)

    first = metric_threshold.row_bounds(metric=metric, table=table, memo=memo)
    again = metric_threshold.row_bounds(metric=metric, table=table, memo=memo)
    assert again is first
    assert looked_up == ["general-1", "gpu-1"]
    assert first[1].tolist() == [0.8, 0.8]

    table.update(make_node("gpu-1", labels={"pool": "gpu"}))  # labelled: a new node version
    relabelled = metric_threshold.row_bounds(metric=metric, table=table, memo=memo)
    assert relabelled[1].tolist() == [0.8, 0.9]
    assert looked_up == ["general-1", "gpu-1", "general-1", "gpu-1"]
