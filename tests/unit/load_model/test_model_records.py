"""The model's ticks, its /truth and its record lines: what placement did to each node."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tests.unit.load_model.conftest import core, loadmodel, node, pod

T0 = 1_000_000.0


def model(*, noise: float = 0.0, seed: int = 1) -> tuple[Any, io.StringIO]:
    record = io.StringIO()
    m = loadmodel.Model(seed=seed, noise=noise, service_time=0.05, record=record)
    return m, record


def lines(record: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.getvalue().splitlines()]


def fixed(cpu: str, ramp: str = "0") -> dict[str, str]:
    return {core.POD_CPU: cpu, core.POD_RAMP: ramp}


def test_a_bind_record_holds_the_nodes_eventual_cpu_before_and_after_the_pod() -> None:
    m, record = model()
    m.nodes_listed([node("n1", cpu="4", background_cpu="0.5")])
    m.pod_seen(pod("a", annotations=fixed("1")), T0)
    m.pod_seen(pod("b", annotations=fixed("0.6"), scheduler="default-scheduler"), T0 + 1)
    binds = [line for line in lines(record) if "bind" in line]
    assert binds == [
        {
            "t": T0,
            "bind": "ns/a",
            "node": "n1",
            "scheduler": "metricsched",
            "cpu_before": 0.5,
            "cpu_after": 0.75,
        },
        {
            "t": T0 + 1,
            "bind": "ns/b",
            "node": "n1",
            "scheduler": "default-scheduler",
            "cpu_before": 0.75,
            "cpu_after": 0.9,
        },
    ]


def test_a_pod_seen_again_is_not_recorded_again() -> None:
    m, record = model()
    m.nodes_listed([node("n1")])
    m.pod_seen(pod("a"), T0)
    m.pod_seen(pod("a"), T0 + 5)
    assert sum(1 for line in lines(record) if "bind" in line) == 1


def test_a_tick_samples_utilisation_memory_latency_and_pods_per_modelled_node() -> None:
    m, record = model()
    m.nodes_listed([node("n1", cpu="4", memory="4Gi", background_cpu="0.25")])
    m.pod_seen(pod("a", annotations={**fixed("1"), core.POD_MEMORY: "1Gi"}), T0)
    m.tick(T0 + 1)
    assert lines(record)[-1] == {
        "t": T0 + 1,
        "nodes": {"n1": {"cpu": 0.5, "memory": 0.25, "latency": 0.1, "pods": 1}},
    }


def test_usage_ramps_up_after_the_pod_is_seen_bound() -> None:
    m, _ = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("2", ramp="10")), T0)
    m.tick(T0 + 5)
    assert m.samples["n1"].cpu == pytest.approx(0.25)
    truth = m.truth(T0 + 5)["nodes"]["n1"]
    assert truth["eventual_cpu"] == pytest.approx(0.5)
    assert truth["ramping"] == 1
    m.tick(T0 + 10)
    assert m.samples["n1"].cpu == pytest.approx(0.5)
    assert m.truth(T0 + 10)["nodes"]["n1"]["ramping"] == 0


def test_noise_stays_within_its_bounds_and_the_same_seed_repeats_it() -> None:
    def run(seed: int) -> list[float]:
        m, _ = model(noise=0.03, seed=seed)
        m.nodes_listed([node("n1", cpu="1")])
        m.pod_seen(pod("a", annotations=fixed("1")), T0)
        values = []
        for i in range(50):
            m.tick(T0 + i)
            values.append(m.samples["n1"].cpu)
        return values

    first = run(3)
    assert all(0.97 <= v <= 1.03 for v in first)
    assert len(set(first)) > 10
    assert run(3) == first
    assert run(4) != first


def test_a_pod_gone_is_recorded_and_no_longer_counts() -> None:
    m, record = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("2")), T0)
    m.pod_gone(pod("a"), T0 + 3)
    m.tick(T0 + 4)
    assert {"t": T0 + 3, "gone": "ns/a", "node": "n1"} in lines(record)
    assert m.samples["n1"].cpu == 0.0


def test_a_pod_that_finishes_stops_counting() -> None:
    m, record = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("2")), T0)
    m.pod_seen(pod("a", annotations=fixed("2"), phase="Succeeded"), T0 + 1)
    assert any(line.get("gone") == "ns/a" for line in lines(record))
    assert m.truth(T0 + 1)["nodes"] == {}  # no tick yet: nothing sampled
    m.tick(T0 + 2)
    assert m.truth(T0 + 2)["nodes"]["n1"]["pods"] == 0


def test_pods_on_nodes_that_are_not_modelled_are_neither_recorded_nor_served() -> None:
    m, record = model()
    m.nodes_listed([node("n1")])
    m.pod_seen(pod("a", node="elsewhere"), T0)
    m.tick(T0 + 1)
    assert [line for line in lines(record) if "bind" in line] == []
    assert set(m.truth(T0 + 1)["nodes"]) == {"n1"}


def test_a_relist_forgets_pods_missing_from_it_and_keeps_the_ramp_of_the_others() -> None:
    m, record = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("2", ramp="10")), T0)
    m.pod_seen(pod("b", annotations=fixed("1")), T0)
    m.pods_listed([pod("a", annotations=fixed("2", ramp="10"))], T0 + 5)
    m.tick(T0 + 10)
    assert m.samples["n1"].cpu == pytest.approx(0.5)  # a at full usage: it ramped from T0
    assert {"t": T0 + 5, "gone": "ns/b", "node": "n1"} in lines(record)


def test_a_background_override_makes_a_hot_spot_until_it_is_cleared() -> None:
    m, _ = model()
    m.nodes_listed([node("n1", cpu="4", background_cpu="0.1")])
    m.set_background("n1", 0.6, None)
    m.tick(T0)
    assert m.samples["n1"].cpu == pytest.approx(0.6)
    m.clear_background("n1")
    m.tick(T0 + 1)
    assert m.samples["n1"].cpu == pytest.approx(0.1)


def test_the_metrics_carry_node_and_instance_labels_of_modelled_nodes_only() -> None:
    m, _ = model()
    m.nodes_listed([node("n1", cpu="4", background_cpu="0.5")])
    m.tick(T0)
    families = {f.name: f for f in loadmodel.Collector(m).collect()}
    assert set(families) == {
        "node_cpu_utilisation",
        "node_memory_utilisation",
        "node_latency_seconds",
        "loadmodel_node_pods",
    }
    (sample,) = families["node_cpu_utilisation"].samples
    assert sample.labels == {"node": "n1", "instance": "10.0.0.1:9100"}
    assert sample.value == 0.5
