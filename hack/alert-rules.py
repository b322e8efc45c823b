#!/usr/bin/env python3
"""Writes manifests/alerts/metricsched-rules.yaml, the alerts as a plain Prometheus rules file.

The one source of the alerts is the chart's PrometheusRule template; this renders it with
the pinned helm (`make tools`) for a Prometheus the chart does not manage: the webhook's
alerts included (they stay silent without the webhook), the series selected by
`job="metricsched"` (a scrape job of yours named so), and every other value the chart's
default. tests/unit/chart/test_alert_rules.py checks that the file is what this prints.

    hack/alert-rules.py            # rewrite the file (make alert-rules)
    hack/alert-rules.py --print    # print what it would write
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "manifests" / "chart" / "metricsched"
OUT = ROOT / "manifests" / "alerts" / "metricsched-rules.yaml"
SETS = (
    "prometheusRule.enabled=true",
    "webhook.enabled=true",
    'prometheusRule.selector=job="metricsched"',
)
HEADER = """\
# metricsched's alerts as a Prometheus rules file (`rule_files:`), for a Prometheus that the
# chart's PrometheusRule (prometheusRule.enabled) does not reach. Generated from that
# PrometheusRule by hack/alert-rules.py (make alert-rules): do not edit, change the chart.
# Before loading it, replace what is a chart value there (docs/operating.md, Alerts):
#   - job="metricsched": the label matchers of your scrape job of the operator's /metrics;
#   - runbook_url: https://github.com/metricsched/metricsched/... is a placeholder for the
#     copy of docs/operating.md your team reads;
#   - namespace: metricsched on MetricschedWebhookFailOpen: the operator's namespace;
#   - job="apiserver": your scrape job of the API server.
"""


def helm() -> Path:
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1]) / "helm"


def render() -> str:
    """The rules file's text: the chart's rule groups under a header."""
    args = [str(helm()), "template", "metricsched", str(CHART), "--namespace", "metricsched"]
    args += ["--show-only", "templates/prometheusrule.yaml"]
    for value in SETS:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    rule = yaml.safe_load(out.stdout)
    groups = {"groups": rule["spec"]["groups"]}
    return HEADER + yaml.safe_dump(groups, sort_keys=False, width=10_000, allow_unicode=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    text = render()
    if args.print:
        sys.stdout.write(text)
    else:
        OUT.write_text(text)
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
