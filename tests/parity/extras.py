"""What the generator adds to a scenario for Kubernetes versions after v1.35.

Each option is a rule kube-scheduler of that version applies and v1.35 does not (or not by
default), so ``Options.for_version`` turns them on from v1.36 (KEPs 5328, 5004 beta and
on by default there; GA in v1.37) and nomination scenarios with them:

- ``declared_features``: nodes with ``status.declaredFeatures`` and pending pods that need
  one (NodeDeclaredFeatures: hostNetwork with ``hostUsers: false`` needs
  UserNamespacesHostNetworkSupport, a RestartAllContainers restart rule needs
  RestartAllContainersOnContainerExits);
- ``dra_extended_resources``: a DeviceClass with ``spec.extendedResourceName``, per-node
  ResourceSlices of its driver, and pending pods requesting that resource (NodeResourcesFit
  skips it on nodes without it in allocatable; DynamicResources allocates it instead);
- ``nominated``: pending pods with ``status.nominatedNodeName`` (kube-scheduler's own
  preemption, or KEP-5278's expected placement), which the filters count on their node
  when their priority is equal or higher.

Extras come from their own ``random.Random``, so a scenario's v1.35 part is the same with
or without them.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Protocol, Self

from tests.parity import pools

Body = pools.Body

DRIVER = "accel.example.com"
DRA_RESOURCE = "example.com/accel"
# The registered features whose InferForScheduling can say yes (k8s.io/component-helpers
# nodedeclaredfeatures, v0.37), and one a node may declare that no pod here needs.
HOST_NETWORK_USERNS = "UserNamespacesHostNetworkSupport"
RESTART_ALL = "RestartAllContainersOnContainerExits"
FEATURES = (HOST_NETWORK_USERNS, RESTART_ALL, "ExtendWebSocketsToKubelet")


@dataclasses.dataclass(frozen=True)
class Options:
    nominated: bool = False
    declared_features: bool = False
    dra_extended_resources: bool = False

    @classmethod
    def for_version(cls, version: str) -> Self:
        """What kube-scheduler ``version`` (``v1.MINOR.PATCH``) is asked about."""
        minor = int(version.lstrip("v").split(".")[1])
        on = minor >= 36
        return cls(nominated=on, declared_features=on, dra_extended_resources=on)

    @classmethod
    def parse(cls, text: str) -> Self:
        """``none`` or comma-separated field names (``nominated,declared_features``)."""
        names = {name.strip() for name in text.split(",") if name.strip()} - {"none"}
        fields = {field.name for field in dataclasses.fields(cls)}
        if unknown := names - fields:
            raise ValueError(f"unknown extras {sorted(unknown)}; known: {sorted(fields)}")
        return cls(**dict.fromkeys(names, True))

    @property
    def any(self) -> bool:
        return self.nominated or self.declared_features or self.dra_extended_resources


NONE = Options()


def add(rng: random.Random, scenario: Body, options: Options, *, pod: PodMaker) -> None:
    """Add the extras ``options`` turns on to ``scenario`` in place."""
    nodes: list[Body] = scenario["nodes"]
    names = [node["metadata"]["name"] for node in nodes]
    if options.declared_features:
        for node in nodes:
            if rng.random() < 0.7:
                chosen = [f for f in FEATURES if rng.random() < 0.5]
                if chosen:
                    node["status"]["declaredFeatures"] = sorted(chosen)
        for body in scenario["incoming"]:
            if rng.random() < 0.25:
                _needs_a_feature(rng, body)
    if options.dra_extended_resources and rng.random() < 0.5:
        _dra_extended_resources(rng, scenario)
    if options.nominated and rng.random() < 0.5:
        nominated = []
        for index in range(rng.randint(1, 3)):
            body = pod(rng, f"nominated-{index}", names)
            body["status"]["nominatedNodeName"] = rng.choice(names)
            nominated.append(body)
        scenario["nominated"] = nominated


class PodMaker(Protocol):
    """``generator.pending_pod``: a pending pod without claims."""

    def __call__(self, rng: random.Random, name: str, nodes: list[str]) -> Body: ...


def _needs_a_feature(rng: random.Random, body: Body) -> None:
    spec = body["spec"]
    if rng.random() < 0.5:
        # hostNetwork: the API server defaults each container port's hostPort to it; keep
        # the pod portless so NodePorts is not part of the question.
        for container in spec["containers"]:
            container.pop("ports", None)
        spec["hostNetwork"] = True
        spec["hostUsers"] = False
    else:
        container = spec["containers"][0]
        container["restartPolicy"] = "Never"
        container["restartPolicyRules"] = [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ]


def _dra_extended_resources(rng: random.Random, scenario: Body) -> None:
    """A DeviceClass serving DRA_RESOURCE, devices on some nodes (a device plugin's
    allocatable on some others), and pending pods asking for 1 or 2."""
    scenario["deviceClasses"] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "accel"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                "extendedResourceName": DRA_RESOURCE,
            },
        }
    ]
    slices = []
    for node in scenario["nodes"]:
        name = node["metadata"]["name"]
        roll = rng.random()
        if roll < 0.5:
            devices = [{"name": f"accel-{i}"} for i in range(rng.randint(1, 2))]
            slices.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-{DRIVER}"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices,
                    },
                }
            )
        elif roll < 0.65:  # served by a device plugin on this node instead
            count = rng.choice(("1", "2"))
            node["status"]["allocatable"][DRA_RESOURCE] = count
            node["status"]["capacity"][DRA_RESOURCE] = count
    scenario["resourceSlices"] = slices
    for body in scenario["incoming"]:
        if rng.random() < 0.35:
            count = rng.choice(("1", "1", "2"))
            resources = body["spec"]["containers"][0].setdefault("resources", {})
            resources.setdefault("limits", {})[DRA_RESOURCE] = count
            if "requests" in resources:  # else the API server copies the limits
                resources["requests"][DRA_RESOURCE] = count
