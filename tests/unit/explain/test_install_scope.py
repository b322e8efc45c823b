"""explain takes the policies of the install the pod names (spec.schedulerName), not a
fixed ``metricsched``, and says which policies select the pod but serve another install."""

from __future__ import annotations

from typing import Any

from metricsched.core import explain, model, parse, policy, policy_selection


def _pod(scheduler: str, **labels: str) -> model.PodInfo:
    return parse.pod_from_body(
        {
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1", "labels": labels},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]},
        }
    )


def _policy(name: str, scheduler: str | None, **spec: Any) -> model.Policy:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "metrics": [
                {
                    "name": "latency",
                    "prometheus": {"query": "node_latency_seconds", "nodeLabel": "node"},
                    "goal": "Minimize",
                }
            ],
            **spec,
        },
    }
    if scheduler is not None:
        body["spec"]["schedulerName"] = scheduler
    return policy.policy_from_body(body)


def test_a_pod_of_a_custom_install_is_explained_with_that_installs_policies() -> None:
    pod = _pod("sched-gpu", app="web")
    gpu = _policy("gpu-latency", "sched-gpu")
    scope = explain.scope(pod, [gpu])
    assert scope.scheduler_names == frozenset({"sched-gpu"})
    assert scope.elsewhere == ()
    assert (
        policy_selection.select_policy(
            pod, [p for p in [gpu] if p.scheduler_name in scope.scheduler_names]
        ).policy
        == gpu
    )


def test_a_policy_selecting_the_pod_for_another_install_is_named() -> None:
    pod = _pod("sched-gpu", app="web")
    other = _policy("latency", None)  # spec.schedulerName defaults to metricsched
    unrelated = _policy("batch", None, podSelector={"matchLabels": {"app": "batch"}})
    scope = explain.scope(pod, [other, unrelated])
    assert scope.scheduler_names == frozenset({"sched-gpu"})
    assert scope.elsewhere == (other,)
    (note,) = explain.elsewhere_notes(pod, scope.elsewhere)
    assert "policy shop/latency selects this pod but is served by another install" in note
    assert "spec.schedulerName is metricsched, the pod's is sched-gpu" in note


def test_a_policy_pinned_by_the_pods_label_counts_as_selecting_it() -> None:
    pod = _pod("sched-gpu", **{"metricsched.io/policy": "pinned"})
    pinned = _policy("pinned", "metricsched")
    assert explain.scope(pod, [pinned]).elsewhere == (pinned,)


def test_the_scheduler_name_flag_overrides_the_pods() -> None:
    pod = _pod("sched-gpu", app="web")
    mine, gpu = _policy("latency", "metricsched"), _policy("gpu", "sched-gpu")
    scope = explain.scope(pod, [mine, gpu], override=frozenset({"metricsched"}))
    assert scope.scheduler_names == frozenset({"metricsched"})
    assert scope.elsewhere == (gpu,)


def test_a_pod_of_another_scheduler_is_explained_as_its_shadow_policys_install() -> None:
    pod = _pod("default-scheduler", app="web")
    trial = _policy(
        "trial", "sched-gpu", mode="Shadow", shadow={"schedulerNames": ["default-scheduler"]}
    )
    scope = explain.scope(pod, [trial])
    assert scope.scheduler_names == frozenset({"sched-gpu"})
    assert scope.elsewhere == ()  # shadow policies never govern a pod


def test_a_pod_of_the_default_name_with_its_policies_changes_nothing() -> None:
    pod = _pod("metricsched", app="web")
    mine = _policy("latency", None)
    scope = explain.scope(pod, [mine])
    assert scope.scheduler_names == frozenset({"metricsched"})
    assert scope.elsewhere == ()
