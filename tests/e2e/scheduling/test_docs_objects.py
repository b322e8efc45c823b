"""Every YAML block of README.md and docs/*.md that is a Kubernetes object (it has
apiVersion and kind), and every manifest of manifests/examples/, is accepted by the test
bed's kube-apiserver:
``kubectl apply --dry-run=server`` (issue 20, deliverable 6), with the SchedulingPolicy CRD
installed, so the CRD's schema and CEL rules judge the policies the docs show.

What is adjusted before the dry run, and why:
- A namespaced object is applied in the test's own namespace: a block's ``shop`` need not
  exist on the test bed, and the check is of the object, not of where it would go.
- A placeholder (``<registry>``) is replaced by a value of its kind from PLACEHOLDERS; an
  object block with a placeholder not listed there fails, so that a new one is decided on.
- Kinds of APIs the test bed does not serve (the Prometheus Operator's and cert-manager's
  CRDs: NOT_SERVED) are skipped by name; the chart's copies of them are checked by
  kubeconform in ``make helm-lint``. Any other kind the server does not know fails.
A block that does not parse as YAML fails too: the docs show it as YAML.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import ROOT, Cluster

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?:yaml|yml)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")
PLACEHOLDERS = {
    "registry": "registry.example.com/team",
    "namespace": "default",
    "release": "metricsched",
}
NOT_SERVED = {"monitoring.coreos.com", "cert-manager.io"}


def object_blocks() -> list[tuple[str, str]]:
    """(page:line, text) of every YAML block with a document that has apiVersion and kind."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            block = match.group(1)
            if "apiVersion" not in block or "kind" not in block:
                continue
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", block))
    # The examples the docs point to are held to the same bar.
    for example in sorted((ROOT / "manifests" / "examples").glob("*.yaml")):
        found.append((str(example.relative_to(ROOT)), example.read_text()))
    return found


BLOCKS = object_blocks()


def test_the_docs_show_kubernetes_objects_at_all() -> None:
    # The check below would pass vacuously if the extraction broke.
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)


def substituted(value: Any) -> Any:
    """``value`` (a parsed document) with each placeholder in its strings replaced; comments
    are not looked at (``# kubectl ... <name>`` says how to use the object)."""
    if isinstance(value, dict):
        return {k: substituted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [substituted(v) for v in value]
    if not isinstance(value, str):
        return value
    unknown = sorted({m for m in PLACEHOLDER.findall(value) if m not in PLACEHOLDERS})
    assert not unknown, f"placeholders without a test value (add to PLACEHOLDERS): {unknown}"
    return PLACEHOLDER.sub(lambda m: PLACEHOLDERS[m.group(1)], value)


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_object_in_the_docs_passes_a_server_side_dry_run(
    cluster: Cluster, crd: None, namespace: str, where: str, block: str
) -> None:
    documents: list[Any] = [substituted(d) for d in yaml.safe_load_all(block)]
    objects = [d for d in documents if isinstance(d, dict) and "apiVersion" in d and "kind" in d]
    assert objects, f"{where}: mentions apiVersion and kind but holds no object"
    checked = 0
    for body in objects:
        group = str(body["apiVersion"]).rpartition("/")[0]
        if group in NOT_SERVED:
            continue
        meta = body.setdefault("metadata", {})
        if "namespace" in meta:
            meta["namespace"] = namespace
        out = cluster.kubectl(
            "apply",
            "--dry-run=server",
            f"--namespace={namespace}",
            "-f",
            "-",
            check=False,
            input=yaml.safe_dump(body),
        )
        assert "(server dry run)" in out, f"{where}: {body['kind']} rejected: {out}"
        checked += 1
    if not checked:
        pytest.skip(f"{where}: only kinds the test bed does not serve ({', '.join(NOT_SERVED)})")
