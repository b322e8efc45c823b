"""The load model's node-exporter-shaped series: counters that integrate each node's
utilisation, so the recording rules real stacks use read the model's cpu back."""

from __future__ import annotations

import prometheus_client
import pytest

from tests.unit.load_model.conftest import core, loadmodel, node

T0 = 1_000_000.0


def test_cpu_seconds_integrate_utilisation_into_user_and_idle_per_core() -> None:
    n, _ = core.node_from_body(node(cpu="2"))
    counters = core.NodeCounters()
    core.advance(counters, node=n, cpu=0.25, dt=10)
    core.advance(counters, node=n, cpu=0.75, dt=10)
    # Each cpu's seconds: kube-prometheus's rule over these 20 s reads 1 - 10/20.
    assert counters.user == pytest.approx(10.0)
    assert counters.idle == pytest.approx(10.0)
    assert 1 - counters.idle / 20 == pytest.approx(0.5)


def test_a_fractional_node_has_one_cpu_label_per_started_core_and_saturates_at_one() -> None:
    n, _ = core.node_from_body(node(cpu="1500m"))
    assert core.cpus(n) == 2
    counters = core.NodeCounters()
    core.advance(counters, node=n, cpu=1.4, dt=2)
    assert counters.idle == 0.0
    assert counters.user == pytest.approx(2.0)


def test_receive_bytes_follow_every_core_on_eth0_the_pods_cores_on_veth_and_not_lo() -> None:
    n, _ = core.node_from_body(node(cpu="4"))
    counters = core.NodeCounters()
    core.advance(counters, node=n, cpu=0.5, dt=3, pod_cores=0.5)
    assert counters.rx_bytes["eth0"] == pytest.approx(3 * 2 * core.RX_BYTES_PER_CORE)
    assert counters.rx_bytes["veth0"] == pytest.approx(3 * 0.5 * core.RX_BYTES_PER_CORE)
    assert counters.rx_bytes["lo"] == pytest.approx(3 * core.LO_RX_BYTES)


@pytest.mark.parametrize(
    ("cni", "devices"),
    [
        ("veth", {"veth0"}),
        ("calico", {"cali0"}),
        ("cilium", {"lxc0"}),
        ("flannel", {"veth0", "cni0"}),
    ],
)
def test_the_cnis_devices_carry_the_pods_traffic_again(cni: str, devices: set[str]) -> None:
    body = node(cpu="4")
    body["metadata"]["annotations"][core.NODE_CNI] = cni
    n, problems = core.node_from_body(body)
    assert not problems
    counters = core.NodeCounters()
    core.advance(counters, node=n, cpu=0.5, dt=1, pod_cores=1.0)
    assert set(counters.rx_bytes) == {"eth0", "lo", *devices}
    for device in devices:
        assert counters.rx_bytes[device] == pytest.approx(core.RX_BYTES_PER_CORE)


def test_an_unknown_cni_is_reported_and_taken_as_plain_veth() -> None:
    body = node(cpu="4")
    body["metadata"]["annotations"][core.NODE_CNI] = "weave"
    n, problems = core.node_from_body(body)
    assert n.cni == "veth"
    assert len(problems) == 1 and core.NODE_CNI in problems[0]


@pytest.mark.parametrize(
    ("cpu", "waiting"), [(0.3, 0.0), (0.6, 0.0), (0.8, 0.5), (1.0, 1.0), (1.4, 1.0)]
)
def test_cpu_pressure_counts_waiting_seconds_only_past_its_onset(
    cpu: float, waiting: float
) -> None:
    n, _ = core.node_from_body(node(cpu="4"))
    counters = core.NodeCounters()
    core.advance(counters, node=n, cpu=cpu, dt=10)
    assert counters.cpu_waiting == pytest.approx(10 * waiting)


def test_the_node_exporter_endpoint_labels_series_by_instance_as_node_exporter_does() -> None:
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1", cpu="2", memory="1000", background_cpu="0.5", ip="10.0.0.7")])
    m.tick(T0)
    m.tick(T0 + 4)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    # Scraped 2 s after the last tick: the counters carry on at its rate (6 s half idle: 3 s).
    registry.register(loadmodel.NodeExporterCollector(m, clock=lambda: T0 + 6))
    text = prometheus_client.generate_latest(registry).decode()
    assert 'node_cpu_seconds_total{cpu="1",instance="10.0.0.7:9100",mode="idle"} 3.0' in text
    assert 'node_cpu_seconds_total{cpu="1",instance="10.0.0.7:9100",mode="user"} 3.0' in text
    assert 'cpu="2"' not in text
    assert 'node_memory_MemTotal_bytes{instance="10.0.0.7:9100"} 1000.0' in text
    assert 'node_memory_MemAvailable_bytes{instance="10.0.0.7:9100"} 1000.0' in text
    assert 'node_network_receive_bytes_total{device="lo",instance="10.0.0.7:9100"}' in text
    # 6 s at 0.5, under the pressure onset: no waiting yet, but the series is there.
    assert 'node_pressure_cpu_waiting_seconds_total{instance="10.0.0.7:9100"} 0.0' in text
    # Nothing collides with the load model's own gauges, nor carries their node label.
    assert "node_cpu_utilisation" not in text
    assert 'node="' not in text


def test_a_node_gone_loses_its_counters() -> None:
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1"), node("n2", ip="10.0.0.2")])
    m.tick(T0)
    m.nodes_listed([node("n2", ip="10.0.0.2")])
    m.tick(T0 + 1)
    assert set(m.counters) == {"n2"}


def test_a_scrape_between_ticks_never_reads_more_than_the_next_tick_counts() -> None:
    """The seconds grow at the rate the last tick sampled, the one the gauges show until
    the next tick, so a drop in utilisation never makes a counter go down (a reset)."""
    m = loadmodel.Model(seed=1, noise=0.0, service_time=0.05, record=None)
    m.nodes_listed([node("n1", cpu="2", background_cpu="0.9")])
    collector = loadmodel.NodeExporterCollector(m, clock=lambda: T0 + 1.99)
    m.tick(T0)
    m.tick(T0 + 1)

    def user() -> float:
        (family,) = [f for f in collector.collect() if f.name == "node_cpu_seconds"]
        return float(next(s.value for s in family.samples if s.labels["mode"] == "user"))

    before = user()  # just before the next tick, still at 0.9
    m.set_background("n1", 0.1, None)
    m.tick(T0 + 2)
    assert m.counters["n1"].user >= before
    assert m.counters["n1"].user == pytest.approx(2 * 0.9)
