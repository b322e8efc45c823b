"""The load model's modules (hack/loadmodel_core.py, hack/loadmodel.py, hack/json_http.py,
hack/kube_sync.py),
loaded from their files (hack/ is not a package), and raw bodies of the kind its watches
receive."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _load(name: str, file: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "hack" / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("json_http", "json_http.py")  # hack/exporter.py and hack/loadmodel.py import this name
_load("kube_sync", "kube_sync.py")  # hack/loadmodel.py imports this name
core = _load("loadmodel_core", "loadmodel_core.py")  # hack/loadmodel.py imports this name
loadmodel = _load("hack_loadmodel", "loadmodel.py")


def pod(
    name: str,
    *,
    uid: str | None = None,
    node: str | None = "n1",
    cpu: str = "100m",
    memory: str = "64Mi",
    annotations: dict[str, Any] | None = None,
    phase: str = "Running",
    scheduler: str = "metricsched",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def node(
    name: str = "n1",
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    background_cpu: str | None = None,
    background_memory: str | None = None,
    ip: str | None = "10.0.0.1",
) -> dict[str, Any]:
    annotations = {}
    if background_cpu is not None:
        annotations[core.NODE_BACKGROUND_CPU] = background_cpu
    if background_memory is not None:
        annotations[core.NODE_BACKGROUND_MEMORY] = background_memory
    addresses = [{"type": "Hostname", "address": name}]
    if ip:
        addresses.insert(0, {"type": "InternalIP", "address": ip})
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": {"cpu": cpu, "memory": memory}, "addresses": addresses},
    }
