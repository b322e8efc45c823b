"""The metric store's cost per refreshed metric does not grow with the number of metrics,
while every view stays the state it was taken at (issue 24, finding 3)."""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st

from metricsched.core import model
from metricsched.edges import metric_store, snapshot_map

A = model.NodeName("node-a")


class CountingKey(model.MetricKey):
    """A metric key that counts how often it is hashed: the store's work per update."""

    hashes = 0

    def __hash__(self) -> int:
        CountingKey.hashes += 1
        return hash((self.policy, self.metric))


def key(i: int) -> CountingKey:
    return CountingKey(policy=model.PolicyKey(f"ns/p{i}"), metric="m")


def ok(at: float, value: float) -> model.MetricSeries:
    return model.MetricSeries(
        values={A: model.MetricSample(value, at)}, last_refresh=at, error=None, error_message=""
    )


def hashes_per_update(metrics: int) -> float:
    """One round over ``metrics`` metrics, a cycle reading a view after each answer."""
    store = metric_store.MetricStore()
    keys = [key(i) for i in range(metrics)]
    for k in keys:
        store.update(k, ok(1.0, 1.0))
    CountingKey.hashes = 0
    for step, k in enumerate(keys):
        store.update(k, ok(2.0, float(step)))
        assert store.view()[k].values[A].value == float(step)  # a cycle reads the view
    return CountingKey.hashes / metrics


class TestARoundCostsTheSamePerMetricAtAnyScale:
    def test_an_update_and_a_view_touch_a_constant_number_of_keys(self) -> None:
        # Copying the store per update touched every key once or twice: 4,000 metrics
        # cost 10 s of event loop per round.
        small, large = hashes_per_update(250), hashes_per_update(2_000)
        assert small <= 8
        assert large <= small

    def test_retaining_every_metric_costs_one_pass(self) -> None:
        store = metric_store.MetricStore()
        keys = [key(i) for i in range(1_000)]
        for k in keys:
            store.update(k, ok(1.0, 1.0))
        CountingKey.hashes = 0
        assert store.retain(keys) == 0
        assert CountingKey.hashes <= 3 * len(keys)


class TestAViewIsTheStateItWasTakenAt:
    def test_a_view_held_through_a_round_does_not_move(self) -> None:
        store = metric_store.MetricStore()
        keys = [key(i) for i in range(50)]
        for k in keys:
            store.update(k, ok(1.0, 1.0))
        held = store.view()
        for round_ in range(2, 60):  # enough writes to compact the history meanwhile
            for k in keys:
                store.update(k, ok(float(round_), float(round_)))
        store.set_learned(keys[0], model.LearnedEffect(per_pod=0.5, observations=3))
        store.retain(keys[:10])
        assert len(held) == 50
        assert {k: s.values[A].value for k, s in held.items()} == dict.fromkeys(keys, 1.0)
        assert held[keys[0]].learned is None
        now = store.view()
        assert set(now) == set(keys[:10])
        assert now[keys[0]].learned == model.LearnedEffect(per_pod=0.5, observations=3)

    def test_the_history_stays_bounded_while_an_old_view_is_held(self) -> None:
        data: snapshot_map.SnapshotMap[int, int] = snapshot_map.SnapshotMap(slack=64)
        for k in range(100):
            data.set(k, 0)
        held = data.snapshot()
        for value in range(1, 200):
            for k in range(100):
                data.set(k, value)
            assert data.versions <= 2 * 100 + 64 + 1
        assert dict(held) == dict.fromkeys(range(100), 0)
        assert dict(data.snapshot()) == dict.fromkeys(range(100), 199)

    def test_with_no_view_held_one_value_per_metric_is_kept(self) -> None:
        data: snapshot_map.SnapshotMap[int, int] = snapshot_map.SnapshotMap()
        for value in range(10):
            for k in range(20):
                data.set(k, value)
                data.snapshot()  # taken and dropped, as a cycle does
        assert data.versions == 20
        for k in range(10):
            data.delete(k)
        assert data.versions == 10
        assert len(data) == 10


class TestLearnedEffectsSurviveRefreshes:
    def test_a_refresh_carries_what_the_learner_attached(self) -> None:
        store = metric_store.MetricStore()
        k = key(1)
        store.update(k, ok(1.0, 1.0))
        learned = model.LearnedEffect(per_pod=0.2, observations=5)
        version = store.version
        store.set_learned(k, learned)
        assert store.version == version  # values and errors unchanged
        store.update(k, ok(2.0, 3.0))
        store.update(
            k,
            model.MetricSeries(
                values={},
                last_refresh=3.0,
                error=model.QueryErrorKind.UNREACHABLE,
                error_message="down",
            ),
        )
        assert store.view()[k].learned is learned
        assert store.get(k) is store.view()[k]

    def test_a_refresh_that_brings_its_own_learned_effect_replaces_it(self) -> None:
        store = metric_store.MetricStore()
        k = key(1)
        store.update(k, ok(1.0, 1.0))
        store.set_learned(k, model.LearnedEffect(per_pod=0.2))
        newer = model.LearnedEffect(per_pod=0.4)
        store.update(k, prometheus_series_with(newer))
        assert store.view()[k].learned is newer

    def test_set_learned_on_an_unknown_metric_does_nothing(self) -> None:
        store = metric_store.MetricStore()
        store.set_learned(key(9), model.LearnedEffect(per_pod=1.0))
        assert dict(store.view()) == {}


def prometheus_series_with(learned: model.LearnedEffect) -> model.MetricSeries:
    return model.MetricSeries(
        values={A: model.MetricSample(2.0, 2.0)},
        last_refresh=2.0,
        error=None,
        error_message="",
        learned=learned,
    )


operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 7), st.integers(0, 1_000)),
        st.tuples(st.just("delete"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("view"), st.just(0), st.just(0)),
        st.tuples(st.just("drop"), st.integers(0, 20), st.just(0)),
    ),
    max_size=200,
)


@hypothesis.given(operations)
def test_every_snapshot_equals_a_copy_taken_at_the_same_moment(
    ops: list[tuple[str, int, int]],
) -> None:
    data: snapshot_map.SnapshotMap[int, int] = snapshot_map.SnapshotMap(slack=4)
    model_dict: dict[int, int] = {}
    held: list[tuple[object, dict[int, int]]] = []
    for op, k, value in ops:
        if op == "set":
            data.set(k, value)
            model_dict[k] = value
        elif op == "delete":
            assert data.delete(k) == (k in model_dict)
            model_dict.pop(k, None)
        elif op == "view":
            held.append((data.snapshot(), dict(model_dict)))
        elif held:
            held.pop(k % len(held))
        assert len(data) == len(model_dict)
        assert data.versions <= 2 * len(model_dict) + 4 + 2 * 8 + 1
        for snapshot, expected in held:
            assert dict(snapshot) == expected  # type: ignore[call-overload]
            assert len(snapshot) == len(expected)  # type: ignore[arg-type]
    assert dict(data.snapshot()) == model_dict
    assert sorted(data.present()) == sorted(model_dict)
