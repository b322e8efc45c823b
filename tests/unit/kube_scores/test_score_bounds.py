"""Invariants of every kube-scheduler score: 0..100 per node, and a blend in 0..100."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import scoring
from metricsched.core.plugins import kube_scores
from tests.unit.conftest import build_metric_spec, build_policy
from tests.unit.kube_scores.conftest import (
    HOSTNAME,
    ZONE,
    cycle_of,
    every_row,
    make_cluster,
    make_node,
    make_pod,
    pod_term,
)

ALL = tuple((name, 1) for name in kube_scores.PLUGINS)

node_shapes = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),  # zone
        st.integers(min_value=0, max_value=2),  # PreferNoSchedule taints
        st.sampled_from(["1", "4", "16"]),  # cpus
    ),
    min_size=1,
    max_size=5,
)
placed_pods = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=4),  # node index (modulo)
        st.sampled_from(["web", "db"]),
        st.booleans(),  # same controller as the incoming pod
        st.booleans(),  # has a preferred anti-affinity term towards app=web
    ),
    max_size=12,
)


def build(shapes, placed, *, incoming_terms: bool):
    nodes = []
    for index, (zone, taints, cpu) in enumerate(shapes):
        nodes.append(
            make_node(
                f"n{index}",
                cpu=cpu,
                labels={ZONE: zone} if zone else {},
                taints=[
                    {"key": f"t{k}", "value": "x", "effect": "PreferNoSchedule"}
                    for k in range(taints)
                ],
            )
        )
    pods = [
        make_pod(
            f"p{number}",
            node_name=f"n{where % len(shapes)}",
            labels={"app": app},
            cpu="500m",
            owner=("ReplicaSet", "rs-1") if same else None,
            preferred_away=[pod_term({"app": "web"}, HOSTNAME, 5)] if away else (),
        )
        for number, (where, app, same, away) in enumerate(placed)
    ]
    incoming = make_pod(
        labels={"app": "web"},
        cpu="250m",
        memory="256Mi",
        owner=("ReplicaSet", "rs-1"),
        preferred_pods=[pod_term({"app": "db"}, ZONE, 40)] if incoming_terms else (),
        preferred_nodes=[
            {
                "weight": 7,
                "preference": {
                    "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]
                },
            }
        ]
        if incoming_terms
        else (),
    )
    return incoming, make_cluster(nodes, pods)


@settings(max_examples=150, deadline=None)
@given(shapes=node_shapes, placed=placed_pods, incoming_terms=st.booleans())
def test_every_plugin_scores_each_node_within_0_and_100(shapes, placed, incoming_terms):
    incoming, scene = build(shapes, placed, incoming_terms=incoming_terms)
    terms = kube_scores.score_terms(
        cycle=cycle_of(incoming, scene), rows=every_row(scene), weights=ALL
    )
    for term in terms:
        assert len(term.scores) == len(shapes)
        assert all(0.0 <= score <= 100.0 for score in term.scores), term


@settings(max_examples=150, deadline=None)
@given(
    shapes=node_shapes,
    placed=placed_pods,
    incoming_terms=st.booleans(),
    penalty=st.sampled_from([0.0, 5.0, 100.0]),
)
def test_blended_scores_stay_within_0_and_100(shapes, placed, incoming_terms, penalty):
    incoming, scene = build(shapes, placed, incoming_terms=incoming_terms)
    terms = kube_scores.score_terms(
        cycle=cycle_of(incoming, scene),
        rows=every_row(scene),
        weights=tuple((n, 3) for n, _ in ALL),
    )
    count = len(shapes)
    scores = scoring.score_nodes(
        policy=build_policy(metrics=[build_metric_spec("latency")], burst_penalty=penalty),
        columns=[tuple(0.1 * (index + 1) for index in range(count))],
        burst_counts=[index % 2 for index in range(count)],
        kube=terms,
    )
    assert all(0.0 <= total <= 100.0 for total in scores.totals), scores
