"""The load model answers placement, and a threshold holds during a burst (issue 19).

On the real control plane, the real Prometheus (scraping hack/loadmodel.py every
LOADMODEL_SCRAPE) and the operator: pods bound to modelled kwok nodes move those nodes'
``node_cpu_utilisation`` by the usage their annotations declare, whatever they request,
and show that usage per pod in the cAdvisor series kube-prometheus-stack records.

The burst test asserts the invariant of issue 19 with the policy's estimate on. To see it
fail with the estimate off, run it with another estimate (a JSON object, or ``omit`` to
leave the field out):

    METRICSCHED_E2E_BURST_ESTIMATE='{"from": "None"}' make e2e PYTEST_ARGS='-k burst -s'
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import LOADMODEL_SCRAPE, Cluster, pod_body, wait_for
from tests.e2e.scheduling.conftest import (
    METRICS_ONLY,
    REFRESH_S,
    OperatorProcess,
    apply_policy,
    event_messages,
    wait_policy_refreshed,
)
from tests.e2e.scheduling.pools import Pool

PREFIX = "loadmodel.metricsched.io/"
MODELLED = PREFIX + "modelled"
SCRAPE_S = float(LOADMODEL_SCRAPE.rstrip("s"))
# The load model's noise: ±3 % of each pod's usage per tick.
NOISE = 0.03

# --- modelled nodes ------------------------------------------------------------------------


class ModelledPool(Pool):
    """A pool of kwok nodes (cpu, background cpu fraction) that the load model serves."""

    def __init__(self, cluster: Cluster, shapes: list[tuple[str, float]]) -> None:
        super().__init__(cluster, size=len(shapes))
        self.shapes = shapes

    def node_body(self, index: int) -> dict[str, Any]:
        body = super().node_body(index)
        cpu, background = self.shapes[index]
        capacity = {**body["status"]["capacity"], "cpu": cpu}
        body["status"] |= {"capacity": capacity, "allocatable": dict(capacity)}
        body["metadata"]["labels"][MODELLED] = "true"
        body["metadata"]["annotations"][PREFIX + "background-cpu"] = str(background)
        return body

    def create(self) -> None:
        super().create()
        wait_for(
            "the load model to serve the pool's nodes",
            lambda: set(self.names) <= set(truth(self.cluster)),
            timeout=30,
        )


@pytest.fixture
def modelled(cluster: Cluster, namespace: str) -> Iterator[Callable[..., ModelledPool]]:
    pools: list[ModelledPool] = []

    def make(shapes: list[tuple[str, float]]) -> ModelledPool:
        pool = ModelledPool(cluster, shapes)
        pools.append(pool)
        pool.create()
        return pool

    yield make
    # The test's pods first: none may stay bound to a node that no longer exists.
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for pool in pools:
        pool.delete()


def usage_pod(
    pool: Pool, name: str, *, cpu: str, ramp: str, scheduler: str, requests: str = "50m"
) -> dict[str, Any]:
    body = pod_body(name, scheduler=scheduler, cpu=requests, spec=pool.pod_spec())
    body["metadata"]["annotations"] = {PREFIX + "cpu": cpu, PREFIX + "ramp": ramp}
    return body


# --- reading the load model and Prometheus -----------------------------------------------


def truth(cluster: Cluster) -> dict[str, dict[str, float]]:
    with urllib.request.urlopen(cluster.loadmodel_url + "/truth", timeout=5) as r:
        nodes: dict[str, dict[str, float]] = json.loads(r.read())["nodes"]
    return nodes


def prometheus_cpu(cluster: Cluster, names: list[str]) -> dict[str, float]:
    series = cluster.promql('node_cpu_utilisation{job="loadmodel"}')
    got = {s["metric"]["node"]: float(s["value"][1]) for s in series}
    return {n: got[n] for n in names if n in got}


def bind_records(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    records = []
    for line in cluster.loadmodel_record.read_text().splitlines():
        if f'"bind": "{namespace}/' in line:
            records.append(json.loads(line))
    return records


# --- (a) the load model answers placement -------------------------------------------------


def test_binding_pods_raises_the_nodes_cpu_utilisation_by_their_usage_in_prometheus(
    cluster: Cluster, namespace: str, modelled: Callable[..., ModelledPool]
) -> None:
    pool = modelled([("4", 0.2)])
    node = pool.names[0]
    before = cluster.wait_for_promql(
        f'node_cpu_utilisation{{job="loadmodel", node="{node}"}}',
        lambda got: got.get(node) == pytest.approx(0.2),
        timeout=3 * SCRAPE_S + 10,
    )[node]

    # Four pods that request 50m and use 0.5 cores each, and one whose usage annotation does
    # not parse: the load model logs it and counts the pod's requests (200m).
    bodies = [
        usage_pod(pool, f"busy-{i}", cpu="0.5", ramp="0", scheduler="nobody") for i in range(4)
    ]
    bodies.append(
        usage_pod(
            pool, "unreadable", cpu="uniform(banana)", ramp="0", scheduler="nobody", requests="200m"
        )
    )
    for body in bodies:
        cluster.core.create_namespaced_pod(namespace, body)
        assert cluster.post_binding(namespace, body["metadata"]["name"], node) == 201

    expected = 0.2 + (4 * 0.5 + 0.2) / 4  # 0.75
    wait_for(
        "the load model to count the five pods",
        lambda: (
            (t := truth(cluster)[node])["pods"] == 5
            and t["eventual_cpu"] == pytest.approx(expected)
        ),
        timeout=20,
    )
    # Noise: at most ±3 % of the 2.2 cores the pods use, over 4 cores.
    tolerance = NOISE * 2.2 / 4 + 0.005
    after = cluster.wait_for_promql(
        f'node_cpu_utilisation{{job="loadmodel", node="{node}"}}',
        lambda got: abs(got.get(node, 0) - expected) <= tolerance,
        timeout=3 * SCRAPE_S + 10,
    )[node]
    assert after - before == pytest.approx(expected - 0.2, abs=tolerance)

    # The same pods as the kubelets' cAdvisor shows them, through kube-prometheus-stack's
    # recording rule: each pod's usage (the unreadable one's requests) on its node.
    usage = {b["metadata"]["name"]: 0.5 for b in bodies} | {"unreadable": 0.2}
    rule = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate"
    query = f'sum by (pod, node) ({rule}{{namespace="{namespace}"}})'

    def per_pod() -> dict[str, tuple[str, float]] | None:
        got = {
            s["metric"]["pod"]: (s["metric"].get("node"), float(s["value"][1]))
            for s in cluster.promql(query)
        }
        # irate over two scrapes: the mean of their ticks' noise, within ±3 % of the usage.
        matches = set(got) == set(usage) and all(
            n == node and abs(v - usage[p]) <= NOISE * usage[p] + 0.001 for p, (n, v) in got.items()
        )
        return got if matches else None

    wait_for("cAdvisor's per-pod series in Prometheus", per_pod, timeout=3 * SCRAPE_S + 10)

    records = {r["bind"]: r for r in bind_records(cluster, namespace)}
    assert set(records) == {f"{namespace}/{b['metadata']['name']}" for b in bodies}
    assert all(r["node"] == node and r["scheduler"] == "nobody" for r in records.values())
    assert max(r["cpu_after"] for r in records.values()) == pytest.approx(expected)


# --- (b) the invariant: a burst leaves no node above the threshold -----------------------

# Four nodes of 4, 4, 8 and 16 cpu at 0.10-0.70 background: 12 cores of room under 0.8.
BURST_NODES = [("4", 0.10), ("4", 0.70), ("8", 0.10), ("16", 0.60)]
BURST_PODS = 20  # request 50m each, use uniform(0.3,0.5) cores: ≈ 8 cores in all
THRESHOLD = 0.8
SETTLE_S = 30
# The policy is manifests/examples/cpu-estimate-policy.yaml: its estimate is 400m per pod,
# settling in 30 s (checked here, since the test's waits depend on it).
EXAMPLE = yaml.safe_load(
    (Path(__file__).parents[3] / "manifests/examples/cpu-estimate-policy.yaml").read_text()
)
ESTIMATE_ON: dict[str, Any] = EXAMPLE["spec"]["metrics"][0]["estimate"]
assert ESTIMATE_ON["settleTime"] == f"{SETTLE_S}s"
assert EXAMPLE["spec"]["metrics"][0]["threshold"] == {"max": 0.8}


def burst_estimate() -> dict[str, Any] | None:
    """The estimate the burst policy declares: METRICSCHED_E2E_BURST_ESTIMATE (a JSON object,
    or ``omit`` for none), by default ESTIMATE_ON."""
    text = os.environ.get("METRICSCHED_E2E_BURST_ESTIMATE")
    if not text:
        return ESTIMATE_ON
    if text == "omit":
        return None
    estimate: dict[str, Any] = json.loads(text)
    return estimate


def burst_policy(estimate: dict[str, Any] | None) -> dict[str, Any]:
    """The example's spec with ``estimate`` in place of its own (None: none written)."""
    metric: dict[str, Any] = {
        k: v for k, v in EXAMPLE["spec"]["metrics"][0].items() if k != "estimate"
    }
    if estimate is not None:
        metric["estimate"] = estimate
    return {**EXAMPLE["spec"], "metrics": [metric], "kubeScores": METRICS_ONLY}


def settled(
    cluster: Cluster, namespace: str, names: list[str]
) -> tuple[frozenset[str], dict[str, dict[str, float]]] | None:
    """The bound pods and the load model's truth once every pod is bound or refused for the
    threshold, every ramp is done and Prometheus shows what the load model serves."""
    pods = cluster.pods(namespace, "app=burst")
    bound = frozenset(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))
    for p in pods:
        name = p["metadata"]["name"]
        if name not in bound and not refused_for_threshold(cluster, namespace, name):
            return None
    now = truth(cluster)
    if any(now[n]["ramping"] for n in names):
        return None
    seen = prometheus_cpu(cluster, names)
    # Prometheus holds a sample up to one scrape old; ticks differ by the noise only.
    if any(abs(seen.get(n, -1) - now[n]["cpu"]) > 0.05 for n in names):
        return None
    return bound, now


def refused_for_threshold(cluster: Cluster, namespace: str, pod: str) -> bool:
    messages = event_messages(cluster, namespace, pod, "FailedScheduling")
    return bool(messages) and f"exceeded threshold cpu > {THRESHOLD:g}" in messages[-1]


def test_a_burst_leaves_no_node_above_the_threshold_once_the_metrics_catch_up(
    cluster: Cluster,
    operator: OperatorProcess,
    namespace: str,
    modelled: Callable[..., ModelledPool],
) -> None:
    pool = modelled(BURST_NODES)
    names = pool.names
    backgrounds = {n: bg for n, (_, bg) in zip(names, BURST_NODES, strict=True)}
    cluster.wait_for_promql(
        'node_cpu_utilisation{job="loadmodel"}',
        lambda got: all(got.get(n) == pytest.approx(bg) for n, bg in backgrounds.items()),
        timeout=3 * SCRAPE_S + 10,
    )
    estimate = burst_estimate()
    apply_policy(cluster, namespace, "cpu", burst_policy(estimate))
    wait_policy_refreshed(cluster, namespace, "cpu")
    time.sleep(2 * REFRESH_S + 0.5)  # the operator has refreshed since every node reported

    for i in range(BURST_PODS):
        body = usage_pod(
            pool,
            f"burst-{i}",
            cpu="uniform(0.3,0.5)",
            ramp="uniform(5,10)",
            scheduler="metricsched",
        )
        body["metadata"]["labels"] = {"app": "burst"}
        cluster.core.create_namespaced_pod(namespace, body)

    # Settled: the same pods bound over one scrape and one refresh (no refresh that showed
    # room released more pods), every ramp done, Prometheus caught up with the load model.
    # While pods wait, also over the settle time: their estimates expire and they get a
    # chance at the room the samples show.
    last: list[frozenset[str]] = []

    def stable() -> tuple[frozenset[str], dict[str, dict[str, float]]] | None:
        state = settled(cluster, namespace, names)
        if state is None:
            last.clear()
            return None
        if last and last[0] == state[0]:
            return state
        last[:] = [state[0]]
        waiting = len(state[0]) < BURST_PODS
        time.sleep(SCRAPE_S + REFRESH_S + 1 + (SETTLE_S if waiting else 0))
        return None

    try:
        bound, now = wait_for("the burst to settle", stable, timeout=170, interval=1.0)
    except AssertionError as e:
        pods = cluster.pods(namespace, "app=burst")
        lost = [
            p["metadata"]["name"]
            for p in pods
            if not p["spec"].get("nodeName")
            and not refused_for_threshold(cluster, namespace, p["metadata"]["name"])
        ]
        raise AssertionError(f"{e}; neither bound nor refused for the threshold: {lost}") from e

    eventual = {n: round(now[n]["eventual_cpu"], 3) for n in names}
    binds = bind_records(cluster, namespace)
    per_node = {n: sum(1 for b in binds if b["node"] == n) for n in names}
    overruns = [b for b in binds if b["cpu_after"] > THRESHOLD]
    pending = BURST_PODS - len(bound)
    print(
        f"\nestimate={estimate} nodes(cpu, background)={BURST_NODES}\n"
        f"pods per node={per_node} pending={pending}\n"
        f"eventual cpu={eventual}\n"
        f"max cpu_after={max((b['cpu_after'] for b in binds), default=0):.3f} "
        f"overruns={len(overruns)}"
    )
    # Every bound pod was seen by the load model; none is lost (the others are refused for
    # the threshold, which settled() checked).
    assert {b["bind"] for b in binds} == {f"{namespace}/{p}" for p in bound}
    assert {n: u for n, u in eventual.items() if u > THRESHOLD} == {}, eventual
    assert [(b["bind"], b["node"], b["cpu_after"]) for b in overruns] == []
