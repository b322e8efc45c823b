"""The load model's cAdvisor-shaped series: per-container counters that integrate each pod's
modelled usage, split over its containers, beside the pod's own cgroup series; and
kube-state-metrics' kube_pod_info, which the recording rules take each pod's node from."""

from __future__ import annotations

from typing import Any

import prometheus_client
import pytest

from tests.unit.load_model.conftest import core, loadmodel, node, pod

T0 = 1_000_000.0
MI = 2**20


def model(*, noise: float = 0.0, seed: int = 1) -> Any:
    return loadmodel.Model(seed=seed, noise=noise, service_time=0.05, record=None)


def scrape(m: Any, at: float) -> dict[tuple[str, str, str], float]:
    """container_cpu_usage_seconds_total at ``at``, by (namespace, pod, container)."""
    return {
        (s.labels["namespace"], s.labels["pod"], s.labels["container"]): s.value
        for s in samples(m, at, "container_cpu_usage_seconds_total")
    }


def samples(m: Any, at: float, metric: str) -> list[Any]:
    collector = loadmodel.CadvisorCollector(m, clock=lambda: at)
    return [s for f in collector.collect() for s in f.samples if s.name == metric]


def two_containers(name: str, **kwargs: Any) -> dict[str, Any]:
    """A pod of containers app (300m, 96Mi) and log (100m, 32Mi)."""
    body = pod(name, **kwargs)
    body["spec"]["containers"] = [
        {
            "name": "app",
            "image": "registry.invalid/app:1",
            "resources": {"requests": {"cpu": "300m", "memory": "96Mi"}},
        },
        {
            "name": "log",
            "image": "registry.invalid/log:1",
            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
        },
    ]
    return body


def fixed(cpu: str, memory: str = "128Mi") -> dict[str, str]:
    return {core.POD_CPU: cpu, core.POD_MEMORY: memory, core.POD_RAMP: "0"}


# --- the counters -------------------------------------------------------------------------


def test_a_rate_over_two_scrapes_is_the_pods_modelled_usage() -> None:
    m = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("0.5")), T0)
    scrapes = {}
    for i in range(12):
        m.tick(T0 + i)
        # Scrapes between ticks, as Prometheus's fall: the counters carry on at the last
        # tick's rate, so the rate is exact, not off by where the scrapes fell.
        if i in (3, 8):
            scrapes[i] = scrape(m, T0 + i + 0.4 + i / 20)[("ns", "a", "app")]
    assert (scrapes[8] - scrapes[3]) / (5 + 5 / 20) == pytest.approx(0.5)


def test_with_noise_a_rate_is_the_mean_of_the_usage_the_ticks_modelled_in_between() -> None:
    m = model(noise=0.03, seed=5)
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("1")), T0)
    modelled, scraped = [], []
    for i in range(11):
        m.tick(T0 + i)
        modelled.append(m.pod_counters["uid-a"].cpu)
        scraped.append(scrape(m, T0 + i)[("ns", "a", "app")])
    # The usage a tick samples holds until the next tick.
    assert (scraped[10] - scraped[0]) / 10 == pytest.approx(sum(modelled[:10]) / 10)
    assert len(set(modelled)) > 5


def test_the_counters_never_go_down_between_scrapes_even_when_usage_drops() -> None:
    # Noise of ±50 %: the usage often falls by half or more from one tick to the next.
    m = model(noise=0.5)
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations=fixed("0.5")), T0)
    values, drops = [], 0
    for i in range(40):
        m.tick(T0 + i)
        drops += m.pod_counters["uid-a"].cpu < 0.5 * 0.75
        values.append(scrape(m, T0 + i)[("ns", "a", "")])
        values.append(scrape(m, T0 + i + 0.99)[("ns", "a", "")])  # just before the next tick
    assert drops > 5
    assert values == sorted(values)


def test_memory_is_the_working_set_now_as_a_gauge() -> None:
    m = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(pod("a", annotations={**fixed("0.5", "256Mi"), core.POD_RAMP: "10"}), T0)
    m.tick(T0 + 5)
    (half,) = [
        s.value
        for s in samples(m, T0 + 5, "container_memory_working_set_bytes")
        if s.labels["container"] == "app"
    ]
    assert half == pytest.approx(128 * MI)


def test_a_pod_gone_and_its_series_are_gone_as_cadvisor_drops_them() -> None:
    m = model()
    m.nodes_listed([node("n1")])
    m.pod_seen(pod("a"), T0)
    m.tick(T0)
    assert scrape(m, T0)
    m.pod_gone(pod("a"), T0 + 1)
    m.tick(T0 + 2)
    assert scrape(m, T0 + 2) == {}
    assert m.pod_counters == {}


# --- containers and the pod's own series -----------------------------------------------


def test_a_pods_usage_is_split_over_its_containers_by_their_requests() -> None:
    m = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(two_containers("a", annotations=fixed("0.8", "512Mi")), T0)
    m.tick(T0)
    m.tick(T0 + 10)
    got = scrape(m, T0 + 10)
    assert got[("ns", "a", "app")] == pytest.approx(6.0)  # 3/4 of 0.8 cores for 10 s
    assert got[("ns", "a", "log")] == pytest.approx(2.0)
    memory = {
        s.labels["container"]: s.value
        for s in samples(m, T0 + 10, "container_memory_working_set_bytes")
    }
    assert memory == {"app": 384 * MI, "log": 128 * MI, "": 512 * MI}


def test_the_pod_level_series_holds_all_its_containers_so_container_filters_matter() -> None:
    m = model()
    m.nodes_listed([node("n1", cpu="4")])
    m.pod_seen(two_containers("a", annotations=fixed("0.8")), T0)
    m.tick(T0)
    m.tick(T0 + 10)
    got = scrape(m, T0 + 10)
    containers = got[("ns", "a", "app")] + got[("ns", "a", "log")]
    assert got[("ns", "a", "")] == pytest.approx(containers)
    # sum by (pod) without container!="" reads twice the pod's usage, as on a real cluster.
    assert sum(v for (_, p, _), v in got.items() if p == "a") == pytest.approx(2 * 8.0)


@pytest.mark.parametrize(
    ("resources", "shares"),
    [
        # No requests: evenly.
        ([{}, {}], [0.5, 0.5]),
        # Limits stand for requests where none is stated, as the API server defaults them.
        ([{"limits": {"cpu": "3"}}, {"requests": {"cpu": "1"}}], [0.75, 0.25]),
        # Only one requests cpu: it gets all of it.
        ([{"requests": {"cpu": "100m"}}, {}], [1.0, 0.0]),
    ],
)
def test_shares_follow_requests_else_limits_else_are_even(
    resources: list[dict[str, Any]], shares: list[float]
) -> None:
    body = pod("a")
    body["spec"]["containers"] = [
        {"name": f"c{i}", "image": "i", "resources": r} for i, r in enumerate(resources)
    ]
    containers, problems = core.containers_of(body)
    assert [c.cpu_share for c in containers] == pytest.approx(shares)
    assert problems == []


def test_sidecars_run_beside_the_containers_and_other_init_containers_do_not() -> None:
    body = pod("a")
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "i", "resources": {"requests": {"cpu": "1"}}},
        {
            "name": "proxy",
            "image": "i",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "100m"}},
        },
    ]
    containers, _ = core.containers_of(body)
    assert {c.name: c.cpu_share for c in containers} == pytest.approx({"proxy": 0.5, "app": 0.5})


def test_an_unreadable_request_counts_as_nothing_and_is_reported() -> None:
    body = two_containers("a")
    body["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "lots"
    containers, problems = core.containers_of(body)
    assert [c.cpu_share for c in containers] == [1.0, 0.0]
    assert len(problems) == 1 and "'log'" in problems[0]


# --- labels -----------------------------------------------------------------------------


def test_series_carry_cadvisors_labels_and_the_node_and_kubelet_instance() -> None:
    m = model()
    m.nodes_listed([node("n1", ip="10.0.0.7")])
    m.pod_seen(pod("a"), T0)
    m.tick(T0)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(loadmodel.CadvisorCollector(m, clock=lambda: T0))
    lines = prometheus_client.generate_latest(registry).decode().splitlines()
    assert "# TYPE container_cpu_usage_seconds_total counter" in lines
    assert "# TYPE container_memory_working_set_bytes gauge" in lines
    assert (
        'container_cpu_usage_seconds_total{container="app",image="unknown",instance="10.0.0.7:10250",'
        'namespace="ns",node="n1",pod="a"} 0.0'
    ) in lines
    assert (
        'container_cpu_usage_seconds_total{container="",image="",instance="10.0.0.7:10250",'
        'namespace="ns",node="n1",pod="a"} 0.0'
    ) in lines


def test_pods_on_nodes_that_are_not_modelled_have_no_kubelet_but_have_pod_info() -> None:
    m = model()
    m.nodes_listed([node("n1")])
    body = pod("a", node="elsewhere")
    body["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "web-5d8f", "controller": True, "uid": "u"}
    ]
    m.pod_seen(body, T0)
    m.pod_seen(pod("b"), T0)
    m.tick(T0)
    assert {p for (_, p, _) in scrape(m, T0)} == {"b"}
    (family,) = loadmodel.KubeStateMetricsCollector(m).collect()
    assert [(s.name, s.labels, s.value) for s in family.samples] == [
        (
            "kube_pod_info",
            {
                "namespace": "ns",
                "pod": "a",
                "uid": "uid-a",
                "node": "elsewhere",
                "created_by_kind": "ReplicaSet",
                "created_by_name": "web-5d8f",
            },
            1.0,
        ),
        (
            "kube_pod_info",
            {
                "namespace": "ns",
                "pod": "b",
                "uid": "uid-b",
                "node": "n1",
                "created_by_kind": "",
                "created_by_name": "",
            },
            1.0,
        ),
    ]
