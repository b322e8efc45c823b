"""The recording rules the recipes assume: the copy in docs/using.md is the one the test
bed's Prometheus loads (hack/prometheus-rules.yml), but for the rate window."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[3]
TEST_BED_WINDOW = "[30s]"


def documented_rules() -> dict[str, object]:
    text = (ROOT / "docs" / "using.md").read_text()
    section = text.split("## Recipes for real metric sources", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```yaml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    rules: dict[str, object] = yaml.safe_load(blocks[0])
    return rules


def test_the_documented_rules_are_the_test_beds_with_kube_prometheus_window() -> None:
    test_bed = (ROOT / "hack" / "prometheus-rules.yml").read_text()
    assert TEST_BED_WINDOW in test_bed
    as_real_stacks_have_them = yaml.safe_load(test_bed.replace(TEST_BED_WINDOW, "[5m]"))
    assert documented_rules() == as_real_stacks_have_them


def test_every_recipe_example_is_named_in_the_docs() -> None:
    text = (ROOT / "docs" / "using.md").read_text()
    for name in (
        "node-exporter-cpu-memory-policy.yaml",
        "dcgm-gpu-policy.yaml",
        "network-traffic-policy.yaml",
        "cpu-pressure-policy.yaml",
        "cpu-forecast-policy.yaml",
        "price-annotation-policy.yaml",
        "metrics-server-cpu-memory-policy.yaml",
    ):
        assert (ROOT / "manifests" / "examples" / name).exists()
        assert f"`{name}`" in text
