"""fit_error_message: kube-scheduler's "0/N nodes are available: ..." text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from metricsched.core import profile
from tests.unit.filters.conftest import node_reasons

TAINT = "node(s) had untolerated taint(s)"


def test_designs_example_reasons_come_out_in_go_sort_order():
    # DESIGN.md lists these unsorted; kube-scheduler sorts the "<count> <reason>" strings.
    reasons = {
        "n1": ("Insufficient cpu",),
        "n2": ("Insufficient cpu",),
        "n3": (TAINT,),
    }
    extra = {"node(s) exceeded threshold latency > 0.5": 3}
    assert profile.fit_error_message(6, reasons, extra) == (
        "0/6 nodes are available: 1 node(s) had untolerated taint(s), "
        "2 Insufficient cpu, 3 node(s) exceeded threshold latency > 0.5."
    )


def test_entries_are_sorted_as_strings_like_go_sort_strings():
    reasons = {f"n{i}": ("Insufficient cpu",) for i in range(10)}
    reasons["x"] = ("Insufficient memory",)
    reasons["y"] = ("Insufficient memory",)
    # "10 Insufficient cpu" sorts before "2 Insufficient memory" as a string.
    assert profile.fit_error_message(12, reasons) == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient memory."
    )


def test_each_reason_of_a_node_is_counted():
    reasons = {"n1": ("Insufficient cpu", "Insufficient memory"), "n2": ("Insufficient memory",)}
    assert profile.fit_error_message(2, reasons) == (
        "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."
    )


def test_feasible_nodes_add_nothing():
    reasons = {"n1": (), "n2": ("Too many pods",)}
    assert profile.fit_error_message(2, reasons) == "0/2 nodes are available: 1 Too many pods."


def test_extra_counts_merge_with_filter_counts_of_the_same_reason():
    message = profile.fit_error_message(3, {"n1": ("Insufficient cpu",)}, {"Insufficient cpu": 2})
    assert message == "0/3 nodes are available: 3 Insufficient cpu."


def test_pre_filter_reason_replaces_the_counts():
    reasons = {"n1": ("pod affinity terms conflict",), "n2": ("pod affinity terms conflict",)}
    message = profile.fit_error_message(2, reasons, pre_filter_msg="pod affinity terms conflict")
    assert message == "0/2 nodes are available: pod affinity terms conflict."


def test_empty_cluster_says_no_nodes_are_available():
    assert profile.fit_error_message(0, {}) == "no nodes available to schedule pods"


def test_nothing_to_report_ends_like_kube_scheduler():
    assert profile.fit_error_message(1, {"n1": ()}) == "0/1 nodes are available:"


def test_message_agrees_with_run_filters_output(pod, node, cluster):
    snapshot = cluster(
        nodes=[
            node("n1", cpu="100m"),
            node("n2", cpu="100m"),
            node("n3", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ]
    )
    verdicts = node_reasons(pod(cpu="1"), snapshot)
    assert profile.fit_error_message(len(snapshot.nodes), verdicts) == (
        "0/3 nodes are available: 1 " + TAINT + ", 2 Insufficient cpu."
    )


reason_texts = st.sampled_from(["Insufficient cpu", "Insufficient memory", TAINT, "Too many pods"])


@given(
    reasons=st.dictionaries(
        st.text(min_size=1, max_size=5), st.lists(reason_texts, max_size=3).map(tuple), max_size=8
    )
)
def test_counts_in_the_message_add_up_to_the_reasons_given(reasons):
    message = profile.fit_error_message(max(len(reasons), 1), reasons)
    body = message.split(":", 1)[1].strip().rstrip(".")
    entries = [entry for entry in body.split(", ") if entry]
    assert sum(int(entry.split(" ", 1)[0]) for entry in entries) == sum(
        len(r) for r in reasons.values()
    )
    assert entries == sorted(entries)
