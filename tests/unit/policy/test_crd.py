"""The SchedulingPolicy CRD: loads, looks structural, and agrees with the Python parser."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from metricsched.core import model, policy, policy_defaults, policy_fields

CRD_PATH = pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


@pytest.fixture(scope="module")
def version(crd) -> dict[str, Any]:
    (only,) = crd["spec"]["versions"]
    return only


@pytest.fixture(scope="module")
def schema(version) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]


def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its dotted path (``[]`` for list items)."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}" if path else name)
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def test_crd_names_the_kind_as_the_design_says(crd, version):
    assert crd["metadata"]["name"] == "schedulingpolicies.metricsched.io"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("metricsched.io", "Namespaced")
    assert spec["names"] == {
        "kind": "SchedulingPolicy",
        "listKind": "SchedulingPolicyList",
        "plural": "schedulingpolicies",
        "singular": "schedulingpolicy",
        "shortNames": ["spol"],
        "categories": ["metricsched"],
    }
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_every_schema_node_has_a_type(schema):
    # An int-or-string node is the API's one exception: it has no type, its anyOf says
    # which two it takes (each with its own bounds, checked where it is tested).
    untyped = [
        path
        for path, node in walk(schema, "")
        if "type" not in node
        and not (
            node.get("x-kubernetes-int-or-string")
            and [branch["type"] for branch in node["anyOf"]] == ["integer", "string"]
        )
    ]
    assert untyped == []


def test_spec_and_status_are_fully_specified_without_unknown_fields(schema):
    loose = [
        path
        for path, node in walk(schema, "")
        if node.get("x-kubernetes-preserve-unknown-fields")
        or (
            node.get("type") == "object"
            and not node.get("properties")
            and path != "metadata"
            and "additionalProperties" not in node
        )
    ]
    assert loose == []


def test_strings_and_lists_are_bounded_for_the_cel_cost_budget(schema):
    unbounded = [
        path
        for path, node in walk(schema, "")
        if path.startswith(("spec", "status"))
        and (
            (
                node.get("type") == "string"
                and "maxLength" not in node
                and "enum" not in node
                and node.get("format") != "date-time"
            )
            or (node.get("type") == "array" and "maxItems" not in node)
        )
    ]
    assert unbounded == []


def test_every_cel_rule_explains_itself(schema):
    rules = [
        rule for _, node in walk(schema, "") for rule in node.get("x-kubernetes-validations", [])
    ]
    assert len(rules) >= 7
    assert all(rule.get("message") for rule in rules)


def test_metrics_are_a_map_keyed_by_name_with_1_to_10_entries(schema):
    metrics = schema["properties"]["spec"]["properties"]["metrics"]
    assert metrics["x-kubernetes-list-type"] == "map"
    assert metrics["x-kubernetes-list-map-keys"] == ["name"]
    assert (metrics["minItems"], metrics["maxItems"]) == (1, 10)
    assert "name" in metrics["items"]["required"]


def test_status_conditions_have_the_metav1_condition_shape(schema):
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert set(conditions["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert conditions["items"]["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def test_crd_defaults_equal_the_parsers_defaults(schema):
    defaults = {path: node["default"] for path, node in walk(schema, "") if "default" in node}
    assert defaults == policy_defaults.DEFAULTS


def test_crd_bounds_equal_the_parsers_bounds(schema):
    spec = schema["properties"]["spec"]["properties"]
    metric = spec["metrics"]["items"]["properties"]
    assert (metric["weight"]["minimum"], metric["weight"]["maximum"]) == (
        policy_defaults.MIN_WEIGHT,
        policy_defaults.MAX_WEIGHT,
    )
    assert (spec["burstPenalty"]["minimum"], spec["burstPenalty"]["maximum"]) == (
        policy_defaults.MIN_BURST_PENALTY,
        policy_defaults.MAX_BURST_PENALTY,
    )
    assert (
        metric["prometheus"]["properties"]["query"]["maxLength"] == policy_defaults.MAX_QUERY_LENGTH
    )
    assert spec["metrics"]["maxItems"] == policy_defaults.MAX_METRICS
    threshold = metric["threshold"]["properties"]
    assert threshold["overrides"]["maxItems"] == policy_defaults.MAX_THRESHOLD_OVERRIDES
    assert threshold["mode"]["enum"] == [mode.value for mode in model.ThresholdMode]


def test_printer_columns_show_metrics_fallback_ready_scheduled_and_age(version):
    columns = {column["name"]: column for column in version["additionalPrinterColumns"]}
    assert {"Metrics", "Fallback", "Ready", "Scheduled", "Age"} <= set(columns)
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Fallback"]["jsonPath"] == ".spec.fallback.strategy"
    assert columns["Scheduled"]["jsonPath"] == ".status.scheduledPods"
    assert columns["Age"] == {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
    }
    # The API server prints only the first match of a JSONPath, so the metric names come
    # from a status field the scheduler writes (policy.metric_names).
    assert columns["Metrics"]["jsonPath"] == ".status.metricNames"


@pytest.mark.parametrize(
    "text",
    [
        "2m",
        "60s",
        "1m30s",
        "500ms",
        "1.5h",
        "0s",
        "1h2m3s4ms",
        "",
        "1d",
        "-1s",
        "1 m",
        "5",
        "1ns",
        "m",
    ],
)
def test_crd_duration_pattern_and_parser_agree(schema, text):
    pattern = schema["properties"]["spec"]["properties"]["maxMetricAge"]["pattern"]
    try:
        policy_fields.parse_duration(text)
        parsed = True
    except ValueError:
        parsed = False
    assert (re.fullmatch(pattern, text) is not None) == parsed


@pytest.mark.parametrize(
    "key",
    [
        "example.com/hourly-price",
        "price",
        "a.b-c.d/X_y.z",
        "Example.com/price",
        "example.com/",
        "/price",
        "example.com/-price",
        "example.com/price-",
        "a/b/c",
        "example.com/" + "p" * 63,
        "example.com/" + "p" * 64,
        "e" * 253 + "/price",
        "e" * 254 + "/price",
    ],
)
def test_crd_annotation_rules_and_parser_agree(schema, key):
    annotation = schema["properties"]["spec"]["properties"]["metrics"]["items"]["properties"][
        "nodeAnnotation"
    ]
    format_rule, prefix_rule = (rule["rule"] for rule in annotation["x-kubernetes-validations"])
    pattern = re.search(r"matches\('(.*)'\)", format_rule).group(1).replace("\\\\", "\\")
    by_crd = re.search(pattern, key) is not None and (
        "/" not in key or re.match(r"^[^/]{1,253}/", key) is not None
    )
    assert "matches('^[^/]{1,253}/')" in prefix_rule
    body = {
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"metrics": [{"name": "price", "nodeAnnotation": key}]},
    }
    try:
        policy.policy_from_body(body)
        by_parser = True
    except policy.PolicyError:
        by_parser = False
    assert by_crd == by_parser
