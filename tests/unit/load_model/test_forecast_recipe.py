"""The smoothing and forecast recipe (manifests/examples/cpu-forecast-policy.yaml): its
PromQL, evaluated by Prometheus's own engine (``promtool test rules``) over ten minutes of
the recorded cpu utilisation, 15 s apart, of three nodes: one rising steadily (cool now,
hot in ten minutes), one flat, one that spikes every minute (cool at the last reading).

An e2e test would need nodes with minutes of history: rate() reads a node younger than its
window busy, and a fit over those first readings slopes down, so a test's seconds-old
nodes cannot show it; the operator's side (any PromQL, a threshold, a weight) is the same
as every other recipe's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.unit.load_model import test_recording_rules as rules
from tests.unit.load_model.conftest import ROOT

RECORDED = "instance:node_cpu_utilisation:rate5m"
NODES = {
    # 0.30 rising 0.01 per 15 s: 0.70 at ten minutes, 1.10 ten minutes later.
    "rising:9100": "0.3+0.01x40",
    "flat:9100": "0.75x40",
    # 0.9 one reading in four, 0.2 at the last one.
    "spiky:9100": " ".join(["0.2 0.2 0.2 0.9"] * 10 + ["0.2"]),
}


def queries() -> dict[str, str]:
    policy = yaml.safe_load(
        (ROOT / "manifests" / "examples" / "cpu-forecast-policy.yaml").read_text()
    )
    return {m["name"]: m["prometheus"]["query"] for m in policy["spec"]["metrics"]}


def run(tmp_path: Path, exprs: list[dict[str, Any]]) -> None:
    series = [
        {"series": f'{RECORDED}{{instance="{i}", job="node-exporter"}}', "values": v}
        for i, v in NODES.items()
    ]
    test = {
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": exprs}],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    out = rules.subprocess.run(
        [rules._promtool(), "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_forecast_rules_out_the_node_heating_up_though_it_is_the_coolest_but_one_now(
    tmp_path: Path,
) -> None:
    threshold = 0.85  # the recipe's
    run(
        tmp_path,
        [
            {
                "expr": f"round({queries()['cpu-forecast']}, 0.01) > {threshold}",
                "eval_time": "10m",
                "exp_samples": [{"labels": '{instance="rising:9100"}', "value": 1.1}],
            },
            {
                # Now it reads 0.70, under the flat node's 0.75.
                "expr": f"round(max by (instance) ({RECORDED}), 0.01)",
                "eval_time": "10m",
                "exp_samples": [
                    {"labels": '{instance="flat:9100"}', "value": 0.75},
                    {"labels": '{instance="rising:9100"}', "value": 0.7},
                    {"labels": '{instance="spiky:9100"}', "value": 0.2},
                ],
            },
        ],
    )


def test_the_percentile_scores_the_spiky_node_by_its_spikes_not_its_last_reading(
    tmp_path: Path,
) -> None:
    run(
        tmp_path,
        [
            {
                # Its last reading, 0.2, is the lowest; its 90th percentile the highest.
                "expr": f"round({queries()['cpu-p90']}, 0.01) > 0.8",
                "eval_time": "10m",
                "exp_samples": [{"labels": '{instance="spiky:9100"}', "value": 0.9}],
            },
            {
                "expr": f"round({queries()['cpu-p90']}, 0.01) == 0.75",
                "eval_time": "10m",
                "exp_samples": [{"labels": '{instance="flat:9100"}', "value": 0.75}],
            },
        ],
    )
