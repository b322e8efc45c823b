"""Recipes for real metric sources (manifests/examples/), against the real Prometheus.

The test bed serves series shaped as the real exporters serve them: hack/loadmodel.py's
node-exporter endpoint (job "node-exporter": node_cpu_seconds_total, node_memory_*_bytes,
node_network_receive_bytes_total per device of the node's CNI,
node_pressure_cpu_waiting_seconds_total, all labelled instance="<InternalIP>:9100") under
kube-prometheus's recording rules (hack/prometheus-rules.yml), and hack/exporter.py's
DCGM_FI_* fields labelled Hostname, one series per GPU. Each test applies the example
as written (only its pods are the test's own) and checks that the pod lands where the
metric says. The forecast recipe's PromQL is tested by promtool on synthetic series
instead (tests/unit/load_model/test_forecast_recipe.py): its windows need minutes of
history, which a test's seconds-old nodes do not have.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Cluster, pod_body, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    condition,
    wait_bound,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.pools import Pool

EXAMPLES = Path(__file__).parents[3] / "manifests" / "examples"
PREFIX = "loadmodel.metricsched.io/"


def example(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return body


class NodeExporterPool(Pool):
    """kwok nodes the load model serves, each with an InternalIP (node-exporter's instance
    is "<InternalIP>:9100") and a background cpu and memory load."""

    def __init__(
        self,
        cluster: Cluster,
        backgrounds: list[tuple[float, float]],
        cnis: list[str] | None = None,
    ) -> None:
        super().__init__(cluster, size=len(backgrounds))
        self.backgrounds = backgrounds
        self.cnis = cnis
        subnet = random.randrange(1, 250)
        self.ips = [f"10.251.{subnet}.{i + 1}" for i in range(self.size)]

    def node_body(self, index: int) -> dict[str, Any]:
        body = super().node_body(index)
        cpu, memory = self.backgrounds[index]
        capacity = {**body["status"]["capacity"], "cpu": "4", "memory": "16Gi"}
        body["status"] |= {"capacity": capacity, "allocatable": dict(capacity)}
        body["status"]["addresses"].insert(0, {"type": "InternalIP", "address": self.ips[index]})
        body["metadata"]["labels"][PREFIX + "modelled"] = "true"
        body["metadata"]["annotations"] |= {
            PREFIX + "background-cpu": str(cpu),
            PREFIX + "background-memory": str(memory),
        }
        if self.cnis is not None:
            body["metadata"]["annotations"][PREFIX + "cni"] = self.cnis[index]
        return body

    def instance(self, index: int) -> str:
        return f"{self.ips[index]}:9100"


@pytest.fixture
def pools(cluster: Cluster, namespace: str) -> Iterator[list[Pool]]:
    made: list[Pool] = []
    yield made
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for pool in made:
        pool.delete()


def wait_values(
    cluster: Cluster, query: str, label: str, ok: Callable[[dict[str, float]], bool]
) -> dict[str, float]:
    """Wait until ``query``'s values, by ``label``, satisfy ``ok``; return them."""

    def check() -> dict[str, float]:
        got = {s["metric"].get(label): float(s["value"][1]) for s in cluster.promql(query)}
        if not ok(got):
            raise AssertionError(f"got {got}")  # wait_for reports the last one
        return got

    return wait_for(query, check, timeout=90)


def near(want: dict[str, float], tol: float) -> Callable[[dict[str, float]], bool]:
    return lambda got: all(k in got and abs(got[k] - v) <= tol for k, v in want.items())


def place(cluster: Cluster, namespace: str, pool: Pool, policy: dict[str, Any], name: str) -> str:
    """Apply the example's spec, wait for its metrics, create one pod it selects, return
    the node it was bound to."""
    spec = policy["spec"]
    apply_policy(cluster, namespace, policy["metadata"]["name"], spec)
    got = wait_for(
        "the policy's metrics available",
        lambda: (
            (p := wait_policy_refreshed(cluster, namespace, policy["metadata"]["name"]))
            and condition(p, "MetricsAvailable").get("status") == "True"
            and p
        ),
        timeout=60,
    )
    assert got
    labels = dict(spec["podSelector"]["matchLabels"])
    cluster.core.create_namespaced_pod(
        namespace, pod_body(name, labels=labels, spec=pool.pod_spec())
    )
    return wait_bound(cluster, namespace, name)


def test_kube_prometheus_node_cpu_and_memory_rules_place_the_pod_on_the_idle_node(
    cluster: Cluster, operator: OperatorProcess, namespace: str, pools: list[Pool]
) -> None:
    # (cpu, memory) background: the middle node is idlest by cpu; the first is over 0.8.
    pool = NodeExporterPool(cluster, [(0.85, 0.1), (0.2, 0.5), (0.5, 0.3)])
    pools.append(pool)
    pool.create()
    instances = [pool.instance(i) for i in range(pool.size)]
    # The recording rules read the load model's utilisation back out of the counters.
    # (The test bed's rule rates over [30s], not [5m]: hack/prometheus-rules.yml says why.)
    wait_values(
        cluster,
        'instance:node_cpu_utilisation:rate5m{job="node-exporter"}',
        "instance",
        near(dict(zip(instances, [0.85, 0.2, 0.5], strict=True)), 0.01),
    )
    wait_values(
        cluster,
        'instance:node_memory_utilisation:ratio{job="node-exporter"}',
        "instance",
        near(dict(zip(instances, [0.1, 0.5, 0.3], strict=True)), 0.01),
    )
    policy = example("node-exporter-cpu-memory-policy.yaml")
    assert place(cluster, namespace, pool, policy, "api-0") == pool.names[1]


def test_network_traffic_recipe_counts_the_nics_not_the_cni_devices_the_stock_rule_counts(
    cluster: Cluster, operator: OperatorProcess, namespace: str, pools: list[Pool]
) -> None:
    # The load model's eth0 traffic follows every core in use, the CNI's devices (cali0 on
    # Calico, lxc0 on Cilium, veth0 + cni0 on Flannel) the cores the pods use, lo is the
    # same everywhere. On the NICs: 0.5 x 4 = 2.0 cores' worth on the Calico node, 0.6 x 4
    # = 2.4 on the Flannel node, and 0.1 x 4 + 1.2 (a pod) = 1.6 on the Cilium node, the
    # quietest. Counting its lxc0 as well (kube-prometheus's excluding-lo rule) makes it
    # 2.8, the busiest.
    pool = NodeExporterPool(
        cluster, [(0.5, 0.1), (0.1, 0.1), (0.6, 0.1)], cnis=["calico", "cilium", "flannel"]
    )
    pools.append(pool)
    pool.create()
    calico, cilium, flannel = (pool.instance(i) for i in range(3))
    talker = pod_body("talker", spec={**pool.pod_spec(), "nodeName": pool.names[1]})
    talker["metadata"]["annotations"] = {PREFIX + "cpu": "1.2", PREFIX + "ramp": "1"}
    cluster.core.create_namespaced_pod(namespace, talker)
    # The stock rule would send the pod to the Calico node: its 30 s windows are full once
    # the pod has run that long, and then the Cilium node reads 2.8 : 2.0.
    stock = "instance:node_network_receive_bytes_excluding_lo:rate5m"
    wait_values(
        cluster,
        stock,
        "instance",
        lambda got: (
            all(i in got for i in (calico, cilium, flannel))
            and got[cilium] > got[flannel] > got[calico] > 0
            and got[cilium] / got[calico] == pytest.approx(2.8 / 2.0, rel=0.1)
        ),
    )
    policy = example("network-traffic-policy.yaml")
    query = policy["spec"]["metrics"][0]["prometheus"]["query"]
    # The recipe's [1m] window is not full yet, so rate() reads the nodes low, the pod's
    # traffic (younger than the nodes) the most: the order is what holds.
    got = wait_values(
        cluster,
        query,
        "instance",
        lambda got: (
            all(i in got for i in (calico, cilium, flannel))
            and got[flannel] > got[calico] > got[cilium] > 0
        ),
    )
    assert got[flannel] / got[calico] == pytest.approx(2.4 / 2.0, rel=0.1)
    assert place(cluster, namespace, pool, policy, "ingest-0") == pool.names[1]


def test_cpu_pressure_recipe_keeps_the_pod_off_nodes_where_tasks_wait_for_a_cpu(
    cluster: Cluster, operator: OperatorProcess, namespace: str, pools: list[Pool]
) -> None:
    # The load model's PSI: none up to 0.6 utilisation, then rising to all of the time at
    # 1.0. At 0.95 tasks wait 87.5 % of the time, at 0.8 50 %, at 0.65 12.5 %.
    pool = NodeExporterPool(cluster, [(0.95, 0.1), (0.8, 0.1), (0.65, 0.1)])
    pools.append(pool)
    pool.create()
    policy = example("cpu-pressure-policy.yaml")
    query = policy["spec"]["metrics"][0]["prometheus"]["query"]
    # rate() reads young nodes low by the same factor: the ratios are what hold.
    wait_values(
        cluster,
        query,
        "instance",
        lambda got: (
            all(pool.instance(i) in got for i in range(3))
            and got[pool.instance(2)] > 0
            and got[pool.instance(0)] / got[pool.instance(2)] == pytest.approx(7, rel=0.1)
            and got[pool.instance(1)] / got[pool.instance(2)] == pytest.approx(4, rel=0.1)
        ),
    )
    assert place(cluster, namespace, pool, policy, "frontend-0") == pool.names[2]


def test_dcgm_recipe_judges_a_node_by_its_gpus_mean_use_and_its_hottest_gpu(
    cluster: Cluster, operator: OperatorProcess, namespace: str, pools: list[Pool]
) -> None:
    pool = Pool(cluster, size=3)
    pools.append(pool)
    pool.create()
    a, b, c = pool.names
    # Node a: the idlest GPUs, but one of them runs hot: ruled out by its hottest GPU (its
    # mean, 75 degrees, would let it pass). Node b: one GPU at 20 % (the idlest GPU
    # anywhere but a's) and one at 80 %, 50 % on average. Node c: four GPUs at 35 % on
    # average. The pod goes to c: by the mean, not by the idlest GPU.
    util = {f"{a}/0": 10.0, f"{a}/1": 10.0, f"{b}/0": 20.0, f"{b}/1": 80.0}
    util |= {f"{c}/{i}": u for i, u in enumerate([30.0, 40.0, 35.0, 35.0])}
    temp = {f"{a}/0": 60.0, f"{a}/1": 90.0, f"{b}/0": 60.0, f"{b}/1": 62.0}
    temp |= {f"{c}/{i}": t for i, t in enumerate([70.0, 72.0, 71.0, 75.0])}
    try:
        cluster.set_metric("DCGM_FI_DEV_GPU_UTIL", util)
        cluster.set_metric("DCGM_FI_DEV_GPU_TEMP", temp)
        per_gpu = "count by (Hostname) (DCGM_FI_DEV_GPU_TEMP)"
        wait_values(cluster, per_gpu, "Hostname", near({a: 2, b: 2, c: 4}, 0))
        policy = example("dcgm-gpu-policy.yaml")
        assert place(cluster, namespace, pool, policy, "trainer-0") == c
    finally:
        for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"):
            for key in util:
                with contextlib.suppress(Exception):
                    cluster.delete_metric(metric, key)


def test_price_annotation_recipe_picks_the_cheapest_node(
    cluster: Cluster, operator: OperatorProcess, namespace: str, pools: list[Pool]
) -> None:
    policy = example("price-annotation-policy.yaml")
    key = policy["spec"]["metrics"][0]["nodeAnnotation"]
    pool = Pool(cluster, size=3)
    pools.append(pool)
    pool.create()
    for node, price in zip(pool.names, ["0.30", "0.12", "0.20"], strict=True):
        cluster.core.patch_node(node, {"metadata": {"annotations": {key: price}}})
    spec = policy["spec"]
    apply_policy(cluster, namespace, policy["metadata"]["name"], spec)
    labels = dict(spec["podSelector"]["matchLabels"])
    cluster.core.create_namespaced_pod(
        namespace, pod_body("batch-0", labels=labels, spec=pool.pod_spec())
    )
    assert wait_bound(cluster, namespace, "batch-0") == pool.names[1]
