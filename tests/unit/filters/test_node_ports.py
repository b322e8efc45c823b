"""NodePorts: a host port is taken for its protocol on overlapping host IPs."""

from __future__ import annotations

import pytest

from metricsched.core import model
from metricsched.core.plugins import node_ports
from tests.unit.filters.conftest import node_reasons, plugin_reason

TAKEN = "node(s) didn't have free ports for the requested pod ports"


def port(number: int, *, protocol: str = "TCP", host_ip: str = "") -> dict[str, object]:
    found: dict[str, object] = {"containerPort": number, "hostPort": number, "protocol": protocol}
    if host_ip:
        found["hostIP"] = host_ip
    return found


@pytest.fixture
def node_with_port(node, pod, cluster):
    """A node n1 on which a bound pod holds the given host port."""

    def make(held: dict[str, object]) -> model.NodeState:
        holder = pod("holder", node_name="n1", host_ports=[held])
        return cluster(nodes=[node("n1")], pods=[holder]).nodes[model.NodeName("n1")]

    return make


@pytest.mark.parametrize(
    ("held", "wanted", "free"),
    [
        (port(80), port(80), False),
        (port(80), port(81), True),
        (port(80), port(80, protocol="UDP"), True),
        (port(53, protocol="UDP"), port(53, protocol="UDP"), False),
        (port(80, protocol="SCTP"), port(80, protocol="SCTP"), False),
        (port(80, host_ip="10.0.0.1"), port(80, host_ip="10.0.0.1"), False),
        (port(80, host_ip="10.0.0.1"), port(80, host_ip="10.0.0.2"), True),
        (port(80, host_ip="10.0.0.1"), port(80), False),  # wanted on all addresses
        (port(80), port(80, host_ip="10.0.0.2"), False),  # held on all addresses
        (port(80, host_ip="0.0.0.0"), port(80, host_ip="10.0.0.2"), False),
    ],
)
def test_host_port_conflicts(pod, node_with_port, held, wanted, free):
    verdict = plugin_reason(node_ports, pod(host_ports=[wanted]), node_with_port(held))
    assert verdict == ("" if free else TAKEN)


def test_pod_without_host_ports_fits_a_node_full_of_them(pod, node_with_port):
    assert plugin_reason(node_ports, pod(), node_with_port(port(80))) == ""


def test_one_taken_port_of_several_is_enough_to_reject(pod, node_with_port):
    wanted = pod(host_ports=[port(8080), port(80)])
    assert plugin_reason(node_ports, wanted, node_with_port(port(80))) == TAKEN


def test_sidecar_host_ports_count_as_held(pod, container, node, cluster):
    holder = pod(
        "holder",
        node_name="n1",
        init_containers=[container("proxy", restart_policy="Always", ports=[port(15001)])],
    )
    snapshot = cluster(nodes=[node("n1")], pods=[holder])
    verdicts = node_reasons(pod(host_ports=[port(15001)]), snapshot)
    assert verdicts["n1"] == (TAKEN,)


def test_ports_of_a_finished_pod_are_free_again(pod, node, cluster):
    done = pod("done", node_name="n1", host_ports=[port(80)], phase="Succeeded")
    snapshot = cluster(nodes=[node("n1")], pods=[done])
    assert node_reasons(pod(host_ports=[port(80)]), snapshot)["n1"] == ()
