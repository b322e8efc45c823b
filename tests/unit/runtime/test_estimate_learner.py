"""The learner turns how a node's metric moved after the policy's own binds into learned
estimates, measured against quiet nodes, and keeps only clean experiments.

The scenes: eight nodes of 4 cpu; batches on the first five (``BATCH``), the other three
(``CONTROLS``) quiet unless a test says otherwise."""

from __future__ import annotations

import dataclasses

import pytest

from metricsched.core import columns, learning, model
from metricsched.runtime import learner

T0 = 1_700_000_000.0
POLICY = model.PolicyKey("shop/cpu-aware")
KEY = model.MetricKey(POLICY, "cpu")
NODES = tuple(f"node-{i}" for i in range(1, 9))
BATCH, CONTROLS = NODES[:5], NODES[5:]


def metric(source="Learned", **fields) -> model.MetricSpec:
    return model.MetricSpec(
        name="cpu",
        source=model.PrometheusSource(query="up", node_label="node"),
        weight=1,
        goal=model.Goal.MINIMIZE,
        threshold_min=None,
        threshold_max=0.8,
        on_missing=model.OnMissing.NEUTRAL,
        estimate=model.EstimateSpec(source=model.EstimateFrom(source), settle_s=30.0, **fields),
    )


def series(at: float, values: dict[str, float]) -> model.MetricSeries:
    return model.MetricSeries(
        values={model.NodeName(n): model.MetricSample(v, at) for n, v in values.items()},
        last_refresh=at,
        error=None,
        error_message="",
    )


@pytest.fixture
def table(make_node, make_pod):
    """Nodes node-1..8 (4 cpu; ``sizes`` in millicores otherwise) with pods (name, node,
    bound at, app[, the policy its decision record names: this one unless given])."""

    def build(*bound: tuple, sizes: dict[str, int] | None = None) -> columns.NodeTable:
        pods: dict[str, list[model.PodInfo]] = {name: [] for name in NODES}
        for name, node, at, app, *placed_by in bound:
            pod = make_pod(name, cpu=100, labels={"app": app})
            pods[node].append(
                dataclasses.replace(
                    pod, node_name=node, bound_at=at, placed_by=(placed_by or [POLICY])[0]
                )
            )
        return columns.NodeTable.build(
            dataclasses.replace(make_node(n, cpu=(sizes or {}).get(n, 4000)), pods=tuple(found))
            for n, found in pods.items()
        )

    return build


@pytest.fixture
def learn(table):
    """Feeds refreshes: (time, {node: value}, [(pod, node, bound at, app)]) each."""

    def run(spec, *refreshes, sizes=None):
        state = learner.Learner()
        previous = None
        effect = None
        for at, values, bound in refreshes:
            after = series(at, {**QUIET, **values})
            effect = state.observe(
                key=KEY, metric=spec, before=previous, after=after, table=table(*bound, sizes=sizes)
            )
            previous = after
        return effect

    return run


QUIET = {node: 0.3 for node in NODES}


def one_per_node(at: float, app: str = "web", nodes=BATCH) -> list[tuple[str, str, float, str]]:
    return [(f"p-{node}", node, at, app) for node in nodes]


def moved(by: float | dict[str, float], nodes=BATCH) -> dict[str, float]:
    """The samples of ``nodes`` once their batches settled: 0.3 plus ``by``."""
    return {n: 0.3 + (by[n] if isinstance(by, dict) else by) for n in nodes}


def test_settled_binds_teach_their_workloads_increment(learn):
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),  # bound, not shown yet
        (
            T0 + 40,
            moved(dict(zip(BATCH, (0.12, 0.10, 0.14, 0.12, 0.11), strict=True))),
            binds,
        ),  # settled
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.12)
    assert effect.per_pod_by_workload == {"shop/web": pytest.approx(0.12)}


def test_fewer_than_five_settled_batches_apply_nothing(learn):
    binds = one_per_node(T0 + 2, nodes=BATCH[:4])
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved(0.1, nodes=BATCH[:4]), binds),
    )
    assert effect is None


def test_nothing_is_learned_before_the_settle_time(learn):
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 20, moved(0.1), binds),  # 18 s: too soon
    )
    assert effect is None


def test_a_declared_amount_learns_its_correction(learn):
    # 100m requested on 4 cpu declares 0.025; the nodes moved 0.1: pods use 4x.
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric("Requests", resource=model.EstimateResource.CPU),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved(0.1), binds),
    )
    assert effect is not None
    assert effect.ratio == pytest.approx(4.0)


def test_a_bind_onto_a_node_still_settling_teaches_nothing(learn):
    # Each node had a pod bound 10 s before: its ramp would be credited to the new one.
    earlier = one_per_node(T0 - 10, app="db")
    binds = [*earlier, *one_per_node(T0 + 2)]
    effect = learn(
        metric(),
        (T0, QUIET, earlier),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved(0.3), binds),
    )
    assert effect is None


def test_a_pod_leaving_while_binds_settle_spoils_the_measure(learn):
    old = [(f"old-{node}", node, T0 - 600, "db") for node in BATCH]
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, old),
        (T0 + 5, QUIET, [*old, *binds]),
        (T0 + 40, moved(-0.1), binds),  # the old pods left meanwhile
    )
    assert effect is None


def test_binds_that_never_stop_spoil_the_measure(learn):
    first = one_per_node(T0 + 2)
    later = [(f"late-{node}", node, T0 + 36, "web") for node in BATCH]
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, first),
        (T0 + 38, QUIET, [*first, *later]),  # 34 s after the first: past the settle time
        (T0 + 80, moved(0.2), [*first, *later]),
    )
    assert effect is None


def test_pods_bound_before_learning_began_teach_nothing(learn):
    old = [(f"old-{node}", node, T0 - 100, "web") for node in BATCH]
    effect = learn(metric(), (T0, QUIET, old), (T0 + 40, moved(0.6), old))
    assert effect is None


# --- measured against quiet nodes ---------------------------------------------------------


def test_the_controls_median_change_is_taken_off_every_batch(learn):
    # Every node rose while the batches settled; the controls by 0.1, 0.2 and 0.3.
    binds = one_per_node(T0 + 2)
    controls = dict(zip(CONTROLS, (0.4, 0.5, 0.6), strict=True))
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, {**moved(0.25), **controls}, binds),
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.05)  # 0.25 - 0.2


def test_batches_without_two_quiet_controls_teach_nothing(learn):
    # Two of the three controls are not quiet: one had a pod bound (by another scheduler)
    # while the batches settled, the other lost one.
    gone = ("gone", CONTROLS[1], T0 - 600, "db")
    binds = one_per_node(T0 + 2)
    bound = ("other", CONTROLS[0], T0 + 10, "db", "")
    effect = learn(
        metric(),
        (T0, QUIET, [gone]),
        (T0 + 5, QUIET, [gone, *binds]),
        (T0 + 40, moved(0.1), [*binds, bound]),
    )
    assert effect is None


def test_a_control_that_is_not_quiet_does_not_count(learn):
    # The control that lost a pod fell by 0.3; left out, the two others say 0.
    gone = ("gone", CONTROLS[0], T0 - 600, "db")
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, [gone]),
        (T0 + 5, QUIET, [gone, *binds]),
        (T0 + 40, {**moved(0.1), CONTROLS[0]: 0.0}, binds),
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(0.1)


# --- only the policy's own pods teach it ----------------------------------------------------


def test_pods_another_policy_or_scheduler_placed_teach_nothing(learn):
    others = [
        (f"p-{node}", node, T0 + 2, "web", placed_by)
        for node, placed_by in zip(
            BATCH, ("", "", "shop/other", "other/hog", "shop/other"), strict=True
        )
    ]
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, others),
        (T0 + 40, moved(0.5), others),
    )
    assert effect is None


def test_a_batch_mixing_the_policys_pods_with_anothers_teaches_nothing(learn):
    binds = one_per_node(T0 + 2)
    strangers = [(f"s-{node}", node, T0 + 3, "hog", "") for node in BATCH]
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, [*binds, *strangers]),
        (T0 + 40, moved(0.5), [*binds, *strangers]),
    )
    assert effect is None


# --- units, bounds and time -------------------------------------------------------------------


def test_a_utilisation_ratio_learns_cores_that_serve_every_node_size(learn):
    # 400m per pod: 0.1 of the 4-cpu nodes, 0.025 of the 16-cpu ones.
    sizes = {node: 16000 for node in BATCH[3:]}
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(resource=model.EstimateResource.CPU),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved({n: 0.025 if n in sizes else 0.1 for n in BATCH}), binds),
        sizes=sizes,
    )
    assert effect is not None
    assert effect.per_pod == pytest.approx(400)


def test_loads_that_fell_while_batches_settled_learn_zero_not_less(learn):
    binds = one_per_node(T0 + 2)
    effect = learn(
        metric(),
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved(-0.1), binds),
    )
    assert effect is not None
    assert effect.per_pod == 0.0


def test_what_was_learned_expires_without_new_binds(learn):
    binds = one_per_node(T0 + 2)
    refreshes = [
        (T0, QUIET, []),
        (T0 + 5, QUIET, binds),
        (T0 + 40, moved(0.1), binds),
    ]
    assert learn(metric(), *refreshes) is not None
    late = T0 + 40 + learning.EXPIRY_S + 1
    assert learn(metric(), *refreshes, (late, moved(0.1), binds)) is None


def test_controls_are_judged_on_the_runtimes_table_as_it_changes(make_node, make_pod):
    # The runtime's table is one object updated in place (``columns.TableKeeper``): two
    # controls that lose a pod while the batches settle must be seen to have changed.
    def state(node: str, *pods: tuple[str, float]) -> model.NodeState:
        bound = [
            dataclasses.replace(
                make_pod(name, labels={"app": "web"}),
                node_name=node,
                bound_at=at,
                placed_by=POLICY,
            )
            for name, at in pods
        ]
        return dataclasses.replace(make_node(node), pods=tuple(bound))

    states = {node: state(node) for node in BATCH}
    states.update({node: state(node, (f"old-{node}", T0 - 600)) for node in CONTROLS})
    keeper = columns.TableKeeper()
    state_of = learner.Learner()

    def refresh(at: float, values: dict[str, float], previous):
        after = series(at, {**QUIET, **values})
        state_of.observe(
            key=KEY, metric=metric(), before=previous, after=after, table=keeper.table(states)
        )
        return after

    previous = refresh(T0, {}, None)
    for node in BATCH:
        states[node] = state(node, (f"p-{node}", T0 + 2))
        keeper.changed(states[node])
    previous = refresh(T0 + 5, {}, previous)
    for node in CONTROLS[:2]:
        states[node] = state(node)  # its pod left
        keeper.changed(states[node])
    refresh(T0 + 40, moved(0.1), previous)
    assert state_of.effect(KEY) is None
