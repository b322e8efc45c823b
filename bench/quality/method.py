"""The placement-quality section's method text: what was run, on which metric pipeline,
what each system declared, the scenarios and what each figure means, all read from a
results file so that the conditions printed beside the figures are the run's own.

Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from bench.quality import metrics, scenarios
from bench.quality import systems as qsys


def conditions(results: dict[str, Any]) -> str:
    """One line to put beside a table: pipeline, intervals, seeds, what a cell shows."""
    p = results.get("pipeline") or {}
    seeds = results.get("seeds") or [results.get("seed")]
    name = p.get("name") or "gauge (issue 19's runs: no pipeline recorded)"
    scrape = p.get("scrape") or results.get("scrape_interval")
    refresh = p.get("refresh") or results.get("refresh_interval")
    smoke = "SMOKE RUN, not a result; " if results.get("plan") == "smoke" else ""
    best = "BEST CASE; " if p.get("best_case") or not p else ""
    return (
        f"*{smoke}{best}pipeline {name}: scrape {scrape}, metricsched refresh {refresh}; "
        f"plan {results.get('plan')}; seeds {','.join(str(s) for s in seeds)}; a cell is the "
        "median over the seeds, [lowest to highest] when they differ.*"
    )


def _stanza(system: str, key: str, pipeline: qsys.Pipeline) -> str:
    found = qsys.estimate(system, scenario=key, pipeline=pipeline)
    if found is None:
        return "nothing (no `estimate`)"
    return "`estimate: " + json.dumps(found, separators=(", ", ": ")).replace('"', "") + "`"


def _pipeline(results: dict[str, Any]) -> qsys.Pipeline | None:
    name = (results.get("pipeline") or {}).get("name")
    return qsys.PIPELINES.get(name) if name else None


def lines(results: dict[str, Any]) -> list[str]:
    """The section's method paragraphs."""
    detail = results.get("plan_detail") or {}
    nodes = results.get("nodes") or []
    cpus = sum(n["cpu"] for n in nodes)
    pipeline = _pipeline(results)
    out: list[str] = []
    if results.get("plan") == "smoke":
        out += [
            "**SMOKE RUN.** This proves the harness works end to end (few nodes, short "
            "scenarios, few systems and seeds); its figures are not a result and support "
            "no claim.",
            "",
        ]
    if pipeline is None or pipeline.best_case:
        out += [
            "**BEST CASE.** The metric is an instantaneous gauge scraped every 5 s and "
            "metricsched refreshes every 5 s: the freshest data any scheduler could have. "
            "The realistic plan (`--pipeline realistic`, the default) is the headline.",
            "",
        ]
    if pipeline is not None:
        out += [
            f"**Pipeline ({pipeline.name}).** {pipeline.title}. The policy metric is "
            f"`{pipeline.query}` (nodeLabel `{pipeline.node_label}`). The operator's per-pod "
            f"usage query is its default (cAdvisor's `container_cpu_usage_seconds_total` as "
            f"kube-prometheus-stack scrapes it) with the rule's window, [{pipeline.window}], "
            f"and `--pod-usage-settle-time={pipeline.pod_settle}` (the pods' 10-30 s ramp plus "
            "the window). hack/prometheus-rules.yml rates over [30s], not [5m], and says why "
            "(the bench's nodes and pods are minutes old); a [5m] window lags more.",
            "",
        ]
    out += [
        f"**Setup.** {len(nodes)} kwok nodes of 4/8/16 cpus ({cpus} cpus) labelled for the load "
        "model (hack/loadmodel.py), with background cpu "
        f"{min((n['background'] for n in nodes), default=0):.2f}-"
        f"{max((n['background'] for n in nodes), default=0):.2f} (skewed low, shuffled by the "
        "seed). The load model ticks every second. Pods use what their load-model annotation "
        "says, not what they request: `api` pods request 50m and use 0.15-0.35 cores, "
        "`batch` pods request 500m and use 0.03-0.12, `web` pods request 200m and use "
        f"0.12-0.24; scenario d's pods request {scenarios.SCALE_REQUEST_CPU_M}m and use "
        f"{min(scenarios.SCALE_USAGES)}-{max(scenarios.SCALE_USAGES)} (one amount per "
        "Deployment); usage ramps up over 10-30 s. Every system plays the same seeded events "
        "from the same state (no scenario pods, every node at its background, Prometheus's "
        "policy metric showing it). Figures are the load model's ground truth (`--record`), "
        "never what a scheduler believed.",
        "",
        f"**Systems** (one run, one commit). kube-scheduler {qsys.kube_version(results)}, "
        "default profile. "
        "metricsched with one policy metric, Minimize, weight 10 (kube-scheduler's default "
        "scores keep their weights), `threshold: {max: 0.8}`, burst penalty 5 for 60 s (it "
        "applies only with estimate off: a counted estimate replaces it), fallback "
        "LeastAllocated; the rows differ only in `estimate` (scenario a's shown; b and c "
        "declare the same, d twice the amounts, its true mean being "
        f"{scenarios.SCALE_TYPICAL_USAGE}):",
        "",
    ]
    if pipeline is not None:
        for system in qsys.ORDER:
            if qsys.is_metricsched(system) and system not in qsys.PAIR:
                label = qsys.SYSTEMS[system].label
                out.append(f"- *{label}*: {_stanza(system, 'a', pipeline)}")
        out.append("")
    out += [
        "Random placement: a random node that fits the pod's requests "
        "(bench/quality/randombinder.py).",
        "",
        f"**Scenarios.** (a) a burst of {detail.get('burst_pods')} pods at once, observed "
        f"for {detail.get('burst_observe_s', 0):.0f} s. (b) "
        f"{detail.get('steady_s', 0):.0f} s of Poisson arrivals at "
        f"{detail.get('steady_rate')}/s, each pod living {detail.get('life_s')} s after its "
        f"bind, plus {detail.get('other_initial')} pods (and {detail.get('other_rate')}/s "
        "more) bound directly by another scheduler, using 0.4-0.9 cores each; observed "
        f"{detail.get('tail_s', 0):.0f} s more. (c) as (b), and a third of the way in, the "
        f"{detail.get('hotspot_nodes')} coolest nodes' background jumps to "
        f"{detail.get('hotspot_cpu')} (`POST /background`). (d) scale-out burst: "
        f"{detail.get('scale_deployments')} Deployments (kube-controller-manager makes their "
        f"pods) of {detail.get('scale_from')} replicas, scaled to {detail.get('scale_to')} "
        f"each at once {detail.get('scale_at_s', 0):.0f} s later (their first pods bound, "
        "ramped and measured by then), observed "
        f'{detail.get("scale_observe_s", 0):.0f} s more. "Hottest at end of burst" (a, '
        f"d) is the highest node's mean over the last {metrics.END_WINDOW_S:.0f} s.",
        "",
        "**Figures.** node-s > 80 %: the sum over load-model ticks of nodes above 0.8 times "
        "the tick (share: of all node-seconds). node-s > 100 %: the same above 1.0, the "
        "overload measure (demand, never clipped, so it does not saturate). Overruns: binds "
        "of the system whose node's eventual utilisation, counting the pod, exceeded 0.8. "
        "Pod latency: each running pod, each tick, experiences its node's latency (service "
        "time 50 ms / (1 - utilisation), capped at 2.5 s from 98 %: it saturates; node-s > "
        "100 % does not). Unplaced: the system's pods still pending at the end. Pending, "
        "longest: a pod's wait from creation to bind, a pod never bound counting until the "
        "end (no cap). Pending while a node had room: the longest unbroken wait of a pod while "
        "some node could take its full usage and stay at or below 0.8 by true utilisation "
        f"then (issue 27: none longer than {metrics.HELD_LIMIT_S:.0f} s).",
        "",
    ]
    return out
