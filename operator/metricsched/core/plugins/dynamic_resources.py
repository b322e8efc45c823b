"""DynamicResources (DRA): the part metricsched does is to refuse pods with resource claims.

kube-scheduler's DynamicResources plugin allocates a pod's ResourceClaims to devices on
the chosen node while it schedules (on by default since v1.34). metricsched does not
allocate claims: binding such a pod would start it with its claims unallocated, so it is
refused for every node with a message that says so, and it is never bound.
"""

from __future__ import annotations

from typing import Final

from metricsched.core import columns, framework, model, versions

NAME: Final = "DynamicResources"
# Its PostFilter's answer for a pod without claims to v1.36; kube-scheduler runs it before
# DefaultPreemption and joins the two answers with ", ". From v1.37 it has no words.
POST_FILTER_NO_CLAIMS: Final = "no new claims to deallocate"


def post_filter_words(rules: versions.Rules) -> str:
    """What its PostFilter says for a pod without claims under ``rules``, with the
    ``", "`` that joins it to DefaultPreemption's answer ("" when it says nothing)."""
    return POST_FILTER_NO_CLAIMS + ", " if rules.dra_post_filter_says_no_claims else ""


def pre_filter(pod: model.PodInfo) -> str:
    """The PreFilter reason that rules out every node for ``pod``; "" when it has no claims."""
    if not pod.resource_claims:
        return ""
    return (
        f"pod has resource claims ({', '.join(pod.resource_claims)}), which metricsched does "
        "not allocate; set spec.schedulerName to a scheduler that does (default-scheduler)"
    )


class DynamicResources:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        refusal = pre_filter(cycle.pod)
        return framework.refuse(refusal) if refusal else framework.SKIP

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        return framework.all_pass(rows)  # never reached: a pod with claims is refused


PLUGIN: Final[framework.FilterPlugin] = DynamicResources()
