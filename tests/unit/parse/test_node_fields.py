"""Node bodies to NodeInfo: allocatable, taints, cordon, addresses, annotations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import model, parse

GI = 2**30


def test_allocatable_is_read_in_scheduler_units(node):
    n1 = node("n1", cpu="3900m", memory="15Gi", ephemeral="90Gi", pods="110")
    assert n1.allocatable == model.Resources(
        milli_cpu=3900, memory=15 * GI, ephemeral_storage=90 * GI, pods=110, scalar={}
    )


def test_extended_and_hugepages_allocatable_are_scalar(node):
    n1 = node("n1", extended={"nvidia.com/gpu": "4", "hugepages-2Mi": "1Gi", "foo": "3"})
    assert n1.allocatable.scalar == {"nvidia.com/gpu": 4, "hugepages-2Mi": GI}


def test_node_without_allocatable_admits_nothing(node_body):
    body = node_body("bare")
    del body["status"]["allocatable"]
    assert parse.node_from_body(body).allocatable == model.Resources()


def test_taints_are_read_in_order(node):
    n1 = node(
        "n1",
        taints=[
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ],
    )
    assert n1.taints == (
        model.Taint(key="dedicated", value="gpu", effect="NoSchedule"),
        model.Taint(key="node.kubernetes.io/not-ready", value="", effect="NoExecute"),
    )


def test_cordoned_node_is_unschedulable(node):
    assert node("n1", unschedulable=True).unschedulable
    assert not node("n2").unschedulable


def test_addresses_are_read_in_order(node):
    assert node("n1", addresses=("10.0.0.7", "n1.internal")).addresses == (
        "10.0.0.7",
        "n1.internal",
    )


def test_labels_are_read(node):
    assert node("n1", labels={"zone": "a"}).labels == {
        "kubernetes.io/hostname": "n1",
        "zone": "a",
    }


def test_last_applied_configuration_annotation_is_dropped(node):
    n1 = node(
        "n1",
        annotations={
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            "example.com/hourly-price": "0.42",
        },
    )
    assert n1.annotations == {"example.com/hourly-price": "0.42"}


def test_minimal_node_body_gets_defaults():
    bare = parse.node_from_body({"metadata": {"name": "bare"}})
    assert bare.name == "bare"
    assert bare.taints == ()
    assert not bare.unschedulable
    assert bare.addresses == ()
    assert bare.labels == {}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("spec", "unschedulable"), "yes", "spec.unschedulable"),
        (("spec", "taints"), [{"key": 1}], "spec.taints[0].key"),
        (("status", "allocatable"), {"cpu": "four"}, "status.allocatable.cpu"),
        (("status", "allocatable"), {"memory": "-1"}, "status.allocatable.memory"),
        (("status", "addresses"), ["10.0.0.1"], "status.addresses[0]"),
        (("metadata", "annotations"), {"a": None}, "metadata.annotations"),
    ],
)
def test_wrongly_typed_node_fields_are_parse_errors_naming_the_field(node_body, path, value, field):
    body = node_body("n1")
    body[path[0]][path[1]] = value
    with pytest.raises(parse.ParseError) as caught:
        parse.node_from_body(body)
    assert caught.value.field == field


node_keys = st.sampled_from(
    ["metadata", "spec", "status", "taints", "allocatable", "addresses", "labels", "cpu", "key"]
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6))
node_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(node_keys, inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60)
@given(body=st.dictionaries(node_keys, node_like, max_size=3))
def test_malformed_node_bodies_raise_only_parse_errors(body):
    try:
        parsed = parse.node_from_body(body)
    except parse.ParseError as error:
        assert error.field
    else:
        assert isinstance(parsed, model.NodeInfo)
