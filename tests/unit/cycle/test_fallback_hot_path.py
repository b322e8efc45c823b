"""The operator's hot path (``detail=False``) decides a fallback exactly as explain does.

Without detail, a pod the default policy or a fallback strategy places carries only the
pick's and the runner-up's verdicts (one left waiting, none): the decision, its message
and its decision record (the Binding's annotation) are those of the full path.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import decision_record, model
from tests.unit.conftest import (
    NOW,
    build_metric_view,
    build_node_state,
    build_pod_info,
    build_policy,
    build_snapshot,
    run_cycle,
)

GIB = 1024**3
Strategy = model.FallbackStrategy

_nodes = st.lists(
    st.tuples(
        st.sampled_from([2000, 4000, 8000]),  # cpu
        st.integers(0, 8).map(lambda eighths: eighths * 500),  # requested cpu
        st.integers(0, 4),  # recent binds
        st.booleans(),  # cordoned
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150)
@given(
    nodes=_nodes,
    strategy=st.sampled_from(list(Strategy)),
    stale_policy=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_without_detail_a_fallback_decides_and_records_as_with_it(
    nodes, strategy, stale_policy, seed
):
    snapshot = build_snapshot(
        *(
            build_node_state(
                f"node-{index:02}",
                cpu=cpu,
                requested_cpu=min(requested, cpu),
                recent_binds=(NOW - 10,) * binds,
                unschedulable=cordoned,
            )
            for index, (cpu, requested, binds, cordoned) in enumerate(nodes)
        )
    )
    policies: list[model.Policy] = []
    metrics: model.MetricView = {}
    if stale_policy:  # a policy whose metrics are too old: its fallback decides
        chosen = build_policy(fallback=strategy, burst_penalty=5.0)
        policies = [chosen]
        metrics = build_metric_view(
            chosen, {"latency": dict.fromkeys(snapshot.nodes, 0.1)}, refreshed_at=NOW - 3600
        )
    full, hot = (
        run_cycle(
            pod=build_pod_info("web-1", cpu=250, memory=GIB // 4),
            snapshot=snapshot,
            policies=policies,
            metrics=metrics,
            default_fallback=strategy,
            rr_counter=seed % 7,
            seed=seed,
            detail=detail,
        )
        for detail in (True, False)
    )
    assert dataclasses.replace(hot, verdicts=()) == dataclasses.replace(full, verdicts=())
    assert set(hot.verdicts) <= set(full.verdicts)
    assert [v.node for v in hot.verdicts] == sorted(v.node for v in hot.verdicts)
    if full.outcome is model.Outcome.BIND:
        assert full.fallback_reason or not stale_policy
        record = {"fallback_strategy": strategy, "now": NOW}
        assert decision_record.record_of(hot, **record) == decision_record.record_of(full, **record)
        assert len(hot.verdicts) == min(2, sum(v.feasible for v in full.verdicts))
    elif full.outcome is model.Outcome.WAIT:
        assert hot.verdicts == ()
