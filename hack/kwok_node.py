"""A simulated node's body: what kwok needs to take a Node over, written once.

hack/cluster.py starts kwok with ``--manage-nodes-with-annotation-selector=SELECTOR``: kwok
keeps the Nodes that carry ``ANNOTATION`` Ready and runs their pods. Every simulated node
the cluster, the demo, the benchmarks and the test suites create is a ``Node``'s body: that
annotation, the hostname and ``type: kwok`` labels, and allocatable equal to capacity;
what a node adds (labels, annotations, taints, addresses) is its caller's.

hack's scripts import it from beside them (``import kwok_node``), bench and tests as
``hack.kwok_node``. Standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

ANNOTATION: Final = "kwok.x-k8s.io/node"
VALUE: Final = "fake"
SELECTOR: Final = f"{ANNOTATION}={VALUE}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Node:
    """A Node kwok manages: its name, ``capacity`` (also its allocatable), the ``labels``
    and ``annotations`` it adds, its ``spec`` and ``addresses`` (type -> address, in
    order; none: no ``status.addresses``)."""

    name: str
    capacity: Mapping[str, str]
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    addresses: Mapping[str, str] | None = None

    def body(self) -> dict[str, Any]:
        """The Node as the API takes it (fresh dictionaries: a caller may change them)."""
        status: dict[str, Any] = {
            "capacity": dict(self.capacity),
            "allocatable": dict(self.capacity),
        }
        if self.addresses is not None:
            status["addresses"] = [
                {"type": kind, "address": address} for kind, address in self.addresses.items()
            ]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, "type": "kwok", **self.labels},
                "annotations": {ANNOTATION: VALUE, **self.annotations},
            },
            "spec": dict(self.spec),
            "status": status,
        }
