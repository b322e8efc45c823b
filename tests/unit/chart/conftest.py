"""Fixtures of the chart tests: kubeconform with schemas made offline, once per session."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import chart_helpers as ch
import pytest


@pytest.fixture(scope="session")
def kubeconform_schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Strict JSON schemas: built-ins of the pinned Kubernetes, SchedulingPolicy from crds/."""
    out = tmp_path_factory.mktemp("kubeconform-schemas")
    subprocess.run(
        [sys.executable, str(ch.ROOT / "hack" / "kubeconform-schemas.py"), str(out)]
        + [str(p) for p in sorted((ch.ROOT / "crds").glob("*.yaml"))],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="session")
def kubeconform(kubeconform_schemas: Path) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """Run kubeconform -strict on manifests given as text; prometheus-operator's kinds
    (ServiceMonitor, PrometheusRule) and cert-manager's Certificate and Issuer are skipped."""
    binary = ch.tool("kubeconform")

    def run(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(binary),
                "-strict",
                "-summary",
                "-kubernetes-version",
                ch.K8S_VERSION,
                "-schema-location",
                str(kubeconform_schemas / "{{ .ResourceKind }}{{ .KindSuffix }}.json"),
                "-skip",
                "ServiceMonitor,PrometheusRule,Certificate,Issuer",
                "-",
            ],
            input=text,
            check=False,
            capture_output=True,
            text=True,
        )

    return run
