"""The chart's PrometheusRule: the alerts as helm renders them, run by ``promtool test rules``.

The rule group is rendered with the pinned helm (release ``metricsched`` in namespace
``metricsched``, so the series selector is the one the chart's ServiceMonitor gives), written
beside the promtool test files of tests/unit/chart/alerts/, and each file's input series
must fire, or not fire, each alert as it says. promtool is Debian's ``prometheus`` package
(``make deps``); every alert names only series the operator exports.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import chart_helpers as ch
import pytest
import yaml

from metricsched.edges import observe

RUNBOOK = "https://github.com/metricsched/metricsched/blob/main/docs/operating.md"
PLAIN_RULES = ch.ROOT / "manifests" / "alerts" / "metricsched-rules.yaml"
ALERT_TESTS = sorted((Path(__file__).parent / "alerts").glob("*_test.yaml"))
ALERTS = {
    "MetricschedNoLeader",
    "MetricschedPolicyOnFallback",
    "MetricschedMetricsStale",
    "MetricschedPendingPodTooOld",
    "MetricschedBacklogGrowing",
    "MetricschedPrometheusErrors",
    "MetricschedBindingFailures",
    "MetricschedShadowDrops",
    "MetricschedRebalanceStuck",
    "MetricschedKubeletRejections",
}
# Only with the webhook on (webhook.enabled): the promtool tests render it so.
WEBHOOK = "webhook.enabled=true"
WEBHOOK_ALERTS = {"MetricschedWebhookFailOpen", "MetricschedWebhookErrors"}


def _promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if found is None:
        pytest.skip("promtool is missing: `make deps` installs Debian's prometheus package")
    return found


def _rule(*sets: str) -> ch.Manifest:
    return ch.one(ch.render("prometheusRule.enabled=true", *sets), "PrometheusRule")


def _rules_file(directory: Path, *sets: str) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": _rule(WEBHOOK, *sets)["spec"]["groups"]}))
    return path


def _alerts(rule: ch.Manifest) -> dict[str, dict[str, object]]:
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def test_the_rule_is_off_by_default_and_every_alert_is_on_with_it() -> None:
    assert "PrometheusRule" not in ch.kinds(ch.render())
    assert set(_alerts(_rule())) == ALERTS


def test_the_webhook_alerts_come_with_the_webhook() -> None:
    assert set(_alerts(_rule(WEBHOOK))) == ALERTS | WEBHOOK_ALERTS
    off = _rule(
        WEBHOOK,
        "prometheusRule.alerts.webhookFailOpen.enabled=false",
        "prometheusRule.alerts.webhookErrors.enabled=false",
    )
    assert set(_alerts(off)) == ALERTS


def test_the_fail_open_alert_reads_the_api_servers_count_for_our_webhook_only() -> None:
    rule = _rule(WEBHOOK, 'prometheusRule.alerts.webhookFailOpen.apiserverSelector=job="kas"')
    expr = str(_alerts(rule)["MetricschedWebhookFailOpen"]["expr"])
    webhook = ch.one(ch.render(WEBHOOK), "MutatingWebhookConfiguration")
    (name,) = [w["name"] for w in webhook["webhooks"]]
    assert f'apiserver_admission_webhook_fail_open_count{{job="kas",name="{name}"}}' in expr


def test_the_fail_open_alert_counts_both_webhook_entries_with_the_pod_opt_in() -> None:
    sets = (WEBHOOK, "webhook.podOptIn.enabled=true")
    expr = str(_alerts(_rule(*sets))["MetricschedWebhookFailOpen"]["expr"])
    webhook = ch.one(ch.render(*sets), "MutatingWebhookConfiguration")
    names = [w["name"] for w in webhook["webhooks"]]
    assert len(names) == 2
    assert f'job="apiserver",name=~"{"|".join(names)}"' in expr


def test_promtool_accepts_the_rendered_rules(tmp_path: Path) -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(_rules_file(tmp_path))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(ALERTS | WEBHOOK_ALERTS)} rules found" in out.stdout


@pytest.mark.parametrize("tests", ALERT_TESTS, ids=lambda p: p.name.removesuffix("_test.yaml"))
def test_each_alert_fires_on_its_series_and_only_on_them(tests: Path, tmp_path: Path) -> None:
    _rules_file(tmp_path)
    shutil.copy(tests, tmp_path / tests.name)
    out = subprocess.run(
        [_promtool(), "test", "rules", tests.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_promtool_test_that_fires_it() -> None:
    fired = set()
    for path in ALERT_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                if case.get("exp_alerts"):
                    fired.add(case["alertname"])
    assert fired == ALERTS | WEBHOOK_ALERTS


def test_the_alerts_read_only_metrics_the_operator_exports() -> None:
    exported = set(
        re.findall(r"^# TYPE (\S+) ", observe.Metrics().exposition().decode(), re.MULTILINE)
    )
    counters = {n.removesuffix("_total") for n in exported}
    used = {
        name
        for alert in _alerts(_rule(WEBHOOK)).values()
        for name in re.findall(r"\bmetricsched_\w+", str(alert["expr"]))
    }
    assert used
    assert {
        n for n in used if n not in exported and n.removesuffix("_total") not in counters
    } == set()


def test_every_alert_links_its_runbook_entry_by_an_absolute_url() -> None:
    runbook = (ch.ROOT / "docs" / "operating.md").read_text()
    headings = {
        m.lower() for m in re.findall(r"^#+\s+`?(Metricsched\w+)`?\s*$", runbook, re.MULTILINE)
    }
    for name, alert in _alerts(_rule(WEBHOOK)).items():
        annotations = alert["annotations"]
        assert isinstance(annotations, dict)
        assert annotations["runbook_url"] == f"{RUNBOOK}#{name.lower()}"
        assert name.lower() in headings, f"no runbook entry for {name}"


def test_thresholds_durations_labels_and_the_selector_are_values() -> None:
    rule = _rule(
        "prometheusRule.labels.release=kube-prometheus-stack",
        "prometheusRule.alertLabels.team=platform",
        'prometheusRule.selector=job="sched"',
        "prometheusRule.runbookUrl=https://git.example.com/docs/operating.md",
        "prometheusRule.alerts.pendingPodTooOld.minutes=30",
        "prometheusRule.alerts.policyOnFallback.for=15m",
        "prometheusRule.alerts.noLeader.severity=page",
        "prometheusRule.alerts.shadowDrops.enabled=false",
    )
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = _alerts(rule)
    assert "MetricschedShadowDrops" not in alerts
    assert alerts["MetricschedPendingPodTooOld"]["expr"].endswith("> 30 * 60")
    assert alerts["MetricschedPolicyOnFallback"]["for"] == "15m"
    assert alerts["MetricschedNoLeader"]["labels"] == {"severity": "page", "team": "platform"}
    for alert in alerts.values():
        assert 'metricsched_leader{job="sched"}' in alert["expr"] or "{job=" in alert["expr"]
        assert str(alert["annotations"]["runbook_url"]).startswith("https://git.example.com/")


def test_every_aggregation_keeps_the_cluster_and_namespace_labels() -> None:
    for name, alert in _alerts(_rule(WEBHOOK)).items():
        expr = str(alert["expr"])
        aggregations = re.findall(r"\b(?:max|min|sum)\b(?: by \(([^)]*)\))?", expr)
        assert aggregations, name
        for by in aggregations:
            kept = {label.strip() for label in by.split(",")}
            if name == "MetricschedWebhookFailOpen":
                # The API server's series: its namespace is not ours; the alert says ours.
                assert kept == {"cluster"}
                assert alert["labels"] == {"severity": "warning", "namespace": "metricsched"}
            else:
                assert {"cluster", "namespace"} <= kept, f"{name}: by ({by})"


def test_the_cluster_label_is_a_value() -> None:
    renamed = _alerts(_rule("prometheusRule.clusterLabel=k8s_cluster"))
    expr = str(renamed["MetricschedNoLeader"]["expr"])
    assert expr.startswith("max by (k8s_cluster, namespace) (metricsched_leader{")
    expr = str(_alerts(_rule("prometheusRule.clusterLabel="))["MetricschedShadowDrops"]["expr"])
    assert expr.startswith("sum by (namespace) (increase(")


def test_no_alert_fires_at_its_first_evaluation() -> None:
    for name, alert in _alerts(_rule(WEBHOOK)).items():
        assert re.fullmatch(r"([0-9]+(ms|s|m|h|d|w|y))+", str(alert["for"])), name
        assert not re.fullmatch(r"(0+(ms|s|m|h|d|w|y))+", str(alert["for"])), name


def test_the_plain_rules_file_is_the_charts_rules() -> None:
    out = subprocess.run(
        [sys.executable, str(ch.ROOT / "hack" / "alert-rules.py"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert PLAIN_RULES.read_text() == out.stdout, "run `make alert-rules`"
    plain = yaml.safe_load(PLAIN_RULES.read_text())
    chart = _rule(WEBHOOK, 'prometheusRule.selector=job="metricsched"')["spec"]["groups"]
    assert plain == {"groups": chart}
    assert {r["alert"] for g in plain["groups"] for r in g["rules"]} == ALERTS | WEBHOOK_ALERTS


def test_promtool_accepts_the_plain_rules_file() -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(PLAIN_RULES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(ALERTS | WEBHOOK_ALERTS)} rules found" in out.stdout


@pytest.mark.parametrize(
    "bad",
    [
        "prometheusRule.alerts.noLeader.for=1 minute",
        "prometheusRule.alerts.bindingFailures.for=0m",
        "prometheusRule.alerts.webhookFailOpen.for=0s",
        "prometheusRule.runbookUrl=docs/operating.md",
        "prometheusRule.clusterLabel=cluster-name",
        "prometheusRule.alerts.prometheusErrors.ratio=2",
        "prometheusRule.alerts.pendingPodTooOld.minutes=0",
        "prometheusRule.alerts.bindingFailures.ignoredResults={Bound}",
        "prometheusRule.alerts.noLeaderr.for=1m",
        "prometheusRule.alerts.backlogGrowing.window=10 minutes",
    ],
)
def test_alert_values_outside_the_schema_are_refused(bad: str) -> None:
    assert "values don't meet the specifications of the schema" in ch.render_error(
        "prometheusRule.enabled=true", bad
    )
