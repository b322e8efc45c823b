"""The contention scenario's figures (issue 29 item 5), without a cluster: the replay of
binds and removals in resourceVersion order that attributes an overcommitting bind to the
scheduler whose bind came second, the end state read from a LIST, the seeded pod plan, the
node pools split, and the switch that turns nominations off in a scratch copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import contention

ALLOC = {"n1": {"cpu": 1000, "memory": 2**30, "pods": 110}}


def _step(rv: int, pod: str, who: str, cpu: int, **where: Any) -> Any:
    """A bind (``bound=False``: a removal) of ``cpu`` millicores on ``node`` (n1)."""
    node, bound = where.get("node", "n1"), where.get("bound", True)
    return contention.Step(rv, pod, who, node, {"cpu": cpu, "memory": 0, "pods": 1}, bound)


def _pod(name: str, who: str, cpu: str, node: str | None, **extra: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    spec: dict[str, Any] = {"schedulerName": who, "containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, **extra}, "spec": spec, "status": {}}


def test_the_bind_that_comes_second_into_the_same_room_is_counted() -> None:
    steps = [_step(12, "b", "ms", 600), _step(10, "a", "kube", 600)]  # out of order
    assert contention.walk(steps, ALLOC) == {
        "kube": {"binds": 1, "overcommitting_binds": 0},
        "ms": {"binds": 1, "overcommitting_binds": 1},
    }


def test_a_bind_that_fits_exactly_does_not_overcommit() -> None:
    steps = [_step(1, "a", "kube", 500), _step(2, "b", "ms", 500)]
    assert contention.walk(steps, ALLOC)["ms"]["overcommitting_binds"] == 0


def test_a_removal_frees_the_room_for_later_binds() -> None:
    steps = [
        _step(1, "a", "ms", 800),
        _step(2, "a", "ms", 800, bound=False),  # preempted
        _step(3, "b", "kube", 800),
    ]
    assert contention.walk(steps, ALLOC) == {
        "ms": {"binds": 1, "overcommitting_binds": 0},
        "kube": {"binds": 1, "overcommitting_binds": 0},
    }


def test_every_bind_onto_a_node_still_over_counts_again() -> None:
    steps = [_step(1, "a", "kube", 900), _step(2, "b", "ms", 200), _step(3, "c", "kube", 100)]
    got = contention.walk(steps, ALLOC)
    assert got["ms"]["overcommitting_binds"] == 1
    assert got["kube"] == {"binds": 2, "overcommitting_binds": 1}


def test_the_pods_limit_is_a_resource_too() -> None:
    alloc = {"n1": {"cpu": 10_000, "memory": 2**30, "pods": 1}}
    steps = [_step(1, "a", "kube", 10), _step(2, "b", "ms", 10)]
    assert contention.walk(steps, alloc)["ms"]["overcommitting_binds"] == 1


def test_binds_to_nodes_outside_the_scenario_are_skipped() -> None:
    steps = [_step(1, "warm", "ms", 5000, node="other")]
    assert contention.walk(steps, ALLOC) == {}


def test_the_end_state_counts_bound_pods_and_overcommitted_nodes_from_the_list() -> None:
    pods = [
        _pod("a", "kube", "600m", "n1"),
        _pod("b", "ms", "0.6", "n1"),
        _pod("c", "ms", "1", None),  # pending
        _pod("d", "ms", "1", "n1", deletionTimestamp="2026-11-29T00:00:00Z"),  # going
        _pod("e", "kube", "1", "other"),  # not the scenario's node
    ]
    got = contention.end_state(pods, ALLOC)
    assert got["bound"] == {"kube": 1, "ms": 1}
    assert got["overcommitted"] == ["n1"]
    assert got["overcommitted_nodes"] == 1
    assert got["excess_cpu_m"] == 200


def test_a_node_within_allocatable_is_not_overcommitted() -> None:
    got = contention.end_state([_pod("a", "kube", "1", "n1")], ALLOC)
    assert got["overcommitted_nodes"] == 0
    assert got["excess_cpu_m"] == 0


def test_requests_sum_the_containers() -> None:
    pod = _pod("a", "kube", "250m", "n1")
    pod["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "1"}}})
    assert contention.requests_of(pod) == {"cpu": 1250, "memory": 64 * 2**20, "pods": 1}


def test_the_pod_plan_is_seeded_and_splits_the_pods_evenly() -> None:
    plan = contention.pod_plan(3, 300)
    assert plan == contention.pod_plan(3, 300)
    assert plan != contention.pod_plan(4, 300)
    assert sum(1 for s, _ in plan if s == contention.KUBE) == 150
    assert {c for _, c in plan} <= set(contention.CPU_CHOICES)


def test_the_pools_condition_gives_each_scheduler_its_own_half_of_the_nodes() -> None:
    pools = [contention.pool_of(i, 16) for i in range(16)]
    assert pools.count(contention.KUBE) == pools.count(contention.METRICSCHED) == 8
    body = contention.pod_body("p", contention.METRICSCHED, "1", "pools")
    assert body["spec"]["nodeSelector"] == {
        contention.LABEL: "true",
        contention.POOL_LABEL: contention.METRICSCHED,
    }
    shared = contention.pod_body("p", contention.METRICSCHED, "1", "shared")
    assert contention.POOL_LABEL not in shared["spec"]["nodeSelector"]


def test_only_kube_schedulers_pods_get_the_high_priority_when_preempting() -> None:
    kube = contention.pod_body("p", contention.KUBE, "1", "preempt")
    ms = contention.pod_body("p", contention.METRICSCHED, "1", "preempt")
    plain = contention.pod_body("p", contention.KUBE, "1", "shared")
    assert kube["spec"]["priorityClassName"] == contention.PRIORITY_CLASS
    assert "priorityClassName" not in ms["spec"]
    assert "priorityClassName" not in plain["spec"]


def test_the_scratch_copy_switches_nominations_off_and_is_what_runs(tmp_path: Path) -> None:
    path = contention.scratch_without_nominations(tmp_path / "op")
    cache = (Path(path) / "metricsched" / "runtime" / "cache.py").read_text()
    assert cache.count(contention.NOMINATION_OFF) == 1
    hook = cache.index(contention.NOMINATION_HOOK)
    assert cache.index(contention.NOMINATION_OFF) == hook + len(contention.NOMINATION_HOOK)


def test_the_table_gives_median_and_range_per_condition() -> None:
    def trial(seed: int, over: int) -> dict[str, Any]:
        row = {"binds": 10, "overcommitting_binds": over, "bound_at_end": 10, "removed": 0}
        return {
            "condition": "shared",
            "seed": seed,
            contention.KUBE: row,
            contention.METRICSCHED: row,
            "overcommitted_nodes_at_end": over,
            "excess_cpu_m_at_end": 0,
            "run_s": 12.0,
        }

    rows = contention.table([trial(1, 3), trial(2, 1), trial(3, 2)])
    assert [r["condition"] for r in rows] == ["shared"]
    assert rows[0]["kube-open.overcommitting_binds"] == {"median": 2, "min": 1, "max": 3}
    assert "| shared | 10 | 2 (1-3) |" in contention.markdown(rows)


def test_the_section_is_spliced_before_machine_once_and_replaced_after() -> None:
    readme = "# bench\n\n## Placement quality\n\n## Machine\n\n- CPUs\n"
    first = contention.splice(readme, "## Contention\n\nold\n")
    assert first.index(contention.BEGIN) < first.index("## Machine")
    again = contention.splice(first, "## Contention\n\nnew\n")
    assert "old" not in again and again.count(contention.BEGIN) == 1
    assert again.endswith("## Machine\n\n- CPUs\n")


def test_the_section_states_its_conditions_and_rates() -> None:
    row = {"binds": 4, "overcommitting_binds": 1, "bound_at_end": 4, "removed": 0}
    trial = {
        "condition": "shared",
        "seed": 1,
        "nodes": 16,
        "pods": 300,
        "room_pods_est": 109,
        "load_average_before": [2.5, 2.0, 1.0],
        contention.KUBE: row,
        contention.METRICSCHED: {**row, "overcommitting_binds": 2},
        "overcommitted_nodes_at_end": 1,
        "excess_cpu_m_at_end": 250,
        "run_s": 12.0,
    }
    body = contention.section({"trials": [trial], "argv": ["contention"], "node_cpu": 4})
    assert "16 kwok nodes of 4 cpu" in body
    assert "- shared: 1/4 (25 %); 2/4 (50 %)" in body


def test_the_watch_records_binds_removals_and_nominations_in_order() -> None:
    log = contention.Log(None, "ns")  # type: ignore[arg-type]
    nominated = _pod("k", "kube", "1", None)
    nominated["status"] = {"nominatedNodeName": "n1"}
    events = [
        ("ADDED", {**_pod("a", "ms", "1", None)}, "5"),
        ("MODIFIED", _pod("a", "ms", "1", "n1"), "6"),
        ("MODIFIED", _pod("a", "ms", "1", "n1"), "7"),  # kwok's status: not a second bind
        ("MODIFIED", nominated, "8"),
        ("DELETED", _pod("a", "ms", "1", "n1"), "9"),
        ("BOOKMARK", {"metadata": {}}, "12"),
    ]
    for kind, obj, rv in events:
        obj["metadata"]["resourceVersion"] = rv
        log.see({"type": kind, "object": obj})
    assert [(s.rv, s.pod, s.bound) for s in log.steps] == [(6, "a", True), (9, "a", False)]
    assert log.nominated == {"k"}
    assert log.rv == "12"


def test_the_refill_fills_the_nodes_exactly_then_sends_a_second_wave() -> None:
    fill, wave = contention.refill_plan(1, 16)
    assert fill == 16 * contention.NODE_CPU * 2  # 500m pods
    kube = sum(1 for s, _ in wave if s == contention.KUBE)
    assert kube == fill * 3 // 8
    assert len(wave) - kube == 2 * kube
    assert wave == contention.refill_plan(1, 16)[1]
    assert wave != contention.refill_plan(2, 16)[1]
    body = contention.pod_body("p", contention.KUBE, "500m", "refill-no-nominations")
    assert body["spec"]["priorityClassName"] == contention.PRIORITY_CLASS
