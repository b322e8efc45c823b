"""The report: PNG plots and bench/README.md rendered from a results file.

    python -m bench report [bench/results/latest-full.json] [--publish]

With ``--publish`` (what ``make bench`` does) the plots go to ``bench/*.png`` and the
report to ``bench/README.md``; otherwise both go to ``bench/results/`` (git-ignored), so a
smoke run never overwrites the committed report. The hand-written interpretation of the
profile lives in ``bench/analysis.md`` and is embedded verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import env as env_mod
from bench import plots, stats

BENCH = env_mod.ROOT / "bench"
ORDER = (
    "metricsched",
    "metricsched-events",
    "null",
    "null-64",
    "null-256",
    "kube-default",
    "kube-open",
    "kube-open-all",
)
COLOURS = {
    "metricsched": "tab:blue",
    "null": "tab:green",
    "kube-default": "tab:orange",
    "kube-open": "tab:red",
    "kube-open-all": "tab:purple",
    "metricsched-events": "tab:cyan",
    "null-64": "tab:olive",
    "null-256": "tab:gray",
}
LABELS = {
    "metricsched": "metricsched",
    "null": "Python null binder",
    "kube-default": "kube-scheduler QPS 50",
    "kube-open": "kube-scheduler QPS 5000",
    "kube-open-all": "kube-scheduler QPS 5000, all nodes scored",
    "metricsched-events": "metricsched, one Event per pod",
    "null-64": "Python null binder, 64 in flight",
    "null-256": "Python null binder, 256 in flight",
}


def _trials(results: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    return [t for t in results.get("trials", []) if t["scenario"] == scenario]


def _cell(trials: Iterable[dict[str, Any]], system: str, nodes: int) -> list[dict[str, Any]]:
    """Every repeat of one cell (scenario already chosen), in run order."""
    return [t for t in trials if t["system"] == system and t["nodes"] == nodes]


def _find(trials: Iterable[dict[str, Any]], system: str, nodes: int) -> dict[str, Any] | None:
    """The cell's median trial by throughput (the lower middle of an even count): the one
    a table of single-trial figures shows."""
    cell = sorted(_cell(trials, system, nodes), key=lambda t: _tp(t) or 0.0)
    return cell[(len(cell) - 1) // 2] if cell else None


def _tp(trial: dict[str, Any] | None) -> float | None:
    if trial is None:
        return None
    value = (trial.get("throughput") or {}).get("pods_per_s")
    return float(value) if value is not None else None


def _res(key: str) -> Any:
    return lambda t: (t.get("resources") or {}).get(key)


def _mr(cell: list[dict[str, Any]], get: Any) -> tuple[float, float, float] | None:
    """Median and range of one figure over a cell's repeats."""
    return stats.median_range([get(t) for t in cell])


def _med(cell: list[dict[str, Any]], get: Any) -> float | None:
    found = _mr(cell, get)
    return found[0] if found else None


def _tp_med(trials: Iterable[dict[str, Any]], system: str, nodes: int) -> float | None:
    return _med(_cell(trials, system, nodes), _tp)


def _fmt_mr(found: tuple[float, float, float] | None, digits: int = 1) -> str:
    """'median [lowest-highest]', or the one value when they are equal."""
    if found is None:
        return "n/a"
    median, low, high = found
    if low == high:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _load(trial: dict[str, Any]) -> str:
    """The 1-minute load average after the trial, and when the trial started (UTC)."""
    when = str(trial.get("started") or "")[11:16]
    load = _fmt((trial.get("load_average_after") or [None])[0], 2)
    return f"{load} ({when})" if when else load


# --- plots -----------------------------------------------------------------------------


def plot_bound_over_time(results: dict[str, Any], out: Path) -> None:
    backlog = _trials(results, "backlog")
    sizes = sorted({t["nodes"] for t in backlog})
    if not sizes:
        return
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.4), squeeze=False)
    for ax, n in zip(axes[0], sizes, strict=True):
        for system in ORDER:
            t = _find(backlog, system, n)
            if t is None or not t.get("bound_curve"):
                continue
            xs, ys = zip(*t["bound_curve"], strict=True)
            ax.plot(xs, ys, label=LABELS[system], color=COLOURS[system], linewidth=1.5)
        pods = max((t.get("pods") or 0 for t in backlog if t["nodes"] == n), default=0)
        ax.set_title(f"backlog of {pods} pods, {n} nodes", fontsize=9)
        ax.set_xlabel("seconds since the scheduler started", fontsize=8)
        ax.set_ylabel("pods bound", fontsize=8)
        plots.style(ax)
    plots.save(fig, out, legend=axes[0][0])


def plot_latency_cdf(results: dict[str, Any], out: Path) -> None:
    steady = _trials(results, "steady")
    sizes = sorted({t["nodes"] for t in steady})
    if not sizes:
        return
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 3.6), squeeze=False)
    for ax, n in zip(axes[0], sizes, strict=True):
        first = next(t for t in steady if t["nodes"] == n)
        for system in ORDER:
            t = _find(steady, system, n)
            if t is None or not t.get("latency_cdf"):
                continue
            xs, ys = zip(*t["latency_cdf"], strict=True)
            ax.plot([max(x, 0.5) for x in xs], ys, label=LABELS[system], color=COLOURS[system])
        ax.set_xscale("log")
        ax.axvline(100, color="grey", linestyle="--", linewidth=0.8)
        ax.axhline(0.99, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(
            f"create→bind latency, {first.get('rate')} pods/s for {first.get('duration_s')} s, "
            f"{n} nodes",
            fontsize=9,
        )
        ax.set_xlabel("ms (log; dashed: 100 ms)", fontsize=8)
        ax.set_ylabel("fraction of pods", fontsize=8)
        plots.style(ax)
    plots.save(fig, out, legend=axes[0][0])


def plot_cycle_cost(results: dict[str, Any], out: Path) -> None:
    rows = results.get("cycle_cost") or []
    if not rows:
        return
    xs = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    series = (
        ("schedule_one_no_detail_ms", "schedule_one, detail=False (the operator)"),
        ("schedule_one_replica_ms", "the same, a Deployment's replica"),
        ("schedule_one_distinct_ms", "the same, each pod of its own class"),
        ("schedule_one_ms", "schedule_one, detail=True (explain)"),
        ("run_filters_ms", "profile.find_feasible only (the filters)"),
    )
    for key, label in series:
        if all(key in r for r in rows):
            ax.plot(xs, [r[key] for r in rows], marker="o", label=label)
    slope = rows[0]["schedule_one_no_detail_ms"] / rows[0]["nodes"]
    ax.plot(xs, [slope * x for x in xs], linestyle="--", color="grey", label="linear from 100")
    ax.set_xlabel("nodes", fontsize=8)
    ax.set_ylabel("ms per pod (median)", fontsize=8)
    ax.set_title("cost of one scheduling cycle vs node count (in process)", fontsize=9)
    plots.style(ax)
    plots.save(fig, out, legend=ax)


# --- tables ----------------------------------------------------------------------------


def throughput_table(results: dict[str, Any]) -> list[str]:
    """Median [range] over the repeats; ratios are of medians. Nodes evaluated per pod is
    computed (bench/systems.py ``nodes_evaluated``), not measured."""
    backlog = _trials(results, "backlog")
    lines = [
        "| nodes | scheduler | nodes evaluated per pod (computed) | runs | bound "
        "| pods/s (first→last bind) | start→first bind s | ÷ null binder | ÷ kube QPS 5000 "
        "| ÷ kube all nodes scored | cores used, drain | CPU ms/pod, drain "
        "| CPU ms/pod, whole process | load avg (1 min) (at) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted({t["nodes"] for t in backlog}):
        base = {s: _tp_med(backlog, s, n) for s in ORDER}
        for system in ORDER:
            cell = _cell(backlog, system, n)
            if not cell:
                continue
            t = _find(backlog, system, n) or cell[0]
            tp = base[system]
            bound = "; ".join(
                f"{c.get('bound')}/{c.get('pods')}{'' if c.get('complete') else ' (timeout)'}"
                for c in cell
            )
            lines.append(
                f"| {n} | {LABELS[system]} | {_fmt(t.get('nodes_evaluated'))} | {len(cell)} "
                f"| {bound} | {_fmt_mr(_mr(cell, _tp))} "
                f"| {_fmt_mr(_mr(cell, lambda c: c.get('start_to_first_bind_s')), 2)} "
                f"| {_ratio(tp, base['null'])} | {_ratio(tp, base['kube-open'])} "
                f"| {_ratio(tp, base['kube-open-all'])} "
                f"| {_fmt_mr(_mr(cell, _res('cores_drain')), 2)} "
                f"| {_fmt_mr(_mr(cell, _res('cpu_ms_per_pod_drain')), 2)} "
                f"| {_fmt_mr(_mr(cell, _res('cpu_ms_per_pod')), 2)} | {_load(t)} |"
            )
    return lines


def startup_table(results: dict[str, Any]) -> list[str]:
    """Issue 30 item 6: start to the first Binding with a full cache (the memory trial) and
    the takeover after the leader is killed (the two-replica trial)."""
    lines = [
        "| trial | nodes | pods bound before | pods | scheduler | figure | s |",
        "|---|---:|---:|---:|---|---|---:|",
    ]
    for t in sorted(_trials(results, "memory"), key=lambda t: (t["nodes"], t["system"])):
        lines.append(
            f"| start-up (S4) | {t['nodes']} | {t.get('bound_before')} | {t.get('pods')} "
            f"| {LABELS.get(t['system'], t['system'])} | process start → first Binding "
            f"| {_fmt(t.get('start_to_first_bind_s'), 2)} |"
        )
    for t in sorted(_trials(results, "takeover"), key=lambda t: t["nodes"]):
        lease = t.get("lease_duration_s")
        lines.append(
            f"| takeover | {t['nodes']} | {t.get('bound_before')} | {t.get('pods')} "
            f"| metricsched, 2 replicas | leader SIGKILLed → the standby's first Binding "
            f"(target ≤ lease {_fmt(lease, 0)} s + 3 s); then "
            f"{_fmt(_tp(t))} pods/s; {t.get('bound')}/{t.get('pods')} bound "
            f"| {_fmt(t.get('takeover_s'), 2)} |"
        )
        lines.append(
            f"| takeover | {t['nodes']} | {t.get('bound_before')} | {t.get('pods')} "
            f"| metricsched, 2 replicas | new install: start → the first leader's first "
            f"Binding (waits one lease duration) | {_fmt(t.get('first_leader_bind_s'), 2)} |"
        )
    if len(lines) == 2:
        return ["(no memory or takeover trial in this results file)"]
    return lines


def latency_table(results: dict[str, Any]) -> list[str]:
    steady = _trials(results, "steady")
    lines = [
        "| nodes | pods/s | scheduler | pods | p50 ms | p90 ms | p99 ms | max ms "
        "| p99 watcher-only ms | p99 ÷ kube QPS 50 | p99 ÷ null | CPU ms/pod | load avg (at) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted({t["nodes"] for t in steady}):
        base = {s: ((_find(steady, s, n) or {}).get("latency_ms") or {}).get("p99") for s in ORDER}
        for system in ORDER:
            t = _find(steady, system, n)
            if t is None:
                continue
            lat = t.get("latency_ms") or {}
            wo = t.get("latency_ms_watcher_only") or {}
            res = t.get("resources") or {}
            lines.append(
                f"| {n} | {_fmt(t.get('rate'), 0)} | {LABELS[system]} "
                f"| {t.get('bound')}/{t.get('pods')} | {_fmt(lat.get('p50'))} "
                f"| {_fmt(lat.get('p90'))} | {_fmt(lat.get('p99'))} | {_fmt(lat.get('max'))} "
                f"| {_fmt(wo.get('p99'))} "
                f"| {_ratio(lat.get('p99'), base.get('kube-default'))} "
                f"| {_ratio(lat.get('p99'), base.get('null'))} "
                f"| {_fmt(res.get('cpu_ms_per_pod_arrivals'), 2)} "
                f"| {_load(t)} |"
            )
    return lines


def memory_table(results: dict[str, Any]) -> list[str]:
    memory = _trials(results, "memory")
    if not memory:
        return ["(no memory trial in this results file)"]
    lines = [
        "| nodes | scheduler | pods bound at the end (before + backlog) | RSS p50 MiB "
        "| RSS max MiB | VmHWM MiB | RSS ÷ kube QPS 5000 | pods/s | CPU ms/pod "
        "| load avg (at) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted({t["nodes"] for t in memory}):
        kres = (_find(memory, "kube-open", n) or {}).get("resources") or {}
        for system in ORDER:
            t = _find(memory, system, n)
            if t is None:
                continue
            res = t.get("resources") or {}
            before = int(t.get("bound_before") or 0)
            lines.append(
                f"| {n} | {LABELS[system]} "
                f"| {before + int(t.get('bound') or 0)} ({before} + {t.get('bound')}/"
                f"{t.get('pods')}) | {_fmt(res.get('rss_mib_p50'))} "
                f"| {_fmt(res.get('rss_mib_max'))} | {_fmt(res.get('vm_hwm_mib'))} "
                f"| {_ratio(res.get('rss_mib_max'), kres.get('rss_mib_max'))} "
                f"| {_fmt(_tp(t))} | {_fmt(res.get('cpu_ms_per_pod'), 2)} | {_load(t)} |"
            )
    return lines


def cost_table(results: dict[str, Any]) -> list[str]:
    backlog = _trials(results, "backlog")
    lines = [
        "| nodes | scheduler | RSS max MiB | VmHWM MiB | RSS ÷ kube QPS 50 | CPU s "
        "| CPU ms/pod | CPU ÷ kube QPS 50 | CPU util | Prom queries/pod (operator; server) "
        "| API writes/pod (operator; apiserver) | events dropped | fallback decisions "
        "| cycle ms (operator's histogram) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sorted({t["nodes"] for t in backlog}):
        kube = _find(backlog, "kube-default", n)
        kres = (kube or {}).get("resources") or {}
        for system in ORDER:
            t = _find(backlog, system, n)
            if t is None:
                continue
            res = t.get("resources") or {}
            per = t.get("per_pod") or {}
            op = t.get("operator") or {}
            queries = (
                f"{_fmt(per.get('prometheus_queries_operator'), 4)}; "
                f"{_fmt(per.get('prometheus_queries_server'), 4)}"
            )
            writes = (
                f"{_fmt(per.get('api_writes_operator'), 3)}; {_fmt(per.get('apiserver_writes'), 3)}"
            )
            lines.append(
                f"| {n} | {LABELS[system]} | {_fmt(res.get('rss_mib_max'))} "
                f"| {_fmt(res.get('vm_hwm_mib'))} "
                f"| {_ratio(res.get('rss_mib_max'), kres.get('rss_mib_max'))} "
                f"| {_fmt(res.get('cpu_s'), 2)} | {_fmt(res.get('cpu_ms_per_pod'), 2)} "
                f"| {_ratio(res.get('cpu_ms_per_pod'), kres.get('cpu_ms_per_pod'))} "
                f"| {_fmt(res.get('cpu_utilisation'), 2)} | {queries} | {writes} "
                f"| {_fmt(op.get('events_dropped'), 0)} | {_fmt(op.get('fallback_decisions'), 0)} "
                f"| {_fmt(op.get('cycle_ms_mean'), 2)} |"
            )
    return lines


def cycle_table(results: dict[str, Any]) -> list[str]:
    rows = results.get("cycle_cost") or []
    lines = [
        "| nodes | schedule_one ms, detail=False (operator) | µs/node "
        "| a Deployment's replica ms | each pod of its own class ms "
        "| detail=True ms (explain) | filters only ms | default policy ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        per_node = round(1000 * r["schedule_one_no_detail_ms"] / r["nodes"], 2)
        lines.append(
            f"| {r['nodes']} | {r['schedule_one_no_detail_ms']} | {per_node} "
            f"| {r.get('schedule_one_replica_ms', '-')} "
            f"| {r.get('schedule_one_distinct_ms', '-')} "
            f"| {r['schedule_one_ms']} | {r['run_filters_ms']} "
            f"| {r.get('schedule_one_default_policy_ms', '-')} |"
        )
    return lines


def profile_section(results: dict[str, Any]) -> list[str]:
    t = next((t for t in results.get("trials", []) if t.get("profile")), None)
    if t is None:
        return ["(no profiled trial in this results file)"]
    p = t["profile"]
    res = t.get("resources") or {}
    lines = [
        f"Profiled trial: metricsched, backlog of {t.get('pods')} pods on {t['nodes']} nodes, "
        f"{_fmt(_tp(t))} pods/s under py-spy ({p['seconds']} s recorded at 100 Hz, `--gil`, "
        f"`--nonblocking`). Process CPU utilisation {_fmt(res.get('cpu_utilisation'), 2)} "
        f"cores; GIL held {_fmt(100 * (p.get('gil_busy_fraction') or 0), 0)} % of the time.",
        "",
        "| category (first match on the stack) | % of GIL samples |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {pct} |" for name, pct in p["category_pct"]]
    lines += ["", "| function (inclusive) | % |", "|---|---:|"]
    boring = (
        "runners.py",
        "base_events.py",
        "events.py",
        "(metricsched)",
        "cli.py",
        "threading.py",
    )
    lines += [
        f"| `{name}` | {pct} |"
        for name, pct in p["inclusive_pct"]
        if not any(b in name for b in boring)
    ]
    lines += ["", "| function (self) | % |", "|---|---:|"]
    lines += [f"| `{name}` | {pct} |" for name, pct in p["self_pct"]]
    return lines


# --- targets ---------------------------------------------------------------------------


def _target_rows(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    backlog = _trials(results, "backlog")
    steady = _trials(results, "steady")
    n = 1000
    ms = _tp_med(backlog, "metricsched", n)
    rows: list[tuple[str, str, bool | None]] = []
    for base, goal, text in (
        ("kube-default", 1.0, "≥ 1.0x kube-scheduler QPS 50 (1000 nodes)"),
        ("null", 0.8, "≥ 0.8x Python null binder (1000 nodes)"),
        ("kube-open", 0.5, "≥ 0.5x kube-scheduler QPS 5000 (1000 nodes)"),
    ):
        b = _tp_med(backlog, base, n)
        ok = None if ms is None or not b else ms / b >= goal
        rows.append((text, f"{_fmt(ms)} vs {_fmt(b)} pods/s = {_ratio(ms, b)}", ok))
    st = _find(steady, "metricsched", n)
    p99 = ((st or {}).get("latency_ms") or {}).get("p99")
    rows.append(
        (
            "p99 create→bind ≤ 100 ms at 20 pods/s, 1000 nodes",
            f"{_fmt(p99)} ms",
            None if p99 is None else p99 <= 100,
        )
    )
    t = _find(backlog, "metricsched", n)
    rss = ((t or {}).get("resources") or {}).get("rss_mib_max")
    rows.append(
        (
            "RSS ≤ 150 MiB with 1000 nodes and 5000 bound pods",
            f"{_fmt(rss)} MiB",
            None if rss is None else rss <= 150,
        )
    )
    per = (t or {}).get("per_pod") or {}
    q = per.get("prometheus_queries_operator")
    w = per.get("api_writes_operator")
    rows.append(
        ("Prometheus queries per bound pod ≤ 0.01", _fmt(q, 4), None if q is None else q <= 0.01)
    )
    rows.append(("API writes per bound pod ≤ 2", _fmt(w, 3), None if w is None else w <= 2))
    return rows


def scale_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Issue 10's figures (reported, never judged): the same as above at 5,000 nodes."""
    backlog = _trials(results, "backlog")
    steady = _trials(results, "steady")
    memory = _trials(results, "memory")
    rows: list[tuple[str, str]] = []
    for n in sorted({t["nodes"] for t in backlog if t["nodes"] >= 1000}):
        names = ("metricsched", "kube-open", "kube-open-all", "null")
        tp = {s: _tp_med(backlog, s, n) for s in names}
        runs = min((len(_cell(backlog, s, n)) for s in names if _cell(backlog, s, n)), default=0)
        rows.append(
            (
                f"backlog throughput, {n} nodes, median of {runs}: metricsched / kube-scheduler "
                "QPS 5000 / the same, all nodes scored / null",
                f"{_fmt(tp['metricsched'])} / {_fmt(tp['kube-open'])} / "
                f"{_fmt(tp['kube-open-all'])} / {_fmt(tp['null'])} "
                f"pods/s ({_ratio(tp['metricsched'], tp['kube-open'])} of kube QPS 5000, "
                f"{_ratio(tp['metricsched'], tp['kube-open-all'])} of kube all nodes, "
                f"{_ratio(tp['metricsched'], tp['null'])} of null)",
            )
        )
    for t in sorted(steady, key=lambda t: (t["nodes"], t.get("rate") or 0)):
        if t["system"] != "metricsched" or t["nodes"] < 5000:
            continue
        lat = t.get("latency_ms") or {}
        rows.append(
            (
                f"p99 create→bind, {_fmt(t.get('rate'), 0)} pods/s, {t['nodes']} nodes",
                f"{_fmt(lat.get('p99'))} ms (p50 {_fmt(lat.get('p50'))} ms; "
                f"{t.get('bound')}/{t.get('pods')} bound"
                f"{'' if t.get('complete') else '; timeout: the unbound pods are not counted'})",
            )
        )
    for t in memory:
        if t["system"] != "metricsched":
            continue
        res = t.get("resources") or {}
        total = int(t.get("bound_before") or 0) + int(t.get("bound") or 0)
        rows.append(
            (
                f"operator RSS, {t['nodes']} nodes and {total} bound pods",
                f"{_fmt(res.get('rss_mib_max'))} MiB max (VmHWM {_fmt(res.get('vm_hwm_mib'))})",
            )
        )
    for n in sorted({t["nodes"] for t in backlog if t["nodes"] >= 1000}):
        cpu = _res("cpu_ms_per_pod")
        ms = _med(_cell(backlog, "metricsched", n), cpu)
        ko = _med(_cell(backlog, "kube-open", n), cpu)
        kd = _med(_cell(backlog, "kube-default", n), cpu)
        rows.append(
            (
                f"CPU per bound pod (backlog), {n} nodes: metricsched vs kube-scheduler",
                f"{_fmt(ms, 2)} ms vs {_fmt(ko, 2)} ms at QPS 5000 ({_ratio(ms, ko)}), "
                f"{_fmt(kd, 2)} ms at QPS 50 ({_ratio(ms, kd)})",
            )
        )
    return rows


def scale_table(results: dict[str, Any]) -> list[str]:
    lines = ["| figure | measured |", "|---|---|"]
    lines += [f"| {text} | {measured} |" for text, measured in scale_rows(results)]
    return lines


def targets_table(results: dict[str, Any]) -> list[str]:
    lines = ["| target | measured | holds |", "|---|---|---|"]
    for text, measured, ok in _target_rows(results):
        verdict = "n/a" if ok is None else ("yes" if ok else "**no**")
        lines.append(f"| {text} | {measured} | {verdict} |")
    return lines


# --- the README ------------------------------------------------------------------------


def _machine_lines(results: dict[str, Any]) -> list[str]:
    m = results.get("machine") or {}
    return [
        f"- CPUs: {m.get('nproc')} x {m.get('cpu_model')}; memory {m.get('mem_total_gib')} GiB",
        f"- load average (1/5/15 min) at the start: {m.get('load_average')}, "
        f"at the end: {m.get('load_average_end')}",
        f"- Python {m.get('python')}, kopf {m.get('kopf')}, "
        f"kubernetes client {m.get('kubernetes_client')}",
        f"- {m.get('kube_scheduler')}; {m.get('prometheus')}",
        f"- CPU share of the scheduler under test: {_cpu_share(results)}",
        f"- run: {results.get('started')} → {results.get('finished')}; "
        f"`hack/cluster.py up` per size took {results.get('cluster_up_s')} s "
        "(last invocation; reusing a running cluster is fast)",
        *[
            f"- not run: {n} nodes ({why})"
            for n, why in (results.get("skipped_sizes") or {}).items()
        ],
    ]


def _cpu_share(results: dict[str, Any]) -> str:
    share = results.get("cpu_share")
    if not share:
        return "not recorded (a run before issue 30: nothing pinned, no quota)"
    return f"{share.get('mode')} ({share.get('note')})"


def quality_section() -> list[str]:
    """bench/quality.md (``python -m bench quality --publish`` writes it) between the
    markers bench/quality/report.py replaces, so either report keeps the other's part."""
    path = BENCH / "quality.md"
    if not path.exists():
        return []
    return ["<!-- quality:begin -->", path.read_text().rstrip(), "<!-- quality:end -->", ""]


def contention_section() -> list[str]:
    """bench/contention.md (``python -m bench contention --publish`` writes it) between the
    markers bench/contention.py replaces, so a re-render keeps it."""
    path = BENCH / "contention.md"
    if not path.exists():
        return []
    return ["<!-- contention:begin -->", path.read_text().rstrip(), "<!-- contention:end -->", ""]


def readme(results: dict[str, Any], images: dict[str, str]) -> str:
    method = (BENCH / "method.md").read_text() if (BENCH / "method.md").exists() else ""
    analysis = (BENCH / "analysis.md").read_text() if (BENCH / "analysis.md").exists() else ""
    parts = [
        "# metricsched benchmarks",
        "",
        "Generated by `make bench` (`python -m bench run`; re-render with "
        "`python -m bench report --publish`). Do not edit by hand: edit `bench/method.md`, "
        "`bench/analysis.md` or `bench/report.py`.",
        "",
        "## Targets (issue 5)",
        "",
        *targets_table(results),
        "",
        "## At scale (issue 10; reported, not judged)",
        "",
        *scale_table(results),
        "",
        *quality_section(),
        *contention_section(),
        "## Machine",
        "",
        *_machine_lines(results),
        "",
        method,
        "## Results",
        "",
        "### Throughput: backlog drain (S1)",
        "",
        *throughput_table(results),
        "",
        f"![pods bound over time]({images['bound']})",
        "",
        "### Start-up and takeover",
        "",
        *startup_table(results),
        "",
        "### Latency: steady arrivals (S3)",
        "",
        *latency_table(results),
        "",
        f"![latency CDF]({images['cdf']})",
        "",
        "### Cost: memory, CPU, queries and writes (backlog trials)",
        "",
        *cost_table(results),
        "",
        "### Memory with a full cache (S4)",
        "",
        *memory_table(results),
        "",
        "### Cycle cost vs node count",
        "",
        *cycle_table(results),
        "",
        "This table is the results file's run. A change to the cycle made since is measured "
        "against the code before it, interleaved in one run, in the analysis below.",
        "",
        f"![cycle cost]({images['cycle']})",
        "",
        "## Profile of the operator during a backlog drain",
        "",
        *profile_section(results),
        "",
        analysis,
    ]
    return "\n".join(parts).rstrip() + "\n"


def render(path: Path, *, publish: bool) -> None:
    results = json.loads(path.read_text())
    where = BENCH if publish else path.parent
    images = {"bound": "bound-over-time.png", "cdf": "latency-cdf.png", "cycle": "cycle-cost.png"}
    plot_bound_over_time(results, where / images["bound"])
    plot_latency_cdf(results, where / images["cdf"])
    plot_cycle_cost(results, where / images["cycle"])
    target = where / ("README.md" if publish else f"{path.stem}-report.md")
    target.write_text(readme(results, images))
    print(f"[bench] report: {target}", flush=True)
