"""spec.kubeScores: kube-scheduler's profile weights by default, bounds, unknown plugins."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from metricsched.core import policy, policy_defaults
from metricsched.core.plugins import kube_scores
from tests.unit.policy.test_crd import CRD_PATH


def body(kube: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"metrics": [{"name": "price", "nodeAnnotation": "example.com/p"}]}
    if kube is not None:
        spec["kubeScores"] = kube
    return {"metadata": {"name": "p", "namespace": "shop"}, "spec": spec}


def test_a_policy_without_kube_scores_gets_kube_schedulers_profile_weights():
    parsed = policy.policy_from_body(body())
    assert parsed.kube_weights == (
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
    )


def test_a_weight_of_zero_leaves_the_plugin_out_and_others_keep_their_default():
    parsed = policy.policy_from_body(body({"PodTopologySpread": 0, "TaintToleration": 10}))
    weights = dict(parsed.kube_weights)
    assert "PodTopologySpread" not in weights
    assert weights["TaintToleration"] == 10
    assert weights["NodeAffinity"] == 2


def test_all_weights_zero_blend_nothing():
    parsed = policy.policy_from_body(body(dict.fromkeys(kube_scores.PLUGINS, 0)))
    assert parsed.kube_weights == ()


@pytest.mark.parametrize(
    ("kube", "problem"),
    [
        (
            {"TaintToleration": 101},
            "spec.kubeScores.TaintToleration: must be an integer from 0 to 100",
        ),
        ({"NodeAffinity": -1}, "spec.kubeScores.NodeAffinity: must be an integer from 0 to 100"),
        ({"NodeAffinity": "2"}, "spec.kubeScores.NodeAffinity: must be an integer from 0 to 100"),
        ({"Volumes": 1}, "spec.kubeScores.Volumes: is not a score plugin; known: TaintToleration"),
        (
            {"ImageLocality": 1},
            "spec.kubeScores.ImageLocality: metricsched does not keep node image",
        ),
        ([1, 2], "spec.kubeScores: must be an object"),
    ],
)
def test_bad_kube_scores_are_reported_never_raised_as_a_crash(kube, problem):
    with pytest.raises(policy.PolicyError) as error:
        policy.policy_from_body(body(kube))
    assert any(p.startswith(problem) for p in error.value.problems), error.value.problems


def test_the_crd_knows_the_same_plugins_bounds_and_defaults():
    crd = yaml.safe_load(CRD_PATH.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    plugins = spec["properties"]["kubeScores"]["properties"]
    assert list(plugins) == list(kube_scores.PLUGINS)
    for name, node in plugins.items():
        assert (node["minimum"], node["maximum"]) == (
            policy_defaults.MIN_KUBE_WEIGHT,
            policy_defaults.MAX_KUBE_WEIGHT,
        )
        assert node["default"] == policy_defaults.DEFAULT_KUBE_WEIGHTS[name]
