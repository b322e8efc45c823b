"""What others do to the nodes a policy shares never holds its pods pending through what
it learns (DESIGN "Scoring semantics" 6; issue 27; the reliability review's N4).

Each scene: 8 nodes of 4 cpu at cpu utilisation 0.3, a policy thresholding cpu at 0.8
with a ``Learned`` estimate, the refreshes its learner sees (binds, and how each node's
sample moved), and after them a decision for one more of the policy's pods: it must
bind. A learner poisoned into a large per-pod value would add it on every node and rule
every node out; the decision must also not have needed the fail-open (``Decision.
estimate_fail_open``) to bind, so these tests hold the learner to account, not the cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from metricsched.core import columns, model
from metricsched.runtime import learner

T0 = 1_700_000_000.0
NODES = tuple(f"node-{i}" for i in range(1, 9))
POLICY = model.PolicyKey("shop/cpu-aware")
KEY = model.MetricKey(POLICY, "cpu")
BIND = model.Outcome.BIND


def cpu_metric() -> model.MetricSpec:
    return model.MetricSpec(
        name="cpu",
        source=model.PrometheusSource(query="node_cpu_utilisation", node_label="node"),
        weight=1,
        goal=model.Goal.MINIMIZE,
        threshold_min=None,
        threshold_max=0.8,
        on_missing=model.OnMissing.NEUTRAL,
        estimate=model.EstimateSpec(source=model.EstimateFrom.LEARNED, settle_s=30.0),
    )


class Scene:
    """The nodes, the pods bound to them, their samples and the policy's learner."""

    def __init__(self, make_node, make_pod, make_policy, schedule) -> None:
        self._make_node, self._make_pod, self._schedule = make_node, make_pod, schedule
        self.policy = make_policy("cpu-aware", metrics=[cpu_metric()])
        assert self.policy.key == POLICY
        self.learner = learner.Learner()
        self.pods: dict[str, list[model.PodInfo]] = {node: [] for node in NODES}
        self.values = {node: 0.3 for node in NODES}
        self.previous: model.MetricSeries | None = None
        self.effect: model.LearnedEffect | None = None
        self.at = T0

    def bind(
        self, name: str, node: str, at: float, *, placed_by=POLICY, namespace="shop", app="web"
    ) -> None:
        """A pod bound to ``node`` at ``at``; its decision record names ``placed_by``."""
        pod = self._make_pod(name, namespace=namespace, labels={"app": app})
        self.pods[node].append(
            dataclasses.replace(
                pod, node_name=node, bound_at=at, phase="Running", placed_by=placed_by
            )
        )

    def states(self) -> list[model.NodeState]:
        return [
            dataclasses.replace(self._make_node(node), pods=tuple(self.pods[node]))
            for node in NODES
        ]

    def refresh(self, at: float, moved: Mapping[str, float] | None = None) -> None:
        """A refresh at ``at`` whose samples moved by ``moved`` (node -> change)."""
        for node, change in (moved or {}).items():
            self.values[node] += change
        after = model.MetricSeries(
            values={model.NodeName(n): model.MetricSample(v, at) for n, v in self.values.items()},
            last_refresh=at,
            error=None,
            error_message="",
        )
        self.effect = self.learner.observe(
            key=KEY,
            metric=self.policy.metrics[0],
            before=self.previous,
            after=after,
            table=columns.NodeTable.build(self.states()),
        )
        self.previous, self.at = after, at

    def decide(self) -> model.Decision:
        """One more of the policy's pods, decided on the latest samples and learned value."""
        assert self.previous is not None
        series = dataclasses.replace(self.previous, learned=self.effect)
        return self._schedule(
            pod=self._make_pod("web-new"),
            snapshot=model.ClusterSnapshot(nodes={s.node.name: s for s in self.states()}),
            policies=[self.policy],
            metrics={KEY: series},
            now=self.at + 1,
        )


@pytest.fixture
def scene(make_node, make_pod, make_policy, schedule) -> Scene:
    return Scene(make_node, make_pod, make_policy, schedule)


def test_a_background_step_on_a_batchs_node_is_not_credited_to_the_batch(scene):
    # One of the policy's pods at a time on nodes 1..5 (each adds about 0.05). While the
    # first two settle, a neighbour already on their node heats it by 0.5; the other
    # nodes (the controls) do not move.
    own = (0.05, 0.05, 0.04, 0.05, 0.06)
    step = (0.5, 0.5, 0.0, 0.0, 0.0)
    start = T0
    scene.refresh(start)
    for batch, node in enumerate(NODES[:5]):
        scene.bind(f"web-{batch}", node, start + 2)
        scene.refresh(start + 5)
        scene.refresh(start + 40, {node: own[batch] + step[batch]})
        decision = scene.decide()
        assert decision.outcome is BIND, f"after batch {batch + 1}: {decision.message}"
        assert decision.estimate_fail_open == ()  # bound by what was learned, not despite it
        start += 100
    assert scene.effect is not None
    assert scene.effect.per_pod == pytest.approx(0.05)


def test_a_step_every_node_shows_while_a_batch_settles_cancels(scene):
    # Five of the policy's pods, one on each of nodes 1..5 (0.05 each), while the whole
    # cluster's load rises by 0.3 (a diurnal swing, a recording rule changed).
    scene.refresh(T0)
    for batch, node in enumerate(NODES[:5]):
        scene.bind(f"web-{batch}", node, T0 + 2)
    scene.refresh(T0 + 5)
    scene.refresh(T0 + 40, {node: 0.3 + (0.05 if node in NODES[:5] else 0.0) for node in NODES})
    decision = scene.decide()
    assert decision.outcome is BIND, decision.message
    assert decision.estimate_fail_open == ()
    assert scene.effect is not None
    assert scene.effect.per_pod == pytest.approx(0.05)


def test_other_tenants_pods_binding_and_heating_the_same_nodes_teach_nothing(scene):
    # Twice, on three quiet nodes each: another namespace's pod (another scheduler placed
    # it: no decision record), a pod another policy placed, and one of the policy's own
    # pods bound beside another namespace's; each node heats by 0.55.
    start = T0
    scene.refresh(start)
    for first in (0, 3):
        alien, other_policy, mixed = NODES[first : first + 3]
        scene.bind(f"hog-{first}", alien, start + 2, placed_by="", namespace="batch", app="hog")
        scene.bind(f"api-{first}", other_policy, start + 2, placed_by="shop/other", app="api")
        scene.bind(f"web-{first}", mixed, start + 2)
        scene.bind(f"hog-{first}-b", mixed, start + 2, placed_by="", namespace="batch", app="hog")
        scene.refresh(start + 5)
        scene.refresh(start + 40, {alien: 0.55, other_policy: 0.55, mixed: 0.55})
        decision = scene.decide()
        assert decision.outcome is BIND, decision.message
        assert decision.estimate_fail_open == ()
        start += 100
    assert scene.effect is None
