"""Answers the scheduler keeps across cycles (its memo) equal answers worked out afresh,
whatever happened to the cluster in between: the filters' reasons for every node, for
pods with and without their own pod (anti-)affinity terms, while placed pods with
anti-affinity come, go and move."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import framework, model, parse, profile
from metricsched.runtime import cache as cache_mod

NODES = ("n1", "n2", "n3", "n4", "n5")
ZONES = {"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c"}


def _node(name: str, relabelled: bool) -> model.NodeInfo:
    zone = "c" if relabelled else ZONES[name]
    return parse.node_from_body(
        {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "zone": zone},
            },
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
        }
    )


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _pod(
    name: str, *, node: str, app: str, away_from: str | None, key: str, near: str | None = None
) -> model.PodInfo:
    affinity: dict[str, Any] = {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    if away_from is not None:
        affinity["podAntiAffinity"] = {required: [_term(away_from, key)]}
    if near is not None:
        affinity["podAffinity"] = {required: [_term(near, key)]}
    return parse.pod_from_body(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "labels": {"app": app},
            },
            "spec": {
                "schedulerName": "metricsched",
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                "affinity": affinity,
            },
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


apps = st.sampled_from(("web", "db", "cache"))
keys = st.sampled_from(("zone", "kubernetes.io/hostname"))
placed = st.tuples(
    st.just("place"),
    st.integers(0, 8),
    st.sampled_from(NODES),
    apps,
    st.one_of(st.none(), apps),
    keys,
)
gone = st.tuples(st.just("gone"), st.integers(0, 8))
relabel = st.tuples(st.just("relabel"), st.sampled_from(NODES), st.booleans())
ask = st.tuples(st.just("ask"), apps, st.one_of(st.none(), apps), st.one_of(st.none(), apps))
events = st.lists(st.one_of(placed, gone, relabel, ask), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(events=events)
def test_kept_answers_equal_fresh_ones_after_any_events(events):
    cache = cache_mod.ClusterCache()
    for name in NODES:
        cache.upsert_node(_node(name, relabelled=False))
    kept = framework.Memo()
    asked = 0
    for event in events:
        kind = event[0]
        if kind == "place":
            _, index, node, app, away_from, key = event
            pod = _pod(f"p{index}", node=node, app=app, away_from=away_from, key=key)
            cache.upsert_pod(pod, ours=True)
        elif kind == "gone":
            cache.remove_pod(f"uid-p{event[1]}")
        elif kind == "relabel":
            cache.upsert_node(_node(event[1], relabelled=event[2]))
        else:
            _, app, away_from, near = event
            asked += 1
            incoming = _pod(
                f"new{asked}", node="", app=app, away_from=away_from, key="zone", near=near
            )
            snapshot = cache.snapshot(now=1000.0)
            fresh = profile.node_reasons(incoming, snapshot, memo=framework.Memo())
            assert profile.node_reasons(incoming, snapshot, memo=kept) == fresh
