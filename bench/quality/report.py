"""The placement-quality report: tables, the README headline and plots from a results file.

    python -m bench quality-report [bench/results/quality-full.json] [--publish]

With ``--publish`` the plots go to ``bench/quality-*.png``, the section to
``bench/quality.md`` and into bench/README.md (between the ``quality`` markers; bench/report.py
embeds bench/quality.md there too, so ``python -m bench report --publish`` keeps it);
otherwise everything goes beside the results file (git-ignored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import env as env_mod
from bench.quality import metrics, owned, scenarios
from bench.quality import systems as qsys

BENCH = env_mod.ROOT / "bench"
BEGIN, END = "<!-- quality:begin -->", "<!-- quality:end -->"
COLOURS = {
    qsys.KUBE: "tab:orange",
    qsys.ESTIMATE: "tab:blue",
    qsys.ESTIMATE_LEARN: "tab:purple",
    qsys.NO_ESTIMATE: "tab:cyan",
    qsys.RANDOM: "tab:grey",
    qsys.OWNED: "tab:olive",
    qsys.REBALANCE: "tab:green",
}
DPI = 80


def _label(system: str) -> str:
    return qsys.SYSTEMS[system].label if system in qsys.SYSTEMS else system


def _trial(results: dict[str, Any], key: str, system: str) -> dict[str, Any] | None:
    return next(
        (
            t
            for t in results.get("trials", [])
            if t.get("scenario") == key and t.get("system") == system and "error" not in t
        ),
        None,
    )


def _keys(results: dict[str, Any]) -> list[str]:
    return [k for k in scenarios.KEYS if any(t.get("scenario") == k for t in results["trials"])]


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ms(seconds: Any) -> str:
    return "n/a" if seconds is None else f"{1000 * float(seconds):.0f}"


# --- tables ------------------------------------------------------------------------------


def scenario_table(results: dict[str, Any], key: str) -> list[str]:
    """One row per system: every figure of scenario ``key``."""
    lines = [
        "| system | pods bound (unplaced) | node-s > 80 % (share) | node-s > 100 % "
        "| hottest node, max | hottest at end of burst | std dev across nodes "
        "| overruns / binds | pod latency p50 / p99 ms | create→bind p99 s | mean node util. |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for system in qsys.ORDER:
        t = next(
            (
                t
                for t in results.get("trials", [])
                if t.get("scenario") == key and t.get("system") == system
            ),
            None,
        )
        if t is None:
            continue
        if "error" in t:
            lines.append(f"| {_label(system)} | harness error: {t['error'][:80]} |" + " |" * 9)
            continue
        share = t.get("fraction_above_80")
        end = (
            f"{_f(t.get('hottest_end_of_burst'))} ({t.get('hottest_end_of_burst_node')})"
            if t.get("hottest_end_of_burst") is not None
            else "-"
        )
        wait = (t.get("wait_ms") or {}).get("p99")
        lines.append(
            f"| {_label(system)} | {t.get('bound')}/{t.get('pods')} ({t.get('unplaced')}) "
            f"| {_f(t.get('node_seconds_above_80'), 0)} "
            f"({'n/a' if share is None else f'{100 * share:.0f} %'}) "
            f"| {_f(t.get('node_seconds_above_100'), 0)} | {_f(t.get('hottest_max'))} | {end} "
            f"| {_f(t.get('stddev_mean'), 3)} | {t.get('overruns')} / {t.get('binds')} "
            f"| {_ms(t.get('latency_p50_s'))} / {_ms(t.get('latency_p99_s'))} "
            f"| {'n/a' if wait is None else f'{wait / 1000:.1f}'} "
            f"| {_f(t.get('utilisation_mean'))} |"
        )
    return lines


def backlog_figures(results: dict[str, Any]) -> tuple[float | None, float | None]:
    """Mean binds/s of the backlog trials, estimate on and off."""

    def mean(system: str) -> float | None:
        xs = [
            float(r["throughput"]["pods_per_s"])
            for r in results.get("backlog", [])
            if r.get("system") == system and (r.get("throughput") or {}).get("pods_per_s")
        ]
        return sum(xs) / len(xs) if xs else None

    # A backlog holds nothing and moves no metric: learning changes nothing there, so the
    # learn-on system's trials stand for "estimate on" when the other has none.
    on = mean(qsys.ESTIMATE)
    return (mean(qsys.ESTIMATE_LEARN) if on is None else on), mean(qsys.NO_ESTIMATE)


def backlog_table(results: dict[str, Any]) -> list[str]:
    rows = results.get("backlog") or []
    if not rows:
        return ["(no backlog trial in this results file)"]
    lines = ["| system | repeat | bound | binds/s (first→last) |", "|---|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r.get("rep", 0), r["system"])):
        tp = (r.get("throughput") or {}).get("pods_per_s")
        bound = f"{r.get('bound')}/{r.get('pods')}"
        lines.append(f"| {_label(r['system'])} | {r.get('rep')} | {bound} | {_f(tp, 1)} |")
    on, off = backlog_figures(results)
    if on and off:
        lines += ["", f"Estimate on ÷ off: **{on / off:.2f}x** (mean of the repeats)."]
    return lines


def target_rows(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 19's targets (same run, scenarios a and b): text, measured, holds."""
    rows: list[tuple[str, str, bool | None]] = []
    for key in ("a", "b"):
        k, e = _trial(results, key, qsys.KUBE), _trial(results, key, qsys.ESTIMATE)
        ks, es = (k or {}).get("node_seconds_above_80"), (e or {}).get("node_seconds_above_80")
        ok = None if ks is None or es is None else es <= 0.2 * ks
        rows.append(
            (f"({key}) node-s > 80 % ≤ 0.2x kube-scheduler's", f"{_f(es, 0)} vs {_f(ks, 0)}", ok)
        )
        over = (e or {}).get("overruns")
        rows.append(
            (
                f"({key}) 0 threshold overruns, estimate on",
                _f(over),
                None if over is None else over == 0,
            )
        )
        kp, ep = (k or {}).get("latency_p99_s"), (e or {}).get("latency_p99_s")
        ok = None if kp is None or ep is None else ep <= 0.7 * kp
        rows.append(
            (f"({key}) p99 pod latency ≤ 0.7x kube-scheduler's", f"{_ms(ep)} vs {_ms(kp)} ms", ok)
        )
    k, e = _trial(results, "a", qsys.KUBE), _trial(results, "a", qsys.ESTIMATE)
    kh, eh = (k or {}).get("hottest_end_of_burst"), (e or {}).get("hottest_end_of_burst")
    ok = None if kh is None or eh is None else eh <= kh - 0.15
    rows.append(
        (
            "(a) hottest node at the end of the burst ≥ 15 points below kube-scheduler's",
            f"{_f(eh)} vs {_f(kh)}",
            ok,
        )
    )
    on, off = backlog_figures(results)
    ok = None if on is None or off is None else on >= 0.9 * off
    rows.append(
        ("backlog binds/s, estimate on within 10 % of off", f"{_f(on, 1)} vs {_f(off, 1)}", ok)
    )
    return rows


def _counter(trial: dict[str, Any], result: str) -> float | None:
    """The operator's ``metricsched_rebalance_evictions_total`` of ``result`` (None: unread)."""
    counters = trial.get("rebalance_counters") or {}
    found = [
        float(v)
        for k, v in counters.items()
        if k.startswith("metricsched_rebalance_evictions_total{") and f'result="{result}"' in k
    ]
    return sum(found) if found else None


def rebalance_rows(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 23's targets (scenario c, rebalance on vs off, same run): text, measured, holds."""
    off, on = _trial(results, "c", qsys.OWNED), _trial(results, "c", qsys.REBALANCE)
    late_off = (off or {}).get("after_hotspot") or {}
    late_on = (on or {}).get("after_hotspot") or {}
    rows: list[tuple[str, str, bool | None]] = []
    for field, text in (
        ("node_seconds_above_80", "node-s > 80 % after the hot spot ≤ 0.3x without rebalancing"),
        (
            "avoidable_node_seconds_above_80",
            "the same, only while the node's floor is not above 80 % (not the issue's measure)",
        ),
    ):
        a, b = late_on.get(field), late_off.get(field)
        ratio = f" ({a / b:.2f}x)" if a is not None and b else ""
        ok = None if a is None or b is None else a <= 0.3 * b
        rows.append((text, f"{_f(a, 0)} vs {_f(b, 0)}{ratio}", ok))
    moved = (on or {}).get("rebalance") or {}
    per = moved.get("evictions_per_pod_moved")
    rows.append(
        (
            "evictions per pod moved ≤ 1.1",
            f"{_f(per)} ({moved.get('evictions')} evictions, {moved.get('pods_moved')} pods moved)",
            None if per is None else per <= 1.1,
        )
    )
    bad = moved.get("budget_violations")
    rows.append(("0 PodDisruptionBudget violations", _f(bad), None if bad is None else bad == 0))
    return rows


def rebalance_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| system | node-s > 80 % after the hot spot | of which avoidable | per hot node "
        "| evictions (Blocked by a budget) | pods moved | evictions per pod moved "
        "| budget violations (most of one budget down at once) | overruns / binds |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for system in qsys.PAIR:
        t = _trial(results, "c", system)
        if t is None:
            continue
        late = t.get("after_hotspot") or {}
        r = t.get("rebalance") or {}
        hot = ", ".join(f"{n} {v:.0f}" for n, v in (late.get("per_hot_node") or {}).items())
        lines.append(
            f"| {_label(system)} | {_f(late.get('node_seconds_above_80'), 0)} "
            f"| {_f(late.get('avoidable_node_seconds_above_80'), 0)} | {hot} "
            f"| {r.get('evictions')} ({_f(_counter(t, 'Blocked'), 0)}) | {r.get('pods_moved')} "
            f"| {_f(r.get('evictions_per_pod_moved'))} "
            f"| {r.get('budget_violations')} ({r.get('most_down_at_once')}) "
            f"| {t.get('overruns')} / {t.get('binds')} |"
        )
    return lines


def rebalance_section(results: dict[str, Any]) -> list[str]:
    """Issue 23's rows, when the results file has the rebalance pair."""
    if not any(_trial(results, "c", s) for s in qsys.PAIR):
        return []
    on = _trial(results, "c", qsys.REBALANCE) or {}
    spec = on.get("policy_rebalance") or qsys.REBALANCE_SPEC
    rows = ["| target | measured (rebalance on vs off) | holds |", "|---|---|---|"]
    for text, measured, ok in rebalance_rows(results):
        rows.append(
            f"| {text} | {measured} | {'n/a' if ok is None else ('yes' if ok else '**no**')} |"
        )
    return [
        "### Rebalancing (issue 23), scenario c",
        "",
        "Rebalancing moves only pods whose controller recreates them, so this pair plays "
        "scenario (c)'s events with each of its own pods as a 1-replica ReplicaSet (its life "
        "counts from its first pod's bind; at its end the ReplicaSet is deleted), under one "
        "PodDisruptionBudget per workload kind (`api`, `batch`, `web`; `maxUnavailable: "
        f"{owned.MAX_UNAVAILABLE}`); the other scheduler's pods stay bare. Both run "
        "metricsched with the estimate on as declared; *rebalance on* adds "
        f"`rebalance: {json.dumps(spec, separators=(', ', ': '))}` (a node past 0.8 for two "
        f"scrapes sheds up to {spec.get('maxPerNode')} pods per interval, each to a node the "
        f"dry run finds at or below {qsys.THRESHOLD - float(spec.get('margin', 0.0)):.2f} "
        "with the pod's estimate).",
        "",
        "**Figures.** *After the hot spot*: node-seconds above 0.8 from the moment the hot "
        "spot appears to the end, on every node (the issue's measure). *Avoidable*: the same, "
        "counted only while the node's floor (its background, the hot spot's from then on, "
        "plus the other scheduler's pods there, which no rebalancing of metricsched's pods "
        "moves; computed from the scenario, without noise) is itself at or below 0.8. "
        "*Evictions* and *pods moved* come from the pod watch: a pod the Eviction API took "
        "(its `DisruptionTarget` condition, `EvictionByEvictionAPI`), and a workload whose "
        "replacement runs on another node. *Blocked*: the operator's "
        '`metricsched_rebalance_evictions_total{result="Blocked"}` (a budget said 429). A '
        "*budget violation* is an eviction that left more of one budget's workloads down "
        "through evictions (evicted, replacement not yet running) than its maxUnavailable.",
        "",
        *rows,
        "",
        *rebalance_table(results),
        "",
        *([str(results["rebalance_note"]), ""] if results.get("rebalance_note") else []),
    ]


def targets_table(results: dict[str, Any]) -> list[str]:
    lines = ["| target | measured (estimate on vs baseline) | holds |", "|---|---|---|"]
    for text, measured, ok in target_rows(results):
        lines.append(
            f"| {text} | {measured} | {'n/a' if ok is None else ('yes' if ok else '**no**')} |"
        )
    return lines


def headline(results: dict[str, Any]) -> list[str]:
    """The README's headline table: on the same workload, metricsched vs kube-scheduler."""
    ms = (
        qsys.ESTIMATE
        if any(t.get("system") == qsys.ESTIMATE for t in results["trials"])
        else qsys.NO_ESTIMATE
    )
    lines = [
        f"On the same workload, {_label(ms)} vs kube-scheduler v1.35.4 "
        f"(`python -m bench quality --plan {results.get('plan')}`, "
        f"{results.get('started', '')[:10]}; bench/README.md, Placement quality):",
        "",
        "| scenario | node-s above 80 % | threshold overruns | hottest node "
        "| p99 pod latency ms | unplaced |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in _keys(results):
        k, m = _trial(results, key, qsys.KUBE), _trial(results, key, ms)
        if k is None or m is None:
            continue
        hot = "hottest_end_of_burst" if key == "a" else "hottest_max"
        lines.append(
            f"| ({key}) {scenarios.TITLES[key]} "
            f"| {_f(m.get('node_seconds_above_80'), 0)} vs {_f(k.get('node_seconds_above_80'), 0)} "
            f"| {m.get('overruns')} vs {k.get('overruns')} "
            f"| {_f(m.get(hot))} vs {_f(k.get(hot))} "
            f"| {_ms(m.get('latency_p99_s'))} vs {_ms(k.get('latency_p99_s'))} "
            f"| {m.get('unplaced')} vs {k.get('unplaced')} |"
        )
    return lines


# --- plots -------------------------------------------------------------------------------


def _systems(results: dict[str, Any], key: str) -> list[str]:
    return [s for s in qsys.ORDER if _trial(results, key, s)]


def plot_heat(results: dict[str, Any], key: str, out: Path) -> None:
    shown = _systems(results, key)
    if not shown:
        return
    fig, axes = plt.subplots(
        len(shown), 1, figsize=(8, 1.2 + 1.6 * len(shown)), squeeze=False, layout="constrained"
    )
    image = None
    for ax, system in zip(axes[:, 0], shown, strict=True):
        heat = (_trial(results, key, system) or {}).get("heat") or {}
        if not heat.get("t"):
            continue
        grid = [[float("nan") if v is None else v for v in row] for row in heat["cpu"]]
        ts = heat["t"]
        image = ax.imshow(
            grid,
            aspect="auto",
            cmap="inferno",
            vmin=0.0,
            vmax=1.2,
            interpolation="nearest",
            extent=(0, ts[-1] + (ts[0] if ts else 0), len(heat["nodes"]) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(heat["nodes"])), heat["nodes"], fontsize=5)
        ax.set_title(_label(system), fontsize=8)
        ax.tick_params(labelsize=6)
    axes[-1, 0].set_xlabel("seconds since the scenario started", fontsize=7)
    if image is not None:
        bar = fig.colorbar(image, ax=axes[:, 0].tolist(), shrink=0.8)
        bar.set_label("cpu utilisation (load model)", fontsize=7)
        bar.ax.tick_params(labelsize=6)
    fig.suptitle(f"({key}) {scenarios.TITLES[key]}: utilisation per node", fontsize=9)
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def plot_series(results: dict[str, Any], field: str, ylabel: str, out: Path) -> None:
    """One panel per scenario, one line per system: ``field`` is a [[t, y]] series."""
    keys = _keys(results)
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for system in _systems(results, key):
            series = (_trial(results, key, system) or {}).get(field) or []
            if series:
                xs, ys = zip(*series, strict=True)
                ax.plot(xs, ys, label=_label(system), color=COLOURS[system], linewidth=1.1)
        if field == "hottest_series":
            ax.axhline(metrics.HOT, color="red", linestyle="--", linewidth=0.8)
        ax.set_title(f"({key}) {scenarios.TITLES[key]}", fontsize=9)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


# --- the section -------------------------------------------------------------------------


def section(results: dict[str, Any], images: dict[str, str]) -> str:
    detail = results.get("plan_detail") or {}
    nodes = results.get("nodes") or []
    cpus = sum(n["cpu"] for n in nodes)
    m = results.get("machine") or {}
    parts = [
        "## Placement quality (issue 19)",
        "",
        f"Generated by `python -m bench quality --plan {results.get('plan')} --seed "
        f"{results.get('seed')}` ({results.get('started')} → {results.get('finished')}, "
        f"{results.get('wall_s')} s on {m.get('nproc')} CPUs; load average at the end "
        f"{m.get('load_average_end')}); re-render with `python -m bench quality-report --publish`.",
        *(["", str(results["note"])] if results.get("note") else []),
        "",
        f"**Setup.** {len(nodes)} kwok nodes of 4/8/16 cpus ({cpus} cpus) labelled for the load "
        "model (hack/loadmodel.py), with background cpu "
        f"{min((n['background'] for n in nodes), default=0):.2f}-"
        f"{max((n['background'] for n in nodes), default=0):.2f} (skewed low). The load model "
        f"ticks every second and Prometheus scrapes it every {results.get('scrape_interval')}; "
        f"metricsched refreshes every {results.get('refresh_interval')}. Pods use what their "
        "load-model annotation says, not what they request: `api` pods request 50m and use "
        "0.15-0.35 cores, `batch` pods request 500m and use 0.03-0.12, `web` pods request "
        "200m and use 0.12-0.24; usage ramps up over 10-30 s. Every system plays the same "
        "seeded events from the same state (no scenario pods, every node at its background, "
        "Prometheus showing it). Figures are the load model's ground truth (`--record`).",
        "",
        "**Systems.** kube-scheduler v1.35.4, default profile. metricsched with one policy "
        "metric: `max by (node) (node_cpu_utilisation)`, Minimize, weight 10 (kube-scheduler's "
        "default scores keep their weights), `threshold: {max: 0.8}`, burst penalty 5 for "
        f"60 s; *estimate on*: `estimate: {{from: Amount, resource: cpu, amount: "
        f"{scenarios.TYPICAL_USAGE}, settleTime: 45s}}` (learn off, the default); *estimate on, "
        "learn on*: the same with `learn: true`; *estimate off*: "
        "`estimate: {from: None}`. Random placement: a random node that fits the pod's "
        "requests (bench/quality/randombinder.py).",
        "",
        f"**Scenarios.** (a) a burst of {detail.get('burst_pods')} pods at once, observed "
        f'for {detail.get("burst_observe_s"):.0f} s; "hottest at end of burst" is the '
        f"highest node's mean over the last {metrics.END_WINDOW_S:.0f} s. (b) "
        f"{detail.get('steady_s'):.0f} s of Poisson arrivals at "
        f"{detail.get('steady_rate')}/s, each pod living {detail.get('life_s')} s after its "
        f"bind, plus {detail.get('other_initial')} pods (and {detail.get('other_rate')}/s "
        "more) bound directly by another scheduler, using 0.4-0.9 cores each; observed "
        f"{detail.get('tail_s'):.0f} s more. (c) as (b), and a third of the way in, the "
        f"{detail.get('hotspot_nodes')} coolest nodes' background jumps to "
        f"{detail.get('hotspot_cpu')} (`POST /background`).",
        "",
        "**Figures.** node-s > 80 %: the sum over load-model ticks of nodes above 0.8 times "
        "the tick (share: of all node-seconds). Overruns: binds of the system whose node's "
        "eventual utilisation, counting the pod, exceeded 0.8. Pod latency: each running pod, "
        "each tick, experiences its node's latency (service time 50 ms / (1 - utilisation)). "
        "Unplaced: the system's pods still pending at the end. create→bind p99: how long the "
        "threshold held pods.",
        "",
    ]
    for why in (results.get("skipped") or {}).items():
        parts += [f"Not run: {_label(why[0])} ({why[1]}).", ""]
    parts += ["### Targets (issue 19)", "", *targets_table(results), ""]
    parts += rebalance_section(results)
    for key in _keys(results):
        parts += [
            f"### ({key}) {scenarios.TITLES[key]}",
            "",
            *scenario_table(results, key),
            "",
            f"![utilisation heat map, scenario {key}]({images[f'heat-{key}']})",
            "",
        ]
    parts += [
        "### Hottest node and nodes above the threshold over time",
        "",
        f"![hottest node]({images['hottest']})",
        "",
        f"![nodes above 80 %]({images['over']})",
        "",
        "### Backlog throughput, estimate on vs off",
        "",
        f"A usage-free backlog of {detail.get('backlog_pods')} pods (threshold 100, which "
        "holds nothing), created before the scheduler starts; binds/s from first to last "
        "bind, alternating which system goes first.",
        "",
        *backlog_table(results),
        "",
        "### Headline (for the top-level README)",
        "",
        *headline(results),
        "",
    ]
    return "\n".join(parts)


def splice(readme: str, body: str) -> str:
    """``readme`` with the quality section replaced (or put before "## Machine")."""
    block = f"{BEGIN}\n{body.rstrip()}\n{END}\n"
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1].lstrip("\n")
    if "\n## Machine\n" in readme:
        head, rest = readme.split("\n## Machine\n", 1)
        return f"{head}\n{block}\n## Machine\n{rest}"
    return readme.rstrip() + "\n\n" + block


HEADLINE_BEGIN, HEADLINE_END = "<!-- quality-headline -->", "<!-- /quality-headline -->"


def splice_headline(readme: str, lines: list[str]) -> str:
    """The top-level README with its headline (between the ``quality-headline`` markers)
    replaced by ``lines``; unchanged when the markers are missing."""
    if HEADLINE_BEGIN not in readme or HEADLINE_END not in readme:
        return readme
    head, rest = readme.split(HEADLINE_BEGIN, 1)
    tail = rest.split(HEADLINE_END, 1)[1]
    return head + HEADLINE_BEGIN + "\n" + "\n".join(lines) + "\n" + HEADLINE_END + tail


def render(path: Path, *, publish: bool) -> None:
    results = json.loads(path.read_text())
    where = BENCH if publish else path.parent
    images = {f"heat-{k}": f"quality-heat-{k}.png" for k in _keys(results)}
    images |= {"hottest": "quality-hottest.png", "over": "quality-above-threshold.png"}
    for key in _keys(results):
        plot_heat(results, key, where / images[f"heat-{key}"])
    plot_series(
        results, "hottest_series", "hottest node's cpu utilisation", where / images["hottest"]
    )
    plot_series(results, "above_80_series", "nodes above 80 % cpu", where / images["over"])
    body = section(results, images)
    if publish:
        (BENCH / "quality.md").write_text(body)
        readme = BENCH / "README.md"
        readme.write_text(splice(readme.read_text(), body))
        front = BENCH.parent / "README.md"
        front.write_text(splice_headline(front.read_text(), headline(results)))
        target = BENCH / "quality.md"
    else:
        target = path.parent / f"{path.stem}-report.md"
        target.write_text(body)
    print(f"[quality] report: {target}", flush=True)
    print("\n".join(headline(results)), flush=True)
