"""The metric store keeps the latest values per policy metric, and ages them honestly."""

from __future__ import annotations

import threading
import types

import pytest

from metricsched.core import model
from metricsched.edges import metric_store

LATENCY = model.MetricKey(policy=model.PolicyKey("shop/web"), metric="latency")
PRICE = model.MetricKey(policy=model.PolicyKey("shop/web"), metric="price")
A, B = model.NodeName("node-a"), model.NodeName("node-b")


def ok(at: float, **values: float) -> model.MetricSeries:
    return model.MetricSeries(
        values={
            model.NodeName(n.replace("_", "-")): model.MetricSample(v, at)
            for n, v in values.items()
        },
        last_refresh=at,
        error=None,
        error_message="",
    )


def failed(
    at: float, kind: model.QueryErrorKind = model.QueryErrorKind.UNREACHABLE
) -> model.MetricSeries:
    return model.MetricSeries(values={}, last_refresh=at, error=kind, error_message="down")


@pytest.fixture
def store() -> metric_store.MetricStore:
    return metric_store.MetricStore()


def test_a_successful_refresh_replaces_the_values(store: metric_store.MetricStore) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0, node_b=2.0))
    store.update(LATENCY, ok(20.0, node_a=3.0))
    assert store.view()[LATENCY] == ok(20.0, node_a=3.0)


def test_a_failed_refresh_keeps_previous_samples_with_their_old_timestamps(
    store: metric_store.MetricStore,
) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    store.update(LATENCY, failed(20.0))
    series = store.view()[LATENCY]
    assert series.values == {A: model.MetricSample(1.0, refreshed_at=10.0)}  # ages from 10
    assert series.last_refresh == 20.0
    assert series.error is model.QueryErrorKind.UNREACHABLE
    assert series.error_message == "down"


def test_an_empty_result_also_keeps_the_previous_samples(store: metric_store.MetricStore) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    store.update(LATENCY, failed(20.0, model.QueryErrorKind.EMPTY_RESULT))
    assert store.view()[LATENCY].values == {A: model.MetricSample(1.0, refreshed_at=10.0)}


def test_a_failed_first_refresh_records_the_error_without_values(
    store: metric_store.MetricStore,
) -> None:
    store.update(LATENCY, failed(20.0))
    assert store.view()[LATENCY] == failed(20.0)


def test_a_view_is_a_snapshot_that_later_updates_do_not_change(
    store: metric_store.MetricStore,
) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    before = store.view()
    store.update(LATENCY, ok(20.0, node_a=2.0))
    store.update(PRICE, ok(20.0, node_b=5.0))
    assert before == {LATENCY: ok(10.0, node_a=1.0)}
    assert store.view() is store.view()  # cheap: a reference, not a copy per call


def test_a_view_is_read_only(store: metric_store.MetricStore) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    view = store.view()
    assert isinstance(view, types.MappingProxyType)
    with pytest.raises(TypeError):
        view[PRICE] = ok(1.0)  # type: ignore[index]


def test_version_moves_when_values_change_not_when_a_refresh_confirms_them(
    store: metric_store.MetricStore,
) -> None:
    assert store.update(LATENCY, ok(10.0, node_a=1.0)) is True
    v1 = store.version
    assert store.update(LATENCY, ok(20.0, node_a=1.0)) is False
    assert store.version == v1
    assert store.update(LATENCY, ok(30.0, node_a=1.5)) is True
    assert store.version == v1 + 1
    assert store.update(LATENCY, ok(40.0, node_a=1.5, node_b=2.0)) is True


def test_version_moves_when_a_metric_fails_and_when_it_recovers(
    store: metric_store.MetricStore,
) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    v1 = store.version
    store.update(LATENCY, failed(20.0))
    assert store.version == v1 + 1
    store.update(LATENCY, failed(30.0))
    assert store.version == v1 + 1  # still failing the same way: nothing new
    store.update(LATENCY, ok(40.0, node_a=1.0))
    assert store.version == v1 + 2  # recovered with the same value: pending pods retry


def test_retain_drops_the_metrics_of_deleted_policies(store: metric_store.MetricStore) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    store.update(PRICE, ok(10.0, node_a=1.0))
    version = store.version
    assert store.retain([LATENCY]) == 1
    assert set(store.view()) == {LATENCY}
    assert store.version == version + 1
    assert store.retain([LATENCY]) == 0
    assert store.version == version + 1


def test_ages_are_measured_from_the_freshest_value(store: metric_store.MetricStore) -> None:
    store.update(LATENCY, ok(10.0, node_a=1.0))
    store.update(LATENCY, failed(20.0))
    store.update(PRICE, failed(20.0))
    assert store.ages(now=25.0) == {("shop/web", "latency"): 15.0}


def test_concurrent_updates_and_views_stay_consistent(store: metric_store.MetricStore) -> None:
    keys = [model.MetricKey(policy=model.PolicyKey(f"ns/p{i}"), metric="m") for i in range(8)]
    errors: list[str] = []

    def writer(key: model.MetricKey) -> None:
        for step in range(300):
            store.update(key, ok(float(step), node_a=float(step)))

    def reader() -> None:
        for _ in range(300):
            for series in store.view().values():
                sample = series.values[A]
                if sample.value != sample.refreshed_at:
                    errors.append("torn series")

    threads = [threading.Thread(target=writer, args=(k,)) for k in keys]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {k: s.values[A].value for k, s in store.view().items()} == dict.fromkeys(keys, 299.0)
    assert store.version == 8 * 300


# --- the operator-wide cap on stored values (issue 28, N8) ----------------------------

WEB = model.PolicyKey("shop/web")
OTHER = model.PolicyKey("team/other")


def _answer(count: int, at: float = 10.0) -> model.MetricSeries:
    return ok(at, **{f"node_{i}": float(i) for i in range(count)})


def test_an_answer_that_would_pass_the_cap_is_refused_and_the_others_keep_theirs() -> None:
    store = metric_store.MetricStore(max_values=10)
    first, second = model.MetricKey(WEB, "a"), model.MetricKey(OTHER, "b")
    assert store.update_shared([first], _answer(6)).error is None
    refused = store.update_shared([second], _answer(6))
    assert refused.error is model.QueryErrorKind.RESULT_TOO_LARGE
    assert "6 values" in refused.error_message
    assert "cap of 10 stored values" in refused.error_message
    assert "--max-metric-values" in refused.error_message
    view = store.view()
    assert len(view[first].values) == 6
    assert view[second].values == {}
    assert view[second].error is model.QueryErrorKind.RESULT_TOO_LARGE
    assert store.values == 6
    assert store.update_shared([second], _answer(4)).error is None  # what fits is stored
    assert store.values == 10


def test_a_refused_metric_keeps_its_last_values_to_age_out() -> None:
    store = metric_store.MetricStore(max_values=10)
    mine, theirs = model.MetricKey(WEB, "a"), model.MetricKey(OTHER, "b")
    store.update_shared([mine], _answer(3, at=10.0))
    store.update_shared([theirs], _answer(6))
    grown = store.update_shared([mine], _answer(5, at=20.0))
    assert grown.error is model.QueryErrorKind.RESULT_TOO_LARGE
    kept = store.view()[mine]
    assert len(kept.values) == 3
    assert {s.refreshed_at for s in kept.values.values()} == {10.0}
    assert store.values == 9


def test_a_metric_replacing_its_own_values_needs_room_only_for_the_difference() -> None:
    store = metric_store.MetricStore(max_values=10)
    key = model.MetricKey(WEB, "a")
    store.update_shared([key], _answer(8))
    assert store.update_shared([key], _answer(10, at=20.0)).error is None
    assert store.values == 10


def test_an_answer_shared_by_several_metrics_counts_once() -> None:
    store = metric_store.MetricStore(max_values=10)
    keys = [model.MetricKey(model.PolicyKey(f"shop/p{i}"), "m") for i in range(5)]
    assert store.update_shared(keys, _answer(8)).error is None
    assert store.values == 8
    store.retain(keys[:2])
    assert store.values == 8  # still held by two
    store.retain([])
    assert store.values == 0


def test_learned_effects_and_usage_do_not_change_the_count() -> None:
    store = metric_store.MetricStore(max_values=10)
    key = model.MetricKey(WEB, "a")
    store.update_shared([key], _answer(4))
    store.set_learned(key, model.LearnedEffect(per_pod=1.0))
    store.update(key, failed(30.0))
    assert store.values == 4
