"""metricsServer metrics against the real metrics API: the pinned metrics-server, behind
the API server's aggregation layer, scraping kwok's emulated kubelet resource metrics
(``hack/cluster.py metrics-server up``). No Prometheus involved."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import CLUSTER, Cluster, wait_for
from tests.e2e.scheduling.conftest import (
    OperatorProcess,
    apply_policy,
    wait_bound,
    wait_event,
)
from tests.e2e.scheduling.pools import Pool

HOT_CPU = "14"  # of 16 allocatable: utilisation 0.875, over the policy's 0.8


class ScrapedPool(Pool):
    """Pool nodes that metrics-server scrapes on kwok (hack/cluster.py says how)."""

    def node_body(self, index: int) -> dict[str, Any]:
        body = super().node_body(index)
        name = self.names[index]
        body["metadata"]["annotations"]["metrics.k8s.io/resource-metrics-path"] = (
            f"/metrics/nodes/{name}/metrics/resource"
        )
        body["status"]["addresses"].append({"type": "ExternalDNS", "address": "localhost"})
        return body


@pytest.fixture(scope="module")
def metrics_server(cluster: Cluster) -> Iterator[None]:
    subprocess.run([sys.executable, str(CLUSTER), "metrics-server", "up"], check=True)
    yield
    subprocess.run([sys.executable, str(CLUSTER), "metrics-server", "down"], check=False)


def node_cpu(cluster: Cluster, node: str) -> float | None:
    """The node's cpu usage in cores as metrics.k8s.io serves it (None: not yet)."""
    out = cluster.kubectl("get", "--raw", f"/apis/metrics.k8s.io/v1beta1/nodes/{node}", check=False)
    try:
        raw = str(json.loads(out)["usage"]["cpu"])
    except (ValueError, KeyError, TypeError):
        return None
    units = {"n": 1e-9, "u": 1e-6, "m": 1e-3}
    return float(raw[:-1]) * units[raw[-1]] if raw[-1] in units else float(raw)


def test_a_pod_goes_away_from_the_node_metrics_server_shows_over_the_threshold(
    cluster: Cluster, operator: OperatorProcess, namespace: str, metrics_server: None
) -> None:
    pool = ScrapedPool(cluster, size=2)
    pool.create()
    hot, cool = pool.names
    try:
        # Pods of another scheduler run on both nodes and use what kwok reads from their
        # annotations (metrics-server drops a node that reports no usage at all): 14 cores
        # on the hot node, far above the pod's request, half a core on the cool one.
        for pod, node, cpu in (("busy", hot, HOT_CPU), ("quiet", cool, "500m")):
            cluster.create_pod(
                namespace,
                pod,
                scheduler="default-scheduler",
                labels={"app": pod},
                spec={**pool.pod_spec(), "nodeName": node},
            )
            cluster.core.patch_namespaced_pod(
                pod, namespace, {"metadata": {"annotations": {"kwok.x-k8s.io/usage-cpu": cpu}}}
            )
        wait_for(
            "metrics-server to show both nodes' usage",
            lambda: (
                (cpu := node_cpu(cluster, hot)) is not None
                and cpu > 0.8 * 16
                and node_cpu(cluster, cool) is not None
            ),
            timeout=45,
        )
        apply_policy(
            cluster,
            namespace,
            "usage",
            {
                "podSelector": {"matchLabels": {"app": "web"}},
                "metrics": [
                    {
                        "name": "cpu",
                        "metricsServer": {"resource": "cpu"},
                        "goal": "Minimize",
                        "threshold": {"max": 0.8},
                        "onMissing": "Exclude",
                    }
                ],
                "fallback": {"strategy": "Wait"},
            },
        )
        cluster.create_pod(namespace, "web", labels={"app": "web"}, spec=pool.pod_spec())
        assert wait_bound(cluster, namespace, "web") == cool
        (scheduled,) = wait_event(cluster, namespace, "web", "Scheduled")
        assert f"to {cool} (policy {namespace}/usage:" in scheduled
        # The winner's value, read from metrics-server: the cool node's utilisation.
        found = re.search(r"\[cpu from metrics-server ([0-9.e+-]+) ", scheduled)
        assert found is not None, scheduled
        assert float(found.group(1)) < 0.8
        # A pod that may only go to the hot node is refused for its measured usage.
        cluster.create_pod(
            namespace,
            "pinned",
            labels={"app": "web"},
            spec={**pool.pod_spec(), "nodeSelector": {"kubernetes.io/hostname": hot}},
        )
        (refused,) = wait_event(cluster, namespace, "pinned", "FailedScheduling")
        assert "node(s) exceeded threshold cpu > 0.8" in refused
    finally:
        cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        pool.delete()
