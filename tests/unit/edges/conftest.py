"""Fixtures of the edges' unit tests (the fakes themselves live in ``edges_fakes``)."""

from edges_fakes import (
    clock,
    fake_kube,
    fake_prometheus,
    metrics,
    run,
    source,
    three_nodes,
    writes_api,
)

__all__ = [
    "clock",
    "fake_kube",
    "fake_prometheus",
    "metrics",
    "run",
    "source",
    "three_nodes",
    "writes_api",
]
