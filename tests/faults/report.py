"""Render the fault suite's results (JSON) as docs/reliability.md.

    python -m tests.faults.report [--results PATH] [--out docs/reliability.md]

The scenarios write one record each (harness.Scenario.verify); this module only formats
them: the method, the table of invariant counts and recovery times, and the targets,
which are reported against, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

from tests.faults import harness

ROOT = Path(__file__).resolve().parents[2]
ORDER = [
    "le-blip",
    "le-hung",
    "le-inflight",
    "le-kill3",
    "api-kill",
    "watch-relist",
    "bind-reset",
    "load-backlog",
    "ha-policies",
    "prom-slow",
    "prom-refuse",
    "prom-refused-query",
    "prom-huge",
    "tenant-hostile",
    "tenant-starve",
    "poison-annotation",
    "port-flood",
    "watch-stall",
    "lease-deleted",
    "ca-rotate",
    "quiet-nodes",
]
# What each scenario does, in the order of the list (tests/faults/test_*.py).
WHAT = {
    "tenant-hostile": "With the admin's query rules on, one tenant applies a policy whose "
    "query is nested 300 deep and creates pods with 1,000 required anti-affinity terms and "
    "pods with 10,000 tolerations, while 250 ordinary pods arrive over 40 s: they must keep "
    "binding (no gap over 10 s), the Lease must not move, /healthz must not fail three "
    "probes in a row, and RSS stays under 400 MiB",
    "le-blip": "The leader's proxy refuses (resets open and new connections) for 3 s while "
    "pods are queued and arriving; pods keep arriving for 30 s after, long enough for a "
    "leader that silently stopped renewing to be replaced while it still binds",
    "le-hung": "The leader's proxy blackholes for 40 s (its Lease renewal hangs); the "
    "standby must take over, the old leader must not bind after its Lease ran out, "
    "requests it gave up on are not delivered when the partition heals",
    "le-inflight": "While the leader is binding a 250-pod burst, its traffic is delayed "
    "4 s per chunk for 30 s: renewals miss the deadline and Bindings are in flight when "
    "the Lease is lost; none may land after it ran out",
    "le-kill3": "A 600-pod burst; the leader is SIGKILLed when 100, 250 and 400 pods are "
    "bound (restarted after 2 s by the harness)",
    "api-kill": "The API server (kube-apiserver) is SIGKILLed with 100 pods queued and "
    "restarted 10 s later; 150 pods arrive over the 30 s after",
    "watch-relist": "The leader's open connections stall; 50 bound pods and 2 empty nodes "
    "are deleted, 50 bound pods finish (Succeeded) and a policy that would hold half of the "
    "next pods is deleted; kube-apiserver restarts so the leader's watches get 410 Gone and "
    "its informers and kopf re-list; new pods then fill the nodes back to ~95 %: they need "
    "the freed capacity, must not go to the deleted nodes, and must not wait for the "
    "deleted policy",
    "bind-reset": "During a 400-pod burst, 5 % of the leader's client→server chunks are "
    "forwarded and then answered with a connection reset (Bindings, Events, renewals alike)",
    "load-backlog": "Two thousand pods that fit no node, a heartbeat patch on every node each "
    "second, and 300 schedulable pods arriving over 10 s: all 300 must bind (a pod "
    "still pending 300 s later counts as lost)",
    "ha-policies": "Two hundred SchedulingPolicies created at once with 2 replicas, 40 pods pinned "
    "to them; over the scenario, status writes must come from the Lease holder only, "
    "number at most 3 per policy, and no scheduledPods/fallbackPods counter may go down",
    "prom-slow": "A fault proxy in front of Prometheus holds every chunk 10 s each way (an "
    "answer after ~20 s) under a policy of 10 metrics; pods arrive before, during and after; "
    "every replica's /healthz, probed each second, must never fail and no replica may exit; "
    "the pods of the fault go by the fallback",
    "prom-refuse": "Prometheus refuses connections for the fault (the policy turns not "
    "Ready), pods arrive and are placed by the fallback; then it returns: the policy is "
    "Ready again with MetricQueryFailed and MetricsRecovered events; /healthz never fails",
    "prom-refused-query": "The replicas run with an allow-list the policy's query is "
    "outside of: the policy reports BadQuery, pods are placed by the fallback, and the "
    "proxy in front of Prometheus saw no connection at all (the query was never sent)",
    "tenant-starve": "Namespace A has 40 policies whose queries a shim in front of "
    "Prometheus answers in 2 s each; namespace B has one policy whose pods wait unless its "
    "metric is at most 8 s old (fallback Wait). B's query must be answered at least every "
    "10 s and each of B's 30 pods, created one a second, must bind within 10 s",
    "poison-annotation": "Two pods of another scheduler (bound at creation, another "
    "scheduler's name) carry a metricsched.io/decision annotation 3,000 arrays deep from "
    "before the replicas start: both replicas must become Ready, 50 of our pods must bind "
    "within 30 s, and after the leader is SIGKILLed the 20 pods created then must bind "
    "within 60 s and the killed replica must be Ready again",
    "port-flood": "From the harness, 80 TCP connections that never send a byte are held to "
    "the leader's health port for 90 s, each re-opened as soon as the operator closes it, "
    "while 200 pods arrive in waves; every replica's /healthz is probed every 2 s with a "
    "2-s timeout (the chart's livenessProbe). No replica may fail 3 probes in a row (the "
    "kubelet would restart it) or exit, the Lease must not move, and the pods must keep "
    "binding with no gap over 10 s",
    "quiet-nodes": "Soak (make soak, not in make test): 3 nodes added, then left alone for "
    "180 s (no node changes: kwok posts a node's status every ~10 minutes) while a pod of ours "
    "arrives every 10 s. No replica may hold scheduling on the quiet Node watch or re-list "
    "it as stalled, every pod must bind within 10 s, and an independent watch must see a "
    "quiet stretch of 130 s or the scenario tested nothing.",
    "watch-stall": "The leader's proxy freezes the server→client side of its watch streams "
    "(no close, no reset, no API server restart; the Lease renewal and Bindings still "
    "pass) while another scheduler binds pods filling 5 nodes to 90-98 % of their cpu, and "
    "pods of ours (250m, more than any of those nodes has left) arrive every 4 s for 125 s; "
    "half-full spare nodes hold them. No node may be overcommitted, the leader must log its "
    "bound-pod watch stalled and re-list it within 100 s of the stall (90 s of silence + "
    "one LIST: resync s), and it must keep the Lease (a new leader's fresh cache would "
    "hide the stall)",
    "lease-deleted": "While pods stream in (20 a second) and the leader binds them, the "
    "Lease is deleted (CoordinationV1Api); if the old leader re-creates it first, it is "
    "deleted again at a random phase, up to 15 times, until the standby holds it; 50 more "
    "pods arrive over 20 s. Never two binders: once the standby has written the Lease "
    "naming itself, a Binding by the old leader counts as a non-holder's (audit). The old "
    "leader's Bindings after the last delete and after the takeover, and the new "
    "holder's first Binding, are listed",
    "ca-rotate": "While the operator leads (40 pods bound), kube-apiserver is restarted "
    "serving a certificate signed by a new CA to the replicas (an SNI certificate for the "
    "name they call it by, localhost; every other client of the shared control plane keeps "
    "the cluster's CA), and the CA file the replicas read is replaced on disk as the "
    "kubelet replaces a projected service-account CA (a new directory, the ..data symlink "
    "swapped); then 80 pods arrive, 10 every 3 s. Each must be bound within 60 s of its "
    "creation (the restart, a failed watch retried, kopf restarted to log in with the new "
    "CA, a takeover's lease duration, with room to spare), and the Lease must have been "
    "written over the new CA within the last lease duration (audit) by a holder, either "
    "the leader renewing or a standby that took over",
    "prom-huge": 'A shim in front of Prometheus answers one policy\'s query ("huge", a '
    "metric without its by (node)) with 500,000 series, streamed; each replica runs in a "
    "memory cgroup limited to the chart's 512 MiB where the machine has one (see memory "
    "limit below). That policy must report ResultTooLarge with the cap in its message, "
    'the other policy ("latency", polled every 2 s) must stay Ready, pods pinned to '
    "either are placed, no replica may be OOM-killed or exit, /healthz never fails, and "
    "each replica's peak RSS (VmHWM), read after at least 3 huge answers, stays under "
    "512 MiB",
}
TAKEOVER_TARGET_S = 15.0
FIRST_BIND_TARGET_S = 5.0

METHOD = """\
## Method

Every scenario runs against the real local control plane (`hack/cluster.py`: etcd,
kube-apiserver, kube-controller-manager, kwok) with **two operator replicas** under
leader election, each a `metricsched run --leader-elect` process with

- its **own identity**: a ServiceAccount with the Helm chart's RBAC and a TokenRequest
  token, so kube-apiserver's audit log names the replica behind every request;
- its **own TCP fault proxy** in front of kube-apiserver (`tests/faults/proxy.py`; TLS
  stays end to end): `refuse` (reset open and new connections), `blackhole` (forward and
  answer nothing), `delay` (N ms per chunk), `reset` (forward a chunk, then drop the
  answer and reset the client: the request was applied, its answer is lost),
  `stall_existing` (freeze the open connections, new ones pass);
- a **supervisor** that restarts it when it exits, as a kubelet would.

Each scenario has its own scheduler name, namespace and kwok nodes; its pods select
those nodes, and the nodes are sized so the pods fill them to about 95 % of cpu, so a
double placement shows as an overcommitted node. An **independent checker** (its own
watch and LISTs, its own quantity parsing; `tests/faults/checker.py`, `audit.py`) then
counts, after a generous wait ({settle:.0f} s) for the schedulable pods:

- **pods lost**: a created pod, neither deleted by the scenario nor unschedulable by
  design, that is not bound to a node that exists;
- **overcommitted nodes**: a scenario node whose bound non-terminal pods request more
  cpu, memory or pods than it allocates;
- **Bindings by a non-holder**: a successful `pods/binding` by replica X at audit time T
  where the last successful Lease write before T was not X's, did not name X as
  holder (a release or another holder), or
  T ≥ that write's time + leaseDurationSeconds (a 504 Binding of a pod that ended bound
  counts as applied);
- **crash loops**: an exit of a replica the harness did not cause, outside every fault
  window and the {explain:.0f} s after it;
- and, because a bound pod must not look unscheduled to cluster autoscalers:
  **bound pods marked PodScheduled=False** (a Binding the server applied, reported as
  failed). Shown in the details; part of the verdict.

Recovery times are measured by the checker's watch (first bind) and the audit log
(takeover: the first Lease write naming a new holder), from the end of the fault
(takeover: from its start). They are reported against the targets below, never asserted.
"""


def _fmt_s(v: Any) -> str:
    return "-" if v is None else f"{float(v):.1f}"


def _target(v: Any, limit: float) -> str:
    if v is None:
        return "-"
    return f"{float(v):.1f} {'✓' if float(v) <= limit else '✗'}"


def render(results: dict[str, Any]) -> str:
    from tests.faults import replicas

    keys = [k for k in ORDER if k in results] + sorted(k for k in results if k not in ORDER)
    lines = [
        "# Reliability under faults",
        "",
        "Generated by `make faults-report` (`python -m tests.faults.report`) from "
        "`docs/reliability.json`; do not edit by hand. What the operator promises under "
        "faults is in the README; this is the evidence.",
        "",
        METHOD.format(settle=harness.SETTLE_S, explain=replicas.EXPLAIN_AFTER_S),
        "## Results",
        "",
        f"Targets (report only): takeover ≤ {TAKEOVER_TARGET_S:g} s after the leader is lost; "
        f"first bind ≤ {FIRST_BIND_TARGET_S:g} s after an API outage ends (marked ✓/✗ only "
        "where the scenario is an outage or loses the leader).",
        "",
        "| Scenario | Pods (unsched.) | Nodes, fill | Lost | Overcommitted | Non-holder binds | "
        "Crash loops | Takeover s | First bind s | Drained s | Verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in keys:
        r = results[k]
        inv = r.get("invariants", {})
        rec = r.get("recovery", {})
        pods = f"{r.get('pods', 0)} ({r.get('unschedulable_by_design', 0)})"
        first_bind = (
            _target(rec.get("first_bind_s"), FIRST_BIND_TARGET_S)
            if r.get("outage")
            else _fmt_s(rec.get("first_bind_s"))
        )
        lines.append(
            f"| {r.get('title', k)} (`{k}`) | {pods} "
            f"| {r.get('nodes', 0)}, {100 * float(r.get('fill', 0)):.0f} % "
            f"| {inv.get('pods_lost', '?')} | {inv.get('overcommitted_nodes', '?')} "
            f"| {inv.get('non_holder_bindings', '?')} | {inv.get('crash_loops', '?')} "
            f"| {_target(rec.get('takeover_s'), TAKEOVER_TARGET_S)} "
            f"| {first_bind} "
            f"| {_fmt_s(rec.get('drained_s'))} | {'pass' if r.get('passed') else '**FAIL**'} |"
        )
    lines += ["", "## Details per scenario", ""]
    for k in keys:
        r = results[k]
        lines.append(f"### `{k}`: {r.get('title', k)}")
        lines.append("")
        if k in WHAT:
            lines.append(WHAT.get(k, r.get("title", k)) + ".")
            lines.append("")
        lines.append(f"- run: {r.get('when', '?')}")
        for f in r.get("faults", []):
            lines.append(f"- fault: {f}")
        lines.append(f"- Bindings per replica (audit): {r.get('bindings_by_replica', {})}")
        marked = (r.get("invariants") or {}).get("bound_marked_unschedulable")
        lines.append(f"- bound pods marked PodScheduled=False: {marked}")
        exits = {n: len(e) for n, e in (r.get("exits") or {}).items()}
        lines.append(f"- replica exits (restarted by the harness): {exits}")
        skip = {
            "title",
            "when",
            "pods",
            "unschedulable_by_design",
            "nodes",
            "fill",
            "invariants",
            "recovery",
            "bindings_by_replica",
            "exits",
            "faults",
            "passed",
            "failures",
            "outage",
        }
        for name, v in sorted(r.items()):
            if name not in skip:
                lines.append(f"- {name.replace('_', ' ')}: {v}")
        for f in r.get("failures") or []:
            lines.append(f"- **failed:** {f}")
        lines.append("")
    lines += [
        "## Environment",
        "",
        f"Rendered on {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}. "
        "Run: `make faults-report` (the suite alone: `make faults`).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "docs" / "reliability.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as e:
        print(f"error: no results in {args.results}: {e}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
