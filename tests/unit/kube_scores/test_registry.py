"""The score plugins' one registry: every table callers read comes from it."""

from __future__ import annotations

from metricsched.core import policy_defaults
from metricsched.core.plugins import kube_scores


def test_the_registry_is_kube_schedulers_default_profile_in_its_order_and_weights():
    # pkg/scheduler/apis/config/v1/default_plugins.go (v1.35): the score plugins in order
    assert [(p.name, p.default_weight) for p in kube_scores.REGISTRY] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
    ]


def test_every_table_of_plugins_is_read_from_the_registry():
    names = tuple(p.name for p in kube_scores.REGISTRY)
    assert names == kube_scores.PLUGINS
    assert tuple(kube_scores.SHORT_NAMES) == names
    assert kube_scores.SHORT_NAMES["NodeResourcesFit"] == "LeastAllocated"
    assert kube_scores.SHORT_NAMES["NodeResourcesBalancedAllocation"] == "BalancedAllocation"
    assert dict(policy_defaults.DEFAULT_KUBE_WEIGHTS) == {
        p.name: p.default_weight for p in kube_scores.REGISTRY
    }
    assert all(callable(p.score) for p in kube_scores.REGISTRY)
