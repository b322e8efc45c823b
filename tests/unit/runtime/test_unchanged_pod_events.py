"""A pod event that changes nothing the cycle reads is not parsed again: a status-only
update or a resourceVersion bump of a pod counted on its node records the version only;
an event that changes only the pod's node, phase, bind time or decision record (our own
bind, the kubelet's Running) is read from the last parse, not from the body. Every field
``pod_from_body`` reads, changed alone, leaves the cache as the full parse would."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from metricsched.core import decision_record, model, parse
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import ingest
from tests.unit.conftest import build_node_body
from tests.unit.runtime.test_watches_and_relist import _watches

Body = dict[str, Any]
NOW = 1_800_000_000.0


def _record(policy: str) -> str:
    return json.dumps({"v": decision_record.VERSION, "policy": policy})


def _bound_pod() -> Body:
    """A bound, running pod that uses every part of a pod the parse reads."""
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "uid-web-1",
            "resourceVersion": "10",
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {decision_record.ANNOTATION: _record("shop/cool"), "note": "x"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1", "controller": True}
            ],
        },
        "spec": {
            "schedulerName": "metricsched",
            "nodeName": "n1",
            "priority": 10,
            "preemptionPolicy": "PreemptLowerPriority",
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "overhead": {"cpu": "10m"},
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                }
            ],
            "initContainers": [
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                }
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {
                                "matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]
                            },
                        }
                    ],
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app": "web"}},
                            },
                        }
                    ]
                },
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                {"name": "cache", "emptyDir": {}},
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-29T10:00:05Z",
            "podIP": "10.1.0.7",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-11-29T10:00:04Z",
                },
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T10:00:09Z"},
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-11-29T10:00:06Z"}},
                    # a resize down under way: the spec asks 500m, 300m actuated
                    "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}},
                    "allocatedResources": {"cpu": "300m", "memory": "256Mi"},
                }
            ],
        },
    }


def _set(path: str, value: Any) -> Callable[[Body], None]:
    """A change of one field: ``path`` is dotted, with list indices."""

    def change(body: Body) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _resize_pending(body: Body) -> None:
    body["status"]["conditions"].append(
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    )


def _decided_by(policy: str) -> Callable[[Body], None]:
    def change(body: Body) -> None:
        body["metadata"]["annotations"][decision_record.ANNOTATION] = _record(policy)

    return change


# Each changes something ``pod_from_body`` reads, so the parsed pod differs (checked).
CHANGES: dict[str, Callable[[Body], None]] = {
    "a container's cpu request": _set("spec.containers.0.resources.requests.cpu", "600m"),
    "a container's memory limit": _set("spec.containers.0.resources.limits.memory", "1Gi"),
    "a sidecar's request": _set("spec.initContainers.0.resources.requests.cpu", "70m"),
    "a sidecar becoming a plain init container": _set(
        "spec.initContainers.0.restartPolicy", "Never"
    ),
    "pod-level resources": _set("spec.resources", {"requests": {"cpu": "2"}}),
    "the overhead": _set("spec.overhead", {"cpu": "20m"}),
    "a label": _set("metadata.labels.app", "api"),
    "the node": _set("spec.nodeName", "n2"),
    "the deletion timestamp": _set("metadata.deletionTimestamp", "2026-11-29T11:00:00Z"),
    "the phase, to Failed": _set("status.phase", "Failed"),
    "the phase, to Pending": _set("status.phase", "Pending"),
    "the start time": _set("status.startTime", "2026-11-29T10:00:30Z"),
    "the PodScheduled transition": _set(
        "status.conditions.0.lastTransitionTime", "2026-11-29T10:00:40Z"
    ),
    "a resized status request": _set("status.containerStatuses.0.resources.requests.cpu", "900m"),
    "an allocated resource": _set("status.containerStatuses.0.allocatedResources.cpu", "900m"),
    "an infeasible resize": _resize_pending,
    "a node feature the pod needs": _set(
        "spec.containers.0.restartPolicyRules",
        [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}],
    ),
    "the decision record": _decided_by("shop/other"),
    "the controller's uid": _set("metadata.ownerReferences.0.uid", "rs-2"),
    "the controller's name": _set("metadata.ownerReferences.0.name", "web-def"),
    "the creation time": _set("metadata.creationTimestamp", "2026-11-29T09:00:00Z"),
    "a host port": _set("spec.containers.0.ports.0.hostPort", 9090),
    "a toleration": _set("spec.tolerations.0.key", "other"),
    "the priority": _set("spec.priority", 1000),
    "the preemption policy": _set("spec.preemptionPolicy", "Never"),
    "the node selector": _set("spec.nodeSelector.disk", "hdd"),
    "required node affinity": _set(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", None
    ),
    "preferred node affinity": _set(
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.0.weight",
        7,
    ),
    "required pod affinity": _set(
        "spec.affinity.podAffinity",
        {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        },
    ),
    "required pod anti-affinity": _set(
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}],
    ),
    "preferred pod anti-affinity": _set(
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.0.weight",
        9,
    ),
    "preferred pod affinity": _set(
        "spec.affinity.podAffinity",
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 3,
                    "podAffinityTerm": {
                        "topologyKey": "zone",
                        "labelSelector": {"matchLabels": {"app": "db"}},
                    },
                }
            ]
        },
    ),
    "a topology spread constraint": _set("spec.topologySpreadConstraints.0.maxSkew", 2),
    "a volume's claim": _set("spec.volumes.0.persistentVolumeClaim.claimName", "other"),
    "a generic ephemeral volume": _set("spec.volumes.1", {"name": "scratch", "ephemeral": {}}),
    "a resource claim": _set("spec.resourceClaims", [{"name": "gpu"}]),
    "a scheduling gate": _set("spec.schedulingGates", [{"name": "wait"}]),
    "a pod group": _set("spec.workloadRef", {"name": "gang"}),
    "the scheduler name": _set("spec.schedulerName", "other-scheduler"),
    "the name": _set("metadata.name", "web-2"),
    "the namespace": _set("metadata.namespace", "shop-2"),
    "a request without a default": _set("spec.containers.0.resources", {}),
}

# Fields no change above reaches, and why.
UNCHANGED_FIELDS = {
    "uid": "the key: another uid is another pod",
    "nominated_node": "a bound pod's is always empty (read from an unbound pod's status)",
}

# Changes of what the parse does not read: each must not be parsed again.
NEWS: dict[str, Callable[[Body], None]] = {
    "nothing (a resourceVersion bump)": lambda body: None,
    "the pod IP": _set("status.podIP", "10.1.0.8"),
    "readiness": _set("status.conditions.1.status", "False"),
    "a container restart": _set("status.containerStatuses.0.restartCount", 1),
    "a container's state": _set(
        "status.containerStatuses.0.state", {"waiting": {"reason": "CrashLoopBackOff"}}
    ),
    "an annotation the scheduler does not read": _set("metadata.annotations.note", "y"),
    "managed fields": _set("metadata.managedFields", [{"manager": "kubelet"}]),
    "the QoS class": _set("status.qosClass", "Burstable"),
}


def _changed(base: Body, change: Callable[[Body], None], rv: str) -> Body:
    body = copy.deepcopy(base)
    change(body)
    body["metadata"]["resourceVersion"] = rv
    return body


def _feed(w: ingest.Ingest, *bodies: Body) -> None:
    for rv, name in enumerate(("n1", "n2"), start=1):
        node = build_node_body(name, cpu="16", memory="64Gi")
        node["metadata"]["resourceVersion"] = str(rv)
        w.on_node("ADDED", node)
    for body in bodies:
        w.on_bound_pod("MODIFIED", body)


@pytest.fixture
def parsed_bodies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the pods ``pod_from_body`` parses (every call counted)."""
    seen: list[str] = []
    full = parse.pod_from_body

    def counting(body: Any, **options: Any) -> model.PodInfo:
        seen.append(body["metadata"]["name"])
        return full(body, **options)

    monkeypatch.setattr(parse, "pod_from_body", counting)
    yield seen


def _full_parse_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "pod_digest", lambda body: None)


def _state(cache: cache_mod.ClusterCache) -> tuple[Any, ...]:
    snapshot = cache.snapshot(now=NOW)
    return (
        snapshot.nodes,
        dict(cache.pending),
        cache.generation,
        cache.pod_version("uid-web-1"),
        cache.pod_version("uid-web-2"),
    )


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_a_change_of_what_the_parse_reads_is_never_skipped(
    change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _bound_pod()
    changed = _changed(base, CHANGES[change], "11")
    assert parse.pod_from_body(changed) != parse.pod_from_body(base)  # the change is read

    fast = _watches()
    _feed(fast, base, changed)
    with monkeypatch.context() as m:
        _full_parse_only(m)
        full = _watches()
        _feed(full, base, changed)

    assert _state(fast.cache) == _state(full.cache)


def test_every_field_of_a_parsed_pod_is_changed_by_some_case() -> None:
    """A field added to PodInfo (read from a new part of the body) needs its case above,
    or the digest could miss it unnoticed."""
    base = parse.pod_from_body(_bound_pod())
    reached = set(UNCHANGED_FIELDS)
    for change in CHANGES.values():
        changed = parse.pod_from_body(_changed(_bound_pod(), change, "11"))
        reached |= {
            f.name
            for f in dataclasses.fields(model.PodInfo)
            if getattr(changed, f.name) != getattr(base, f.name)
        }
    assert reached == {f.name for f in dataclasses.fields(model.PodInfo)}


@pytest.mark.parametrize("news", NEWS, ids=str)
def test_a_status_only_update_of_a_bound_pod_is_not_parsed_again(
    news: str, parsed_bodies: list[str]
) -> None:
    base = _bound_pod()
    w = _watches()
    _feed(w, base)
    before = w.cache.snapshot(now=NOW)
    generation = w.cache.generation
    assert parsed_bodies == ["web-1"]

    w.on_bound_pod("MODIFIED", _changed(base, NEWS[news], "12"))

    assert parsed_bodies == ["web-1"]  # not parsed again
    assert w.cache.pod_version("uid-web-1") == 12  # the version is recorded
    after = w.cache.snapshot(now=NOW)
    assert after.nodes[model.NodeName("n1")] is before.nodes[model.NodeName("n1")]  # no re-sum
    assert w.cache.generation == generation


def test_our_own_bind_and_the_kubelets_running_are_read_from_the_pending_parse(
    parsed_bodies: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kopf's pending copy is parsed once; the bound ADDED (node, decision record,
    PodScheduled) and the kubelet's Running (phase, start time) are stamped onto it; the
    cache ends as the full parse of each would leave it."""
    bound = _bound_pod()
    pending = copy.deepcopy(bound)
    pending["metadata"]["resourceVersion"] = "5"
    del pending["metadata"]["annotations"][decision_record.ANNOTATION]
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending"}
    added = copy.deepcopy(pending)
    added["metadata"]["resourceVersion"] = "6"
    added["metadata"]["annotations"][decision_record.ANNOTATION] = _record("shop/cool")
    added["spec"] = {"nodeName": "n1", **pending["spec"]}  # where the API server writes it
    added["status"]["conditions"] = [bound["status"]["conditions"][0]]
    running = copy.deepcopy(bound)  # as kwok reports it: no resources in the statuses
    running["metadata"]["resourceVersion"] = "7"
    for status in running["status"]["containerStatuses"]:
        del status["resources"], status["allocatedResources"]
    ready = _changed(running, NEWS["readiness"], "8")

    def replay(w: ingest.Ingest) -> cache_mod.ClusterCache:
        _feed(w)
        w.on_pending_pod("ADDED", pending)
        pod = w.cache.pending["uid-web-1"]
        w.cache.assume(pod, model.NodeName("n1"), now=NOW - 30)
        w.cache.confirm_bound(pod.uid, at=1.0)
        w.on_pending_pod("DELETED", added)
        for body in (added, running, ready):
            w.on_bound_pod("MODIFIED", body)
        return w.cache

    fast = replay(_watches())
    assert parsed_bodies == ["web-1"]  # the pending copy only
    with monkeypatch.context() as m:
        _full_parse_only(m)
        full = replay(_watches())
    assert _state(fast) == _state(full)
    held = fast.snapshot(now=NOW).nodes[model.NodeName("n1")].pods
    assert [(p.phase, p.placed_by) for p in held] == [("Running", "shop/cool")]


def test_an_unreadable_body_is_parsed_and_reported_as_before(parsed_bodies: list[str]) -> None:
    """A body of an unexpected shape has no digest: the parse judges it (and names the
    field), even when the pod parsed before."""
    base = _bound_pod()
    w = _watches()
    _feed(w, base)
    broken = _changed(base, _set("status.conditions", "not a list"), "12")
    w.on_bound_pod("MODIFIED", broken)
    assert parsed_bodies == ["web-1", "web-1"]
    assert parse.pod_digest(broken) is None


def test_a_pod_that_left_the_cache_is_parsed_again_when_it_comes_back(
    parsed_bodies: list[str],
) -> None:
    base = _bound_pod()
    w = _watches()
    _feed(w, base)
    w.on_bound_pod("DELETED", _changed(base, lambda body: None, "12"))
    w.on_bound_pod("MODIFIED", _changed(base, lambda body: None, "13"))
    assert parsed_bodies == ["web-1", "web-1"]
