"""One terminal-phase rule (``model.TERMINAL_PHASES``): a finished pod is watched by no pod
watch, holds nothing on its node, waits for none and is nominated to none."""

from __future__ import annotations

import pytest

from metricsched.core import model, parse
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import ingest
from tests.unit.conftest import build_node_body, build_pod_body

NODE = model.NodeName("node-1")


@pytest.mark.parametrize("phase", model.TERMINAL_PHASES)
def test_no_pod_watch_lists_a_finished_pod(phase: str) -> None:
    for selector in (
        ingest.pending_selector(frozenset({"metricsched"})),
        ingest.BOUND_FIELD_SELECTOR,
        ingest.NOMINATED_FIELD_SELECTOR,
    ):
        assert f"status.phase!={phase}" in selector.split(",")


@pytest.mark.parametrize("phase", model.TERMINAL_PHASES)
def test_a_finished_pod_holds_nothing_and_is_nominated_nowhere(phase: str) -> None:
    cache = cache_mod.ClusterCache()
    cache.upsert_node(parse.node_from_body(build_node_body("node-1")))
    bound = parse.pod_from_body(build_pod_body("done", cpu="1", node_name="node-1", phase=phase))
    cache.upsert_pod(bound, ours=True)
    body = build_pod_body("waiting", cpu="1", phase=phase)
    body["status"]["nominatedNodeName"] = "node-1"
    cache.upsert_nominated(parse.pod_from_body(body))
    snapshot = cache.snapshot()
    assert snapshot.nodes[NODE].requested.milli_cpu == 0
    assert not snapshot.nodes[NODE].pods
    assert not snapshot.nominated
    assert not cache.pending


def test_a_running_pod_is_not_finished() -> None:
    assert not any(model.finished(phase) for phase in ("Pending", "Running", "Unknown"))
    assert all(model.finished(phase) for phase in model.TERMINAL_PHASES)
