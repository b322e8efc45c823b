"""The explain table: a decision a person reads at a glance."""

from __future__ import annotations

import pytest

from metricsched.core import explain, model

UNREACHABLE = model.QueryErrorKind.UNREACHABLE


@pytest.fixture
def web_latency(make_policy, make_metric):
    return make_policy(
        "web-latency",
        metrics=[
            make_metric("latency", threshold_max=0.5, tolerance_percent=0.0),
            make_metric("cpu", tolerance_percent=0.0),
        ],
        burst_penalty=5.0,
    )


@pytest.fixture
def five_nodes(make_node, make_cluster, now):
    """node-5 took a pod a moment ago; node-9 is cordoned."""
    return make_cluster(
        make_node("node-3"),
        make_node("node-5", recent_binds=[now - 3]),
        make_node("node-7"),
        make_node("node-8"),
        make_node("node-9", unschedulable=True),
    )


@pytest.fixture
def scored_decision(web_latency, five_nodes, make_pod, make_view, schedule):
    view = make_view(
        web_latency,
        {
            "latency": {"node-3": 0.12, "node-5": 0.2, "node-7": 0.5, "node-8": 0.9},
            "cpu": {"node-3": 0.35, "node-5": 0.16},
        },
    )
    return schedule(pod=make_pod(), snapshot=five_nodes, policies=[web_latency], metrics=view)


def rows_of(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[lines.index("") + 1 :]


def test_header_lines_name_pod_policy_outcome_and_message(scored_decision):
    text = explain.render(scored_decision, policy_metrics=["latency", "cpu"])
    header = text.splitlines()[:4]
    assert header[0].split() == ["Pod:", "shop/web-7d4"]
    assert header[1].split() == ["Policy:", "shop/web-latency"]
    assert header[2].split() == ["Outcome:", "Bind", "→", scored_decision.node]
    assert header[3].startswith("Message:") and scored_decision.message in header[3]
    assert "Fallback:" not in text


def test_winner_is_marked_and_listed_first_then_feasible_by_score_then_infeasible(
    scored_decision,
):
    table = rows_of(explain.render(scored_decision, policy_metrics=["latency", "cpu"]))
    assert table[0].split() == ["NODE", "FEASIBLE", "REASON", "LATENCY", "CPU", "BURST", "SCORE"]
    assert [row.split()[:2] for row in table[1:]] == [
        ["*", "node-5"],
        ["node-3", "yes"],
        ["node-7", "yes"],
        ["node-8", "no"],
        ["node-9", "no"],
    ]


def test_metric_cells_show_value_and_score_for_feasible_nodes_and_value_for_others(
    scored_decision,
):
    table = rows_of(explain.render(scored_decision, policy_metrics=["latency", "cpu"]))
    winner, _, missing_cpu, over_threshold, cordoned = table[1:]
    assert winner.split()[-4:] == ["0.2→79", "0.16→100", "1", "84"]
    assert missing_cpu.split()[-4:] == ["0.5→0", "missing→50", "0", "25"]
    assert "node(s) exceeded threshold latency > 0.5" in over_threshold
    assert over_threshold.split()[-4:] == ["0.9", "-", "0", "-"]
    assert "node(s) were unschedulable" in cordoned


def test_columns_line_up(scored_decision):
    table = rows_of(explain.render(scored_decision, policy_metrics=["latency", "cpu"]))
    header = table[0]
    for column in ("FEASIBLE", "LATENCY", "CPU", "BURST", "SCORE"):
        start = header.index(column)
        for row in table[1:]:
            assert row[start - 2 : start] == "  "  # every column starts after a gap
            assert row[start] != " "


def test_fallback_reason_is_shown_in_the_header(
    web_latency, five_nodes, make_pod, make_view, schedule
):
    view = make_view(web_latency, {}, errors={"latency": (UNREACHABLE, "connection refused")})
    decision = schedule(pod=make_pod(), snapshot=five_nodes, policies=[web_latency], metrics=view)

    text = explain.render(decision, policy_metrics=["latency", "cpu"])

    assert "Fallback: Prometheus unreachable: connection refused" in text.splitlines()


def test_default_policy_is_named_as_such(five_nodes, make_pod, schedule):
    decision = schedule(pod=make_pod(), snapshot=five_nodes)
    text = explain.render(decision, policy_metrics=[])
    assert text.splitlines()[1].split() == ["Policy:", "default", "policy"]
    assert rows_of(text)[0].split() == ["NODE", "FEASIBLE", "REASON", "BURST", "SCORE"]


def test_rows_beyond_the_limit_are_counted_not_shown(scored_decision):
    table = rows_of(explain.render(scored_decision, policy_metrics=["latency"], max_rows=2))
    assert len(table) == 1 + 2 + 1
    assert table[-1] == "... 3 more node(s) not shown"


def test_long_reasons_are_cut():
    decision = model.Decision(
        pod=model.PodKey("shop/web-1"),
        policy=None,
        outcome=model.Outcome.UNSCHEDULABLE,
        node=None,
        fallback_reason="",
        verdicts=(
            model.NodeVerdict(
                node=model.NodeName("node-1"),
                feasible=False,
                reason="x" * 200,
                metrics=(),
                burst_count=0,
                score=0.0,
            ),
        ),
        message="0/1 nodes are available: 1 x.",
    )
    row = rows_of(explain.render(decision, policy_metrics=[]))[1]
    assert "x" * (explain.MAX_REASON_WIDTH - 3) + "..." in row
    assert "x" * explain.MAX_REASON_WIDTH not in row


def test_skipped_pod_says_no_node_was_evaluated(make_pod, make_cluster, schedule):
    decision = schedule(pod=make_pod(node_name="node-1"), snapshot=make_cluster())
    text = explain.render(decision, policy_metrics=[])
    assert "Outcome: Skip" in text
    assert text.endswith("(no node was evaluated)\n")
