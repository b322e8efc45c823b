"""The placement-quality report: tables, the README headline and plots from a results file.

    python -m bench quality-report [bench/results/quality-full.json] [--publish]

With ``--publish`` the plots go to ``bench/quality-*.png``, the section to
``bench/quality.md`` and into bench/README.md (between the ``quality`` markers; bench/report.py
embeds bench/quality.md there too, so ``python -m bench report --publish`` keeps it);
otherwise everything goes beside the results file (git-ignored).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import env as env_mod
from bench import plots
from bench.quality import cells, method, metrics, owned, scenarios
from bench.quality import systems as qsys

BENCH = env_mod.ROOT / "bench"
BEGIN, END = "<!-- quality:begin -->", "<!-- quality:end -->"
COLOURS = {
    qsys.DEFAULT: "tab:blue",
    qsys.KUBE: "tab:orange",
    qsys.MEASURED: "tab:pink",
    qsys.ESTIMATE: "tab:purple",
    qsys.AMOUNT_HALF: "tab:red",
    qsys.AMOUNT_DOUBLE: "tab:brown",
    qsys.NO_ESTIMATE: "tab:cyan",
    qsys.RANDOM: "tab:grey",
    qsys.OWNED: "tab:olive",
    qsys.REBALANCE: "tab:green",
}


def _label(system: str) -> str:
    return qsys.SYSTEMS[system].label if system in qsys.SYSTEMS else system


def _trial(results: dict[str, Any], key: str, system: str) -> dict[str, Any] | None:
    """The cell's first seed's trial (plots show one seed; tables the median of all)."""
    found = cells.trials(results, key, system)
    return found[0] if found else None


def _declared(results: dict[str, Any], key: str, system: str) -> str:
    """What the system's policy declared about pod usage in scenario ``key``."""
    if not qsys.is_metricsched(system):
        return "-"
    t = _trial(results, key, system) or {}
    stanza = t.get("estimate") if "estimate" in t else "?"
    if stanza is None:
        return "nothing"
    if stanza == "?":
        return "n/a"
    return "`" + json.dumps(stanza, separators=(", ", ": ")).replace('"', "") + "`"


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


def overrun_causes(results: dict[str, Any], key: str) -> list[str]:
    """Per metricsched system with overruns in scenario ``key``: how many, over every
    seed, had the pod itself undercounted and how many its node's other pods (the
    results' ``overrun_binds``; the JSON keeps each with the decision recorded)."""
    lines = []
    for system in qsys.ORDER:
        rows = [
            r
            for t in cells.trials(results, key, system)
            if qsys.is_metricsched(system)
            for r in t.get("overrun_binds") or ()
        ]
        if rows:
            pod = sum(1 for r in rows if r.get("cause") == "pod undercounted")
            lines.append(
                f"- {_label(system)}: {len(rows)} overruns over the seeds, {pod} with the pod "
                f"itself undercounted, {len(rows) - pod} with its node's other pods undercounted"
            )
    return (
        ["Overrun causes (each overrun's bind, true utilisation before and after):", "", *lines, ""]
        if lines
        else []
    )


def scenario_table(results: dict[str, Any], key: str) -> list[str]:
    """One row per system: every figure of scenario ``key``, the median over the seeds
    with its range in brackets when they differ."""
    lines = [
        "| system | pods bound (unplaced) | node-s > 80 % (share) | node-s > 100 % "
        "| hottest node, max | hottest at end of burst | std dev across nodes "
        "| overruns / binds | pod latency p50 / p99 ms | create→bind p99 s | mean node util. "
        "| pending, longest s (uncapped) | pending while a node had room, longest s "
        "| seeds | estimate declared |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for system in qsys.ORDER:
        ts = [
            t
            for t in results.get("trials", [])
            if t.get("scenario") == key and t.get("system") == system
        ]
        if not ts:
            continue
        good = cells.trials(results, key, system)
        if not good:
            lines.append(f"| {_label(system)} | harness error: {ts[0]['error'][:80]} |" + " |" * 13)
            continue
        one = len(good) == 1
        t = good[0]

        def c(field: str, digits: int = 0, scale: float = 1.0, *, system: str = system) -> str:
            found = cells.values(results, key, system, field)
            return cells.show([scale * v for v in found], digits)

        share = [
            100 * float(x["fraction_above_80"])
            for x in good
            if x.get("fraction_above_80") is not None
        ]
        if t.get("hottest_end_of_burst") is None:
            end = "-"
        elif one:
            end = f"{_f(t.get('hottest_end_of_burst'))} ({t.get('hottest_end_of_burst_node')})"
        else:
            end = c("hottest_end_of_burst", 2)
        waits = [
            float(x["wait_ms"]["p99"]) / 1000 for x in good if (x.get("wait_ms") or {}).get("p99")
        ]
        errors = len(ts) - len(good)
        seeds = ",".join(str(x) for x in cells.seeds(results, key, system))
        lines.append(
            f"| {_label(system)} | {c('bound')}/{c('pods')} ({c('unplaced')}) "
            f"| {c('node_seconds_above_80')} ({cells.show(share)} %) "
            f"| {c('node_seconds_above_100')} | {c('hottest_max', 2)} | {end} "
            f"| {c('stddev_mean', 3)} | {c('overruns')} / {c('binds')} "
            f"| {c('latency_p50_s', 0, 1000.0)} / {c('latency_p99_s', 0, 1000.0)} "
            f"| {cells.show(waits, 1)} | {c('utilisation_mean', 2)} "
            f"| {c('pending_max_s')} | {c('held_with_room_max_s')} "
            f"| {seeds}{f' ({errors} harness errors)' if errors else ''} "
            f"| {_declared(results, key, system)} |"
        )
    return lines


def backlog_figures(results: dict[str, Any]) -> tuple[float | None, float | None]:
    """Mean binds/s of the backlog trials, an estimate on (the default policy's, else a
    declared amount's: results from before issue 27) and off."""
    on = cells.backlog(results, qsys.DEFAULT)
    on = cells.backlog(results, qsys.ESTIMATE) if on is None else on
    return on, cells.backlog(results, qsys.NO_ESTIMATE)


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

    def med(key: str, system: str, field: str) -> float | None:
        return cells.median(results, key, system, field)

    for key in ("a", "b"):
        ks = med(key, qsys.KUBE, "node_seconds_above_80")
        es = med(key, qsys.ESTIMATE, "node_seconds_above_80")
        ok = None if ks is None or es is None else es <= 0.2 * ks
        rows.append(
            (f"({key}) node-s > 80 % ≤ 0.2x kube-scheduler's", f"{_f(es, 0)} vs {_f(ks, 0)}", ok)
        )
        over = med(key, qsys.ESTIMATE, "overruns")
        rows.append(
            (
                f"({key}) 0 threshold overruns, estimate on",
                _f(over),
                None if over is None else over == 0,
            )
        )
        kp, ep = med(key, qsys.KUBE, "latency_p99_s"), med(key, qsys.ESTIMATE, "latency_p99_s")
        ok = None if kp is None or ep is None else ep <= 0.7 * kp
        rows.append(
            (f"({key}) p99 pod latency ≤ 0.7x kube-scheduler's", f"{_ms(ep)} vs {_ms(kp)} ms", ok)
        )
    kh = med("a", qsys.KUBE, "hottest_end_of_burst")
    eh = med("a", qsys.ESTIMATE, "hottest_end_of_burst")
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


def _judged(rows: list[tuple[str, str, bool | None]], measured: str) -> list[str]:
    lines = [f"| target | measured ({measured}) | holds |", "|---|---|---|"]
    for text, found, ok in rows:
        lines.append(
            f"| {text} | {found} | {'n/a' if ok is None else ('yes' if ok else '**no**')} |"
        )
    return lines


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
        "metricsched with the default estimate (the policy declares none: each 1-replica "
        "ReplicaSet is a workload of its own, so a first pod counts its requests x 0.85 and a "
        "replacement what its workload was measured to use); *rebalance on* adds "
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


# --- rebalancing at scale (issue 32): scenarios c and e, every seed ------------------------

LATE = {"c": "after_hotspot", "e": "after_rise"}  # the trial's block "after the heat"
PAIR_FIGURES = (  # field, its block ("late": LATE[key]), digits, heading
    ("node_seconds_above_80", "late", 0, "node-s > 80 % after the heat"),
    ("node_seconds_above_100", "late", 0, "node-s > 100 % after the heat"),
    ("avoidable_node_seconds_above_80", "late", 0, "of the > 80 %, avoidable (c)"),
    ("evictions", "rebalance", 0, "evictions"),
    ("pods_moved", "rebalance", 0, "pods moved"),
    ("evictions_per_pod_moved", "rebalance", 2, "evictions per pod moved"),
    ("budget_violations", "rebalance", 0, "budget violations"),
    ("workloads_over_limit", "rebalance", 0, "workloads moved again within their limit"),
)


def pair_values(results: dict[str, Any], key: str, system: str, field: str) -> list[float]:
    """The pair's ``field`` (one of ``PAIR_FIGURES``) in every seed of the cell."""
    block = next(b for f, b, _, _ in PAIR_FIGURES if f == field)
    name = LATE[key] if block == "late" else block
    found = ((t.get(name) or {}).get(field) for t in cells.trials(results, key, system))
    return [float(v) for v in found if v is not None]


def _pair_median(results: dict[str, Any], key: str, system: str, field: str) -> float | None:
    found = pair_values(results, key, system, field)
    return statistics.median(found) if found else None


def rebalance_pair_rows(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 32's targets (rebalance on vs off, medians of the seeds, one run; the counts
    that must be 0 in every seed): text, measured, holds."""
    rows: list[tuple[str, str, bool | None]] = []
    for key, field, share, text in (
        ("e", "node_seconds_above_80", 0.3, "(e) node-s > 80 % after the rise ≤ 0.3x off"),
        ("e", "node_seconds_above_100", 0.3, "(e) node-s > 100 % after the rise ≤ 0.3x off"),
        (
            "c",
            "avoidable_node_seconds_above_80",
            0.5,
            "(c) avoidable node-s > 80 % after the hot spot ≤ 0.5x off",
        ),
    ):
        on = _pair_median(results, key, qsys.REBALANCE, field)
        off = _pair_median(results, key, qsys.OWNED, field)
        ratio = f" ({on / off:.2f}x)" if on is not None and off else ""
        ok = None if on is None or off is None else on <= share * off
        rows.append((text, f"{_f(on, 0)} vs {_f(off, 0)}{ratio}", ok))
    for key in ("c", "e"):
        per = _pair_median(results, key, qsys.REBALANCE, "evictions_per_pod_moved")
        rows.append(
            (f"({key}) evictions per pod moved ≤ 1.1", _f(per), None if per is None else per <= 1.1)
        )
        for field, text in (
            ("budget_violations", "0 budget violations, every seed"),
            ("workloads_over_limit", "no workload moved again within its limit, every seed"),
        ):
            found = pair_values(results, key, qsys.REBALANCE, field)
            worst = max(found) if found else None
            rows.append((f"({key}) {text}", _f(worst, 0), None if worst is None else worst == 0))
    return rows


def rebalance_pair_table(results: dict[str, Any]) -> list[str]:
    """One row per scenario and system of the pair: median [range] over the seeds."""
    lines = [
        "| scenario | system | seeds | " + " | ".join(h for *_, h in PAIR_FIGURES) + " |",
        "|---|---|---|" + "---:|" * len(PAIR_FIGURES),
    ]
    for key in ("c", "e"):
        for system in qsys.PAIR:
            if not cells.trials(results, key, system):
                continue
            shown = [
                "-"
                if key != "c" and field.startswith("avoidable")
                else cells.show(pair_values(results, key, system, field), digits)
                for field, _, digits, _ in PAIR_FIGURES
            ]
            seeds = ",".join(str(x) for x in cells.seeds(results, key, system))
            lines.append(f"| ({key}) | {_label(system)} | {seeds} | " + " | ".join(shown) + " |")
    return lines


def _budget_note(results: dict[str, Any]) -> str:
    """The operator-wide eviction budget the rebalance system ran with, as recorded."""
    given = {
        t.get("eviction_budget") for t in results.get("trials", []) if t.get("policy_rebalance")
    }
    if given <= {None}:
        return (
            "The operator's eviction budget is its default "
            "(`--rebalance-eviction-budget`, 10 a minute)."
        )
    shown = ", ".join(f"{b} a minute" for b in sorted(given - {None}))
    return (
        f"The operator's eviction budget: `--rebalance-eviction-budget` {shown} "
        "(0 lets none through)."
    )


def rebalance_pair_section(results: dict[str, Any]) -> list[str]:
    """Issue 32's rows, when the results file has the pair in scenario e."""
    if not any(cells.trials(results, "e", s) for s in qsys.PAIR):
        return []
    return [
        "### Rebalancing at scale (issue 32), scenarios c and e",
        "",
        "Scenario (e): only metricsched's own pods make the heat (no other scheduler, no "
        "hot spot): a `surge` workload arrives first, the usual mix follows, every pod "
        "stays, and the surge pods' usage steps up for good once all have settled; the "
        "nodes holding most of them go past 0.8 while the cluster as a whole stays under "
        "0.7. Same pair, policy and budgets as above (plus a `surge` budget). *After the "
        "heat*: from the hot spot (c) or the rise (e) to the end. *Workloads moved again "
        "within their limit*: a workload evicted more than `maxPerWorkload` times within "
        "`workloadInterval` (the operator's per-workload limiter failing). Each cell is the "
        "median over the seeds with its range. "
        f"{_budget_note(results)}",
        "",
        *_judged(rebalance_pair_rows(results), "rebalance on vs off"),
        "",
        *rebalance_pair_table(results),
        "",
    ]


def targets_table(results: dict[str, Any]) -> list[str]:
    """Issue 19's targets: the declared amount equal to the true mean vs kube-scheduler."""
    return _judged(target_rows(results), "amount = true mean vs kube-scheduler, medians")


def default_targets_table(results: dict[str, Any]) -> list[str]:
    """Issue 27's targets: the default policy vs kube-scheduler, same run."""
    return _judged(cells.target_rows(results), "default policy vs kube-scheduler, medians")


def headline(results: dict[str, Any]) -> list[str]:
    """The README's headline table: on the same workload, metricsched (its default policy,
    which declares nothing, when the run has it) vs kube-scheduler; medians [ranges]."""
    present = {t.get("system") for t in results.get("trials", [])}
    ms = next((s for s in (qsys.DEFAULT, qsys.ESTIMATE) if s in present), qsys.NO_ESTIMATE)
    pipeline = results.get("pipeline") or {}
    seeds = results.get("seeds") or ([results["seed"]] if results.get("seed") else [])
    told = f" --seeds {','.join(str(x) for x in seeds)}" if seeds else ""
    counted = (
        len(seeds) or len(cells.seeds(results, _keys(results)[0], ms)) if _keys(results) else 0
    )
    what = " (declares nothing about pod usage)" if ms == qsys.DEFAULT else ""
    how = f"; {pipeline['title']}" if pipeline.get("title") else ""
    lines = [
        f"On the same workload, {_label(ms)}{what} vs kube-scheduler "
        f"{qsys.kube_version(results)} "
        f"(`python -m bench quality --plan {results.get('plan')}"
        f"{' --pipeline ' + pipeline['name'] if pipeline.get('name') else ''}"
        f"{told}`, {results.get('started', '')[:10]}{how}; median [range] of {counted} seed(s); "
        "bench/README.md, Placement quality):",
        "",
        "| scenario | node-s above 80 % | threshold overruns | hottest node "
        "| p99 pod latency ms | unplaced |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in _keys(results):
        if not cells.trials(results, key, qsys.KUBE) or not cells.trials(results, key, ms):
            continue
        hot = "hottest_end_of_burst" if key in ("a", "d") else "hottest_max"

        def both(field: str, digits: int = 0, scale: float = 1.0, *, key: str = key) -> str:
            return " vs ".join(
                cells.show([scale * v for v in cells.values(results, key, s, field)], digits)
                for s in (ms, qsys.KUBE)
            )

        lines.append(
            f"| ({key}) {scenarios.TITLES[key]} | {both('node_seconds_above_80')} "
            f"| {both('overruns')} | {both(hot, 2)} | {both('latency_p99_s', 0, 1000.0)} "
            f"| {both('unplaced')} |"
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
    fig.savefig(out, dpi=plots.DPI)
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
        plots.style(ax)
    plots.save(fig, out, legend=axes[0][0])


# --- the section -------------------------------------------------------------------------


def section(results: dict[str, Any], images: dict[str, str]) -> str:
    detail = results.get("plan_detail") or {}
    m = results.get("machine") or {}
    p = results.get("pipeline") or {}
    seeds = results.get("seeds") or [results.get("seed")]
    conditions = method.conditions(results)
    parts = [
        "## Placement quality",
        "",
        f"Generated by `python -m bench quality --plan {results.get('plan')}"
        f"{' --pipeline ' + p['name'] if p.get('name') else ''} --seeds "
        f"{','.join(str(s) for s in seeds)}` ({results.get('started')} → "
        f"{results.get('finished')}, {results.get('wall_s')} s on {m.get('nproc')} CPUs; load "
        f"average at the end {m.get('load_average_end')}; code "
        f"{(results.get('code') or {}).get('git_head')}); re-render with "
        "`python -m bench quality-report FILE --publish`.",
        *(["", str(results["note"])] if results.get("note") else []),
        "",
        *method.lines(results),
    ]
    for why in (results.get("skipped") or {}).items():
        parts += [f"Not run: {_label(why[0])} ({why[1]}).", ""]
    parts += [
        "### Targets (issue 27): the default policy, which declares nothing",
        "",
        conditions,
        "",
        *default_targets_table(results),
        "",
        "### Targets (issue 19): a declared amount equal to the true mean",
        "",
        conditions,
        "",
        *targets_table(results),
        "",
    ]
    parts += rebalance_section(results)
    parts += rebalance_pair_section(results)
    for key in _keys(results):
        parts += [
            f"### ({key}) {scenarios.TITLES[key]}",
            "",
            conditions,
            "",
            *scenario_table(results, key),
            "",
            *overrun_causes(results, key),
            f"![utilisation heat map, scenario {key}]({images[f'heat-{key}']})",
            "",
        ]
    parts += [
        "### Hottest node and nodes above the threshold over time",
        "",
        f"Seed {seeds[0]} only (the tables hold every seed). {conditions}",
        "",
        f"![hottest node]({images['hottest']})",
        "",
        f"![nodes above 80 %]({images['over']})",
        "",
        "### Backlog throughput, the default policy vs estimate off",
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
