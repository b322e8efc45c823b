"""The start-up LIST is handled a page at a time; a retry leaves no ghost of a failed one."""

from __future__ import annotations

import argparse
import json
from typing import Any

import kubernetes
import pytest

from metricsched import config as config_mod
from metricsched.runtime import operator as operator_mod


class _Raw:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


def _node(name: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str, rv: str, *, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {
            "schedulerName": "metricsched",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


class PagedApi:
    """LIST answers in pages of one item; ``fail_at`` makes that page of pods fail."""

    def __init__(
        self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], version: str
    ) -> None:
        self.nodes, self.pods, self.version = nodes, pods, version
        self.fail_at: int | None = None

    def _page(self, items: list[dict[str, Any]], cont: str | None) -> _Raw:
        index = int(cont or 0)
        more = str(index + 1) if index + 1 < len(items) else None
        return _Raw(
            {
                "metadata": {"resourceVersion": self.version, "continue": more},
                "items": items[index : index + 1],
            }
        )

    def list_node(self, *, _continue: str | None = None, **_: Any) -> _Raw:
        return self._page(self.nodes, _continue)

    def list_pod_for_all_namespaces(self, *, _continue: str | None = None, **_: Any) -> _Raw:
        if self.fail_at is not None and int(_continue or 0) == self.fail_at:
            raise OSError("connection reset")
        return self._page(self.pods, _continue)

    def list_cluster_custom_object(self, *_: Any, **__: Any) -> _Raw:
        return _Raw({"metadata": {"resourceVersion": self.version}, "items": []})

    def __getattr__(self, name: str) -> Any:  # namespaces, claims, volumes, ...: none
        return self.list_cluster_custom_object


def _operator(api: PagedApi) -> operator_mod.Operator:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    config = config_mod.from_args(parser.parse_args([]), {})
    op = operator_mod.Operator(
        config, kubernetes.client.ApiClient(kubernetes.client.Configuration())
    )
    op.api = api  # type: ignore[assignment]
    return op


def test_a_sync_handles_every_page() -> None:
    api = PagedApi(
        [_node("n1", "1"), _node("n2", "2")],
        [_pod("bound", "3", node="n1"), _pod("pending", "4")],
        "10",
    )
    op = _operator(api)
    op.initial_sync()
    assert sorted(n.name for n in op.cache.nodes()) == ["n1", "n2"]
    assert set(op.cache.pending) == {"uid-pending"}
    assert op.cache.snapshot(now=0.0).nodes["n1"].requested.milli_cpu == 1000


def test_a_retried_sync_drops_what_a_failed_attempt_saw_and_the_list_no_longer_has() -> None:
    api = PagedApi(
        [_node("n1", "1"), _node("gone-node", "2")],
        [_pod("gone-pending", "3"), _pod("gone-bound", "4", node="n1"), _pod("stays", "5")],
        "10",
    )
    op = _operator(api)
    api.fail_at = 2  # the first two pods were handled, the third page failed
    with pytest.raises(OSError):
        op.initial_sync()
    assert "uid-gone-pending" in op.cache.pending
    api.nodes, api.pods, api.version, api.fail_at = (
        [_node("n1", "1")],
        [_pod("stays", "5")],
        "20",
        None,
    )
    op.initial_sync()
    assert [n.name for n in op.cache.nodes()] == ["n1"]
    assert set(op.cache.pending) == {"uid-stays"}
    assert "uid-gone-pending" not in op.queue
    assert op.cache.snapshot(now=0.0).nodes["n1"].requested.milli_cpu == 0
