"""NodeAffinity: spec.nodeSelector and required nodeSelectorTerms."""

from __future__ import annotations

import pytest

from metricsched.core.plugins import node_affinity
from tests.unit.filters.conftest import node_reasons, plugin_reason, pre_filter_refusal

MISMATCH = "node(s) didn't match Pod's node affinity/selector"
NOT_IN_PREFILTER_RESULT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def expression(key: str, operator: str, *values: str) -> dict[str, object]:
    found: dict[str, object] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def term(*expressions: dict[str, object], fields: tuple[dict[str, object], ...] = ()):
    found: dict[str, object] = {}
    if expressions:
        found["matchExpressions"] = list(expressions)
    if fields:
        found["matchFields"] = list(fields)
    return found


def test_pod_without_selector_or_affinity_fits_any_node(pod, node):
    assert plugin_reason(node_affinity.filtering, pod(), node()) == ""


def test_node_selector_must_match_every_label(pod, node):
    picky = pod(node_selector={"disk": "ssd", "zone": "a"})
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"disk": "ssd", "zone": "a"}))
        == ""
    )
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"disk": "ssd", "zone": "b"}))
        == MISMATCH
    )
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"disk": "ssd"})) == MISMATCH


def test_node_selector_with_empty_value_needs_the_label_present(pod, node):
    picky = pod(node_selector={"gpu": ""})
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"gpu": ""})) == ""
    assert plugin_reason(node_affinity.filtering, picky, node()) == MISMATCH


@pytest.mark.parametrize(
    ("requirement", "labels", "fits"),
    [
        (expression("zone", "In", "a", "b"), {"zone": "b"}, True),
        (expression("zone", "In", "a", "b"), {"zone": "c"}, False),
        (expression("zone", "In", "a"), {}, False),
        (expression("zone", "NotIn", "a"), {"zone": "b"}, True),
        (expression("zone", "NotIn", "a"), {"zone": "a"}, False),
        (expression("zone", "NotIn", "a"), {}, True),  # a missing label is not in the set
        (expression("gpu", "Exists"), {"gpu": ""}, True),
        (expression("gpu", "Exists"), {}, False),
        (expression("gpu", "DoesNotExist"), {}, True),
        (expression("gpu", "DoesNotExist"), {"gpu": "1"}, False),
        (expression("cores", "Gt", "8"), {"cores": "16"}, True),
        (expression("cores", "Gt", "8"), {"cores": "8"}, False),
        (expression("cores", "Gt", "8"), {"cores": "lots"}, False),
        (expression("cores", "Gt", "8"), {}, False),
        (expression("cores", "Lt", "8"), {"cores": "4"}, True),
        (expression("cores", "Lt", "8"), {"cores": "-4"}, True),
        (expression("cores", "Lt", "8"), {"cores": "16"}, False),
        (expression("cores", "Lt", "8"), {"cores": "1_0"}, False),  # Go's ParseInt refuses it
    ],
)
def test_match_expression_operators(pod, node, requirement, labels, fits):
    picky = pod(node_affinity=[term(requirement)])
    assert (plugin_reason(node_affinity.filtering, picky, node(labels=labels)) == "") is fits


def test_expressions_of_one_term_are_anded(pod, node):
    picky = pod(node_affinity=[term(expression("zone", "In", "a"), expression("gpu", "Exists"))])
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "a", "gpu": "1"})) == ""
    )
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "a"})) == MISMATCH


def test_terms_are_ored(pod, node):
    picky = pod(
        node_affinity=[term(expression("zone", "In", "a")), term(expression("gpu", "Exists"))]
    )
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "b", "gpu": "1"})) == ""
    )
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "b"})) == MISMATCH


def test_node_selector_and_affinity_must_both_match(pod, node):
    picky = pod(node_selector={"disk": "ssd"}, node_affinity=[term(expression("zone", "In", "a"))])
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"disk": "ssd", "zone": "a"}))
        == ""
    )
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "a"})) == MISMATCH
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"disk": "ssd"})) == MISMATCH


def test_match_fields_select_by_node_name(pod, node):
    pinned = pod(node_affinity=[term(fields=(expression("metadata.name", "In", "n1"),))])
    assert plugin_reason(node_affinity.filtering, pinned, node("n1")) == ""
    # PreFilter keeps only the pinned names, so n2 never reaches Filter (kube-scheduler's
    # answer, and the one run_filters always gave): the Filter's own MISMATCH is shown
    # with a term that pins no name.
    assert plugin_reason(node_affinity.filtering, pinned, node("n2")) == NOT_IN_PREFILTER_RESULT
    avoiding = pod(node_affinity=[term(fields=(expression("metadata.name", "NotIn", "n2"),))])
    assert plugin_reason(node_affinity.filtering, avoiding, node("n1")) == ""
    assert plugin_reason(node_affinity.filtering, avoiding, node("n2")) == MISMATCH


def test_match_fields_not_in_excludes_a_node_by_name(pod, node):
    avoiding = pod(node_affinity=[term(fields=(expression("metadata.name", "NotIn", "n1"),))])
    assert plugin_reason(node_affinity.filtering, avoiding, node("n1")) == MISMATCH
    assert plugin_reason(node_affinity.filtering, avoiding, node("n2")) == ""


def test_empty_term_selects_no_node(pod, node):
    assert plugin_reason(node_affinity.filtering, pod(node_affinity=[{}]), node()) == MISMATCH


@pytest.mark.parametrize(
    "broken",
    [
        expression("zone", "In"),  # In needs values
        expression("zone", "Exists", "a"),  # Exists takes none
        expression("zone", "Near", "a"),  # no such operator
        expression("cores", "Gt", "8", "9"),  # Gt takes exactly one
        expression("cores", "Gt", "eight"),  # ... integer
    ],
)
def test_invalid_term_never_matches_but_other_terms_still_can(pod, node, broken):
    picky = pod(node_affinity=[term(broken), term(expression("gpu", "Exists"))])
    assert (
        plugin_reason(node_affinity.filtering, picky, node(labels={"zone": "a", "cores": "16"}))
        == MISMATCH
    )
    assert plugin_reason(node_affinity.filtering, picky, node(labels={"gpu": "1"})) == ""


def test_match_fields_with_several_values_is_invalid(pod, node):
    pinned = pod(node_affinity=[term(fields=(expression("metadata.name", "In", "n1", "n2"),))])
    assert plugin_reason(node_affinity.filtering, pinned, node("n1")) == MISMATCH


def test_daemonset_style_pinning_skips_every_other_node(pod, node, cluster):
    pinned = pod(
        cpu="100m", node_affinity=[term(fields=(expression("metadata.name", "In", "n2"),))]
    )
    verdicts = node_reasons(pinned, cluster(nodes=[node("n1"), node("n2"), node("n3")]))
    assert verdicts == {
        "n1": ("node(s) didn't satisfy plugin(s) [NodeAffinity]",),
        "n2": (),
        "n3": ("node(s) didn't satisfy plugin(s) [NodeAffinity]",),
    }


def test_pinned_node_still_runs_every_filter(pod, node, cluster):
    pinned = pod(cpu="8", node_affinity=[term(fields=(expression("metadata.name", "In", "n1"),))])
    verdicts = node_reasons(pinned, cluster(nodes=[node("n1", cpu="4"), node("n2")]))
    assert verdicts["n1"] == ("Insufficient cpu",)


def test_any_term_without_a_name_pin_keeps_all_nodes_in_play(pod, node, cluster):
    mixed = pod(
        node_affinity=[
            term(fields=(expression("metadata.name", "In", "n1"),)),
            term(expression("zone", "In", "b")),
        ]
    )
    verdicts = node_reasons(
        mixed, cluster(nodes=[node("n1"), node("n2", labels={"zone": "b"}), node("n3")])
    )
    assert verdicts == {"n1": (), "n2": (), "n3": (MISMATCH,)}


def test_contradicting_name_pins_rule_out_the_pod_everywhere(pod, node, cluster):
    impossible = pod(
        node_affinity=[
            term(
                fields=(
                    expression("metadata.name", "In", "n1"),
                    expression("metadata.name", "In", "n2"),
                )
            )
        ]
    )
    snapshot = cluster(nodes=[node("n1"), node("n2")])
    assert pre_filter_refusal(impossible, snapshot) == "pod affinity terms conflict"
    verdicts = node_reasons(impossible, snapshot)
    assert verdicts == {
        "n1": ("pod affinity terms conflict",),
        "n2": ("pod affinity terms conflict",),
    }
