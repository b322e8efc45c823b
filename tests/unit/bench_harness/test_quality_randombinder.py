"""The random binder's fit check (bench/quality/randombinder.py): random among the nodes
kube-scheduler's NodeResourcesFit and nodeSelector would accept."""

from __future__ import annotations

from typing import Any

from bench.quality import randombinder, scenarios


def room(cpu_m: int = 4000, memory: int = 16 * 2**30, *, modelled: bool = True) -> Any:
    labels = {scenarios.MODELLED_LABEL: "true"} if modelled else {}
    return randombinder.Room(labels, cpu_m, memory, 110)


def pod(cpu: str = "500m", memory: str = "256Mi") -> dict[str, Any]:
    event = scenarios.PodEvent(0.0, "p", "web", 0.1, 10.0, None)
    body = scenarios.pod_body(event, "bench-random")
    body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
    return body


def test_requests_sum_cpu_in_millicores_and_memory_in_bytes() -> None:
    assert randombinder.requests(pod("1.5", "1Gi")) == (1500, 2**30)


def test_a_pod_fits_a_node_with_room_for_its_requests() -> None:
    assert randombinder.fits(room(), (3500, 0, 0), pod("500m"))
    assert not randombinder.fits(room(), (3501, 0, 0), pod("500m"))


def test_a_full_node_by_pod_count_or_memory_does_not_fit() -> None:
    assert not randombinder.fits(room(), (0, 0, 110), pod())
    assert not randombinder.fits(room(memory=2**28), (0, 2**27, 0), pod(memory="200Mi"))


def test_a_node_outside_the_pods_node_selector_does_not_fit() -> None:
    assert not randombinder.fits(room(modelled=False), (0, 0, 0), pod())
