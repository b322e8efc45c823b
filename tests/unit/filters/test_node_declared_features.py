"""NodeDeclaredFeatures (KEP-5328, the rules of v1.36 and later): a pod whose spec needs a
node feature (hostNetwork with ``hostUsers: false``, a RestartAllContainers restart rule,
``bindMountOptions`` on a mount) fits only nodes whose ``status.declaredFeatures`` hold it,
with kube-scheduler's reason; preemption cannot help there. v1.35 does not apply it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from metricsched.core import model, parse, profile, versions
from metricsched.core.plugins import node_declared_features, preemption
from tests.unit.conftest import build_cluster, build_container, build_node_body, build_pod_body

REASON = "node(s) didn't match Pod's required features"
USERNS = "UserNamespacesHostNetworkSupport"
RESTART_ALL = "RestartAllContainersOnContainerExits"
BIND_OPTIONS = "VolumeBindMountOptions"


def _node(name: str, *features: str) -> model.NodeInfo:
    body = build_node_body(name)
    if features:
        body["status"]["declaredFeatures"] = list(features)
    return parse.node_from_body(body)


def _scene(rules: versions.Rules) -> model.ClusterSnapshot:
    nodes = [_node("old"), _node("userns", USERNS), _node("both", USERNS, RESTART_ALL)]
    return dataclasses.replace(build_cluster(nodes=nodes), rules=rules)


def _pod(**spec: Any) -> model.PodInfo:
    body = build_pod_body("needs", cpu="100m")
    body["spec"].update(spec)
    return parse.pod_from_body(body)


def _restart_all_container() -> dict[str, Any]:
    container = build_container(cpu="100m")
    container["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ]
    return container


HOST_NETWORK_USERNS = {"hostNetwork": True, "hostUsers": False}


@pytest.mark.parametrize("rules", [versions.V1_36, versions.V1_37])
def test_a_pod_needing_a_feature_fits_only_nodes_declaring_it(rules: versions.Rules) -> None:
    reasons = profile.node_reasons(_pod(**HOST_NETWORK_USERNS), _scene(rules))
    assert reasons == {"old": (REASON,), "userns": (), "both": ()}
    assert node_declared_features.REASON_UNSATISFIED == REASON


def test_every_needed_feature_must_be_declared() -> None:
    pod = _pod(**HOST_NETWORK_USERNS, containers=[_restart_all_container()])
    assert pod.required_features == (RESTART_ALL, USERNS)
    reasons = profile.node_reasons(pod, _scene(versions.V1_37))
    assert reasons == {"old": (REASON,), "userns": (REASON,), "both": ()}


def test_v1_35_does_not_apply_the_filter() -> None:
    reasons = profile.node_reasons(_pod(**HOST_NETWORK_USERNS), _scene(versions.V1_35))
    assert reasons == {"old": (), "userns": (), "both": ()}


def test_a_pod_needing_nothing_fits_a_node_declaring_nothing() -> None:
    reasons = profile.node_reasons(_pod(hostNetwork=True), _scene(versions.V1_37))
    assert reasons == {"old": (), "userns": (), "both": ()}


@pytest.mark.parametrize(
    ("spec", "needed"),
    [
        ({"hostNetwork": True, "hostUsers": False}, (USERNS,)),
        ({"hostNetwork": True}, ()),
        ({"hostNetwork": True, "hostUsers": True}, ()),
        ({"hostNetwork": False, "hostUsers": False}, ()),
        ({"initContainers": [_restart_all_container()]}, (RESTART_ALL,)),
        (
            {
                "ephemeralContainers": [
                    {
                        "name": "debug",
                        "volumeMounts": [
                            {"name": "v", "mountPath": "/v", "bindMountOptions": ["ro"]}
                        ],
                    }
                ]
            },
            (BIND_OPTIONS,),
        ),
        ({}, ()),
    ],
)
def test_the_needed_features_are_inferred_as_kube_scheduler_v1_37_does(
    spec: dict[str, Any], needed: tuple[str, ...]
) -> None:
    assert _pod(**spec).required_features == needed


def test_a_node_reads_its_declared_features() -> None:
    assert _node("n", USERNS, RESTART_ALL).declared_features == {USERNS, RESTART_ALL}
    assert _node("n").declared_features == frozenset()


def test_preemption_cannot_help_a_node_missing_a_feature() -> None:
    scene = dataclasses.replace(
        build_cluster(nodes=[_node("old"), _node("userns", USERNS)]), rules=versions.V1_37
    )
    pod = _pod(**HOST_NETWORK_USERNS, containers=[_restart_all_container()])
    reasons = profile.node_reasons(pod, scene)
    text = preemption.suffix(pod=pod, snapshot=scene, reasons=reasons)
    assert text.endswith("0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
