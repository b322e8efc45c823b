"""Which kube-scheduler's rules apply: the API server's minor version, mapped to switches.

metricsched filters as kube-scheduler of the cluster's own minor version does, with that
version's feature gates at their defaults. The operator reads the API server's
``/version`` at start (``parse.server_version_from_body``) and hands the ``Rules`` it maps
to (``rules_for``) to every cycle, explicitly: nothing here is module state.

Supported: v1.35 to v1.37. A version outside that range gets the nearest supported rules
and a warning that says so (``Choice.warning``): older clusters lack fields the newer
rules read, newer ones may have filters metricsched does not know yet.

| gate (KEP)                                   | 1.35      | 1.36      | 1.37      |
|----------------------------------------------|-----------|-----------|-----------|
| NodeDeclaredFeatures (5328)                  | alpha off | beta on   | GA        |
| DRAExtendedResource (5004)                   | alpha off | beta on   | GA        |
| InPlacePodLevelResourcesVerticalScaling (5419) | alpha off | beta on | beta on   |

Changes without a gate: NodeResourcesBalancedAllocation scores the change in balance from
v1.36; DynamicResources' PostFilter stops saying ``no new claims to deallocate`` in v1.37;
InterPodAffinity matches the incoming pod's namespaceSelector against namespace labels
in v1.37; in-place resize counts the largest of the summed spec, actuated and allocated
requests in v1.37.

Purely computational: no I/O, no clocks, no module-level state beyond these constants.
"""

from __future__ import annotations

import dataclasses
from typing import Final


@dataclasses.dataclass(frozen=True, slots=True)
class Rules:
    """kube-scheduler's rules of one minor version (1.<minor>), gates at their defaults."""

    minor: int
    # KEP-5328: the NodeDeclaredFeatures filter (node.status.declaredFeatures)
    node_declared_features: bool
    # KEP-5004: NodeResourcesFit leaves an extended resource a DeviceClass maps, and the
    # node does not list in allocatable, to DRA
    dra_extended_resources: bool
    # KEP-5419: pod-level resources resized in place (status.resources at pod level)
    pod_level_resize: bool
    # NodeResourcesBalancedAllocation scores the change in balance the pod makes,
    # ``50 + (50 + with pod - without pod) / 2``, not the balance with the pod (v1.36+)
    balance_change_score: bool
    # DynamicResources' PostFilter says ``no new claims to deallocate`` for a pod without
    # claims (to v1.36); from v1.37 it answers Unschedulable with no words
    dra_post_filter_says_no_claims: bool
    # InterPodAffinity matches the incoming pod's namespaceSelector against the namespaces'
    # labels (v1.37); to v1.36 its PreFilter cleared a copy of the selector, which was then
    # matched against empty labels (``selectors.as_merged_by_kube``)
    namespace_selector_labels: bool
    # in-place resize: a pod counts the largest of its spec's, actuated and allocated
    # requests each summed over its containers (v1.37), not the sum of each container's
    # largest (to v1.36)
    resize_max_of_sums: bool

    @property
    def name(self) -> str:
        return f"v1.{self.minor}"


V1_35: Final = Rules(
    minor=35,
    node_declared_features=False,
    dra_extended_resources=False,
    pod_level_resize=False,
    balance_change_score=False,
    dra_post_filter_says_no_claims=True,
    namespace_selector_labels=False,
    resize_max_of_sums=False,
)
V1_36: Final = Rules(
    minor=36,
    node_declared_features=True,
    dra_extended_resources=True,
    pod_level_resize=True,
    balance_change_score=True,
    dra_post_filter_says_no_claims=True,
    namespace_selector_labels=False,
    resize_max_of_sums=False,
)
V1_37: Final = Rules(
    minor=37,
    node_declared_features=True,
    dra_extended_resources=True,
    pod_level_resize=True,
    balance_change_score=True,
    dra_post_filter_says_no_claims=False,
    namespace_selector_labels=True,
    resize_max_of_sums=True,
)

SUPPORTED: Final = (V1_35, V1_36, V1_37)
DEFAULT: Final = V1_35
"""The rules of the differential oracle's pinned version: tests, ``explain`` without a
cluster, and an operator that could not read ``/version``."""


@dataclasses.dataclass(frozen=True, slots=True)
class ServerVersion:
    """The API server's ``/version``: major and minor as numbers, and its gitVersion."""

    major: int
    minor: int
    git_version: str = ""

    @property
    def name(self) -> str:
        return self.git_version or f"v{self.major}.{self.minor}"


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """The rules chosen for a server, and a warning when they are not its own."""

    rules: Rules
    warning: str = ""


def rules_for(version: ServerVersion | None) -> Choice:
    """The rules for ``version``: its own if supported, else the nearest supported ones
    with a warning (None: the version could not be read)."""
    lowest, highest = SUPPORTED[0], SUPPORTED[-1]
    span = f"{lowest.name} to {highest.name}"
    if version is None:
        return Choice(
            DEFAULT,
            f"the API server's version could not be read; applying kube-scheduler "
            f"{DEFAULT.name}'s rules (supported: {span})",
        )
    if version.major == 1:
        for rules in SUPPORTED:
            if rules.minor == version.minor:
                return Choice(rules)
    older = version.major < 1 or (version.major == 1 and version.minor < lowest.minor)
    nearest = lowest if older else highest
    return Choice(
        nearest,
        f"the API server is {version.name}, outside the versions metricsched supports "
        f"({span}); applying kube-scheduler {nearest.name}'s rules, which may "
        + (
            "read fields this cluster does not have"
            if older
            else "lack filters this cluster's kube-scheduler has: pods may be placed where "
            "the kubelet rejects them"
        ),
    )
