"""Simulated nodes of a test's own: kwok nodes behind a label and a taint.

Tests that need nodes of a known shape, untouched by other tests' pods, create a pool and
delete it afterwards; pods enter it with ``Pool.pod_spec()``.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import kubernetes

from hack import kwok_node
from tests.e2e.conftest import Cluster, wait_for

POOL_LABEL = "metricsched.io/e2e-pool"


class Pool:
    """Simulated nodes reserved for one test by a label and a taint, deleted afterwards."""

    def __init__(
        self, cluster: Cluster, *, size: int, pods_capacity: dict[int, int] | None = None
    ) -> None:
        self.cluster = cluster
        self.id = uuid.uuid4().hex[:6]
        self.size = size
        self.names = [f"pool-{self.id}-{index}" for index in range(size)]
        self.pods_capacity = pods_capacity or {}

    def node_body(self, index: int) -> dict[str, Any]:
        capacity = {
            "cpu": "16",
            "memory": "64Gi",
            "pods": str(self.pods_capacity.get(index, 110)),
            "ephemeral-storage": "100Gi",
        }
        name = self.names[index]
        return kwok_node.Node(
            name=name,
            capacity=capacity,
            labels={POOL_LABEL: self.id},
            spec={"taints": [{"key": POOL_LABEL, "value": self.id, "effect": "NoSchedule"}]},
            addresses={"Hostname": name},
        ).body()

    def create(self) -> None:
        for index in range(self.size):
            self.cluster.core.create_node(self.node_body(index))

        def ready() -> bool:
            nodes = self.cluster.core.list_node(label_selector=f"{POOL_LABEL}={self.id}").items
            return len(nodes) == self.size and all(
                any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                and [t.key for t in n.spec.taints or []] == [POOL_LABEL]
                for n in nodes
            )

        wait_for("the pool's nodes Ready and untainted by the node controller", ready, timeout=60)

    def delete(self) -> None:
        for name in self.names:
            with contextlib.suppress(kubernetes.client.exceptions.ApiException):
                self.cluster.core.delete_node(name)

    def pod_spec(self) -> dict[str, Any]:
        return {
            "nodeSelector": {POOL_LABEL: self.id},
            "tolerations": [
                {"key": POOL_LABEL, "operator": "Equal", "value": self.id, "effect": "NoSchedule"}
            ],
        }
