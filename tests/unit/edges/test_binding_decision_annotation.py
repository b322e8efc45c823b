"""The decision record rides on the Binding: no extra write for it."""

from __future__ import annotations

import edges_fakes as fakes

from metricsched.edges import binder, kube_http


def test_the_binding_carries_the_annotations_it_is_given_in_one_post(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    record = '{"v":1,"node":"node-3"}'
    run(
        binder.bind(
            writes_api,
            namespace="shop",
            name="web-7d4",
            uid="uid-123",
            node="node-3",
            annotations={"metricsched.io/decision": record},
        )
    )
    (request,) = fake_kube.requests
    assert request.json()["metadata"] == {
        "name": "web-7d4",
        "namespace": "shop",
        "uid": "uid-123",
        "annotations": {"metricsched.io/decision": record},
    }


def test_the_pre_serialised_binding_is_the_whole_binding_object(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    # The body is bytes joined around its variable parts (``binder.body``): what arrives is
    # the Binding kube-apiserver expects, names that need JSON escapes included.
    run(binder.bind(writes_api, namespace="shop", name="web-0", uid="u-0", node='node "ü"\\'))
    (request,) = fake_kube.requests
    assert request.json() == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-0"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": 'node "ü"\\'},
    }
