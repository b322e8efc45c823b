"""The placement-quality report's tables, targets, headline and README splice
(bench/quality/report.py), from a hand-made results file."""

from __future__ import annotations

from typing import Any

from bench.quality import report
from bench.quality import systems as qsys


def trial(key: str, system: str, **figures: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "scenario": key,
        "system": system,
        "bound": 300,
        "pods": 300,
        "unplaced": 0,
        "node_seconds_above_80": 100.0,
        "node_seconds_above_100": 10.0,
        "fraction_above_80": 0.1,
        "hottest_max": 1.1,
        "hottest_end_of_burst": 1.0 if key == "a" else None,
        "hottest_end_of_burst_node": "q-01" if key == "a" else None,
        "stddev_mean": 0.2,
        "overruns": 12,
        "binds": 300,
        "latency_p50_s": 0.1,
        "latency_p99_s": 1.0,
        "utilisation_mean": 0.5,
        "wait_ms": {"p99": 1500.0},
    }
    return base | figures


def results() -> dict[str, Any]:
    trials = [trial(k, qsys.KUBE) for k in ("a", "b")]
    trials += [
        trial(
            k,
            qsys.ESTIMATE,
            node_seconds_above_80=10.0,
            overruns=0,
            latency_p99_s=0.5,
            hottest_end_of_burst=0.8 if k == "a" else None,
        )
        for k in ("a", "b")
    ]
    trials.append({"scenario": "a", "system": qsys.RANDOM, "error": "TimeoutError()"})
    backlog = [
        {
            "system": qsys.ESTIMATE,
            "rep": 0,
            "bound": 400,
            "pods": 400,
            "throughput": {"pods_per_s": 95.0},
        },
        {
            "system": qsys.NO_ESTIMATE,
            "rep": 0,
            "bound": 400,
            "pods": 400,
            "throughput": {"pods_per_s": 100.0},
        },
    ]
    return {
        "plan": "full",
        "started": "2026-11-26 05:00:00 UTC",
        "trials": trials,
        "backlog": backlog,
    }


def test_each_system_is_a_row_and_a_harness_error_says_so() -> None:
    table = report.scenario_table(results(), "a")
    assert table[2].startswith(f"| {qsys.SYSTEMS[qsys.KUBE].label} | 300/300 (0)")
    assert "1.00 (q-01)" in table[2]
    assert any("harness error: TimeoutError()" in line for line in table)


def test_targets_hold_when_estimate_on_beats_kube_scheduler_by_the_issues_margins() -> None:
    rows = {text: ok for text, _, ok in report.target_rows(results())}
    assert all(ok is True for ok in rows.values()), rows


def test_a_target_fails_when_the_backlog_is_more_than_ten_percent_slower() -> None:
    r = results()
    r["backlog"][0]["throughput"]["pods_per_s"] = 89.0
    rows = {text: ok for text, _, ok in report.target_rows(r)}
    assert rows["backlog binds/s, estimate on within 10 % of off"] is False


def test_a_target_without_its_trials_is_not_judged() -> None:
    r = results()
    r["trials"] = [t for t in r["trials"] if t["system"] != qsys.KUBE]
    rows = {text: ok for text, _, ok in report.target_rows(r)}
    assert rows["(a) node-s > 80 % ≤ 0.2x kube-scheduler's"] is None


def test_headline_compares_metricsched_with_kube_scheduler_per_scenario() -> None:
    lines = report.headline(results())
    assert "metricsched, estimate on vs kube-scheduler" in lines[0]
    assert lines[4].startswith("| (a) burst into skewed background | 10 vs 100 | 0 vs 12")
    assert len(lines) == 6


def test_splice_replaces_the_marked_section_or_goes_before_machine() -> None:
    readme = "# t\n\n## At scale\n\nx\n\n## Machine\n\n- cpus\n"
    once = report.splice(readme, "## Placement quality\n\nv1\n")
    assert once.index("v1") < once.index("## Machine")
    twice = report.splice(once, "## Placement quality\n\nv2\n")
    assert "v1" not in twice
    assert twice.count(report.BEGIN) == 1
    assert twice.endswith("## Machine\n\n- cpus\n")


def test_the_throughput_report_embeds_the_published_quality_section(
    tmp_path: Any, monkeypatch: Any
) -> None:
    from bench import report as bench_report

    (tmp_path / "quality.md").write_text("## Placement quality (issue 19)\n\nrows\n")
    monkeypatch.setattr(bench_report, "BENCH", tmp_path)
    text = bench_report.readme({"trials": []}, {"bound": "b", "cdf": "c", "cycle": "y"})
    assert text.index(report.BEGIN) < text.index("rows") < text.index(report.END)
    assert text.index(report.END) < text.index("## Machine")


def test_the_front_page_headline_is_replaced_between_its_markers() -> None:
    readme = "# x\n\n<!-- quality-headline -->\nold\n<!-- /quality-headline -->\n\nrest\n"
    once = report.splice_headline(readme, ["| a |", "| b |"])
    assert (
        once
        == "# x\n\n<!-- quality-headline -->\n| a |\n| b |\n<!-- /quality-headline -->\n\nrest\n"
    )
    assert report.splice_headline(once, ["new"]).count("| a |") == 0
    assert report.splice_headline("no markers\n", ["new"]) == "no markers\n"


def pair(*, on_above: float, evictions: int, moved: int, violations: int) -> dict[str, Any]:
    def one(system: str, above: float, rebalance: dict[str, Any]) -> dict[str, Any]:
        return trial(
            "c",
            system,
            after_hotspot={
                "since_s": 66.7,
                "node_seconds_above_80": above,
                "avoidable_node_seconds_above_80": above / 2,
                "per_hot_node": {"q-13": above},
            },
            rebalance=rebalance,
            rebalance_counters={
                'metricsched_rebalance_evictions_total{policy="q/x",result="Blocked"}': 3.0
            },
        )

    figures = {
        "evictions": evictions,
        "pods_moved": moved,
        "evictions_per_pod_moved": round(evictions / moved, 3) if moved else None,
        "budget_violations": violations,
        "most_down_at_once": 2,
    }
    return {
        "trials": [
            one(qsys.OWNED, 100.0, {**figures, "evictions": 0, "pods_moved": 0}),
            one(qsys.REBALANCE, on_above, figures),
        ]
    }


def test_the_rebalance_targets_read_the_pair_of_scenario_c() -> None:
    rows = report.rebalance_rows(pair(on_above=25.0, evictions=11, moved=10, violations=0))
    assert [ok for _, _, ok in rows] == [True, True, True, True]
    assert rows[0][1] == "25 vs 100 (0.25x)"
    rows = report.rebalance_rows(pair(on_above=40.0, evictions=12, moved=10, violations=1))
    assert [ok for _, _, ok in rows] == [False, False, False, False]


def test_the_rebalance_section_shows_only_with_the_pair() -> None:
    assert report.rebalance_section(results()) == []
    text = "\n".join(
        report.rebalance_section(pair(on_above=25.0, evictions=3, moved=3, violations=0))
    )
    assert "### Rebalancing (issue 23), scenario c" in text
    assert "| 3 (3) | 3 | 1.00 | 0 (2) |" in text
    noted = pair(on_above=25.0, evictions=3, moved=3, violations=0) | {"rebalance_note": "Why."}
    assert report.rebalance_section(noted)[-2] == "Why."
