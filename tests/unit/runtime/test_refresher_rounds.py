"""The refresher: leader-only, a slow query delays only its own metrics, never dies."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from metricsched.core import model, policy, promql_guard
from metricsched.edges import metric_store, observe
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import refresher as refresher_mod
from metricsched.runtime import status as status_mod

from . import test_policy_lifecycle as lifecycle


class FakeSource:
    """Answers each query with one node's value; queries named in ``slow`` block until
    ``release`` is set; ``boom`` raises (a bug in the edge must not end the refresher)."""

    guard = promql_guard.Guard(promql_guard.Rules())

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.slow: set[str] = set()
        self.boom: set[str] = set()
        self.release = threading.Event()
        self.delay: dict[str, float] = {}  # query -> seconds its answer takes

    def query_nodes_report(self, query: str, **_: Any) -> prom.QueryReport:
        self.sent.append(query)
        if query in self.boom:
            raise RuntimeError("bug")
        if query in self.slow:
            self.release.wait(10)
        time.sleep(self.delay.get(query, 0.0))
        return prom.QueryReport(
            series=model.MetricSeries(
                values={model.NodeName("n1"): model.MetricSample(value=1.0, refreshed_at=0.0)},
                last_refresh=0.0,
                error=None,
                error_message="",
            ),
            series_total=1,
            series_unknown_node=0,
            series_duplicate=0,
            values_dropped=0,
            duration_s=0.0,
            connect_failed=False,
        )


def _policy(name: str, query: str, namespace: str = "shop") -> model.Policy:
    return policy.policy_from_body(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": name, "generation": 1},
            "spec": {
                "metrics": [
                    {
                        "name": "m",
                        "prometheus": {"query": query, "nodeLabel": "node"},
                        "weight": 1,
                        "goal": "Minimize",
                    }
                ]
            },
        }
    )


class Rig:
    def __init__(self, *, deadline_s: float = 5.0) -> None:
        self.source = FakeSource()
        self.cache = cache_mod.ClusterCache()
        self.store = metric_store.MetricStore()
        self.queue = queue_mod.SchedulingQueue()
        metrics = observe.Metrics()
        self.status = status_mod.PolicyStatus(
            api=None,  # type: ignore[arg-type]
            policies=lambda: self.cache.policies,
            nodes=self.cache.nodes,
            counters=lambda key: (0, 0),
            metrics=metrics,
            gates=gates_mod.Gates(),
            interval_s=15.0,
        )
        self.events: list[str] = []
        self.gates = gates_mod.Gates()
        self.refresher = refresher_mod.Refresher(
            source=self.source,  # type: ignore[arg-type]
            store=self.store,
            cache=self.cache,
            queue=self.queue,
            keep_result=lifecycle.owner(self.cache, self.status).refreshed,
            metrics=metrics,
            gates=self.gates,
            post_event=lambda key, **kw: self.events.append(kw["reason"]),
            interval_s=0.05,
            deadline_s=deadline_s,
        )

    def add(self, name: str, query: str, namespace: str = "shop") -> None:
        p = _policy(name, query, namespace)
        self.cache.upsert_policy(p)
        self.status.records[p.key] = status_mod.PolicyRecord()

    def has_values(self, name: str) -> bool:
        return model.MetricKey(model.PolicyKey(f"shop/{name}"), "m") in self.store.view()


def test_a_standby_sends_no_query() -> None:
    rig = Rig()
    rig.add("a", "up")

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(rig.refresher.run(stop))
        await asyncio.sleep(0.2)
        stop.set()
        task.cancel()

    asyncio.run(go())
    assert rig.source.sent == []


def test_a_slow_query_delays_only_its_own_policy_and_is_not_sent_twice() -> None:
    rig = Rig()
    rig.add("slow", "slow_query")
    rig.add("fast", "fast_query")
    rig.source.slow.add("slow_query")

    async def go() -> None:
        stop, leading = asyncio.Event(), rig.gates.leading
        leading.set()
        task = asyncio.create_task(rig.refresher.run(stop))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if rig.has_values("fast") and rig.source.sent.count("fast_query") >= 3:
                break
        assert rig.has_values("fast")
        assert not rig.has_values("slow")
        assert rig.source.sent.count("fast_query") >= 3  # several rounds went by
        assert rig.source.sent.count("slow_query") == 1  # in flight: not sent again
        rig.source.release.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if rig.has_values("slow"):
                break
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(go())
    assert rig.has_values("slow")


def test_a_failing_query_task_does_not_end_the_refresher() -> None:
    rig = Rig()
    rig.add("bad", "boom")
    rig.add("good", "fine")
    rig.source.boom.add("boom")

    async def go() -> None:
        stop, leading = asyncio.Event(), rig.gates.leading
        leading.set()
        task = asyncio.create_task(rig.refresher.run(stop))
        await asyncio.sleep(0.3)
        assert not task.done()
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(go())
    assert rig.source.sent.count("boom") >= 2  # tried again at later ticks
    assert rig.has_values("good")


def test_an_overdue_query_is_reported_unreachable_and_its_late_answer_still_counts() -> None:
    rig = Rig(deadline_s=0.1)
    rig.add("slow", "slow_query")
    rig.source.slow.add("slow_query")
    key = model.MetricKey(model.PolicyKey("shop/slow"), "m")

    async def go() -> model.MetricSeries:
        stop, leading = asyncio.Event(), rig.gates.leading
        leading.set()
        task = asyncio.create_task(rig.refresher.run(stop))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if key in rig.store.view():
                break
        overdue = rig.store.view()[key]
        rig.source.release.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if rig.store.view()[key].error is None:
                break
        stop.set()
        await asyncio.wait_for(task, 5)
        return overdue

    overdue = asyncio.run(go())
    assert overdue.error is model.QueryErrorKind.UNREACHABLE
    assert "no answer within 0.1s" in overdue.error_message
    assert rig.events[:2] == ["MetricQueryFailed", "MetricsRecovered"]
    assert rig.store.view()[key].error is None


def test_the_first_round_is_marked_once_its_queries_answer_or_the_deadline_passes() -> None:
    rig = Rig(deadline_s=0.3)
    rig.add("fast", "fast_query")
    rig.add("slow", "slow_query")
    rig.source.slow.add("slow_query")

    async def go() -> None:
        stop, leading = asyncio.Event(), rig.gates.leading
        task = asyncio.create_task(rig.refresher.run(stop))
        await asyncio.sleep(0.1)
        assert not rig.gates.metrics_ready.is_set()  # a standby: no round yet
        leading.set()
        await asyncio.sleep(0.1)
        assert rig.has_values("fast")
        assert not rig.gates.metrics_ready.is_set()  # the slow query has not answered
        await asyncio.wait_for(rig.gates.metrics_ready.wait(), 1.0)  # the deadline
        assert not rig.source.release.is_set()  # ... while the slow query still hangs
        rig.source.release.set()
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(go())


def test_a_namespace_with_many_slow_queries_does_not_starve_another_namespace() -> None:
    """Regression (issue 24, finding 9): one FIFO of 4 slots for every namespace; 40 slow
    queries of one namespace delayed another namespace's only query behind all of them."""
    rig = Rig()
    for i in range(40):
        rig.add(f"a{i}", f"a_query_{i}", namespace="team-a")
        rig.source.delay[f"a_query_{i}"] = 0.05
    rig.add("b", "b_query", namespace="team-b")

    async def go() -> None:
        rig.refresher.round()
        for _ in range(200):
            await asyncio.sleep(0.02)
            if "b_query" in rig.source.sent:
                break

    asyncio.run(go())
    # 4 of team-a's queries hold the slots; the first slot to free is team-a's turn (it
    # waited first), the second team-b's: sent 6th at the latest, not 41st.
    assert rig.source.sent.index("b_query") <= 5


def test_a_round_for_explain_queries_only_the_policies_it_names() -> None:
    """explain decides one pod: it must not send every namespace's queries with the
    caller's credentials (issue 24, finding 12)."""
    rig = Rig()
    rig.add("mine", "my_query", namespace="shop")
    rig.add("theirs", "their_query", namespace="other-team")
    asyncio.run(rig.refresher.refresh_once(only={model.PolicyKey("shop/mine")}))
    assert rig.source.sent == ["my_query"]


def _complex_query(i: int, namespace: str = "shop") -> str:
    """A legal query of 30 regex selectors (~1,300 characters): a few ms to check."""
    selectors = " + ".join(
        f'metric_{k}_{i}{{namespace="{namespace}",job=~"job{k}.*|exporter"}}' for k in range(30)
    )
    return f"sum by (node) ({selectors})"


def test_a_new_leader_checks_two_thousand_uncached_queries_without_stalling_its_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression (issue 28, N7): with query rules on, the first round checked every
    uncached query on the event loop (2,000 complex ones: many seconds), so the loop
    missed the Lease's fence. Every parse of a query (the slow part of a check) runs off
    the loop's thread; the loop only reads the remembered verdicts. (Asserted by thread,
    not by the loop's lag: a lag bound is a wall-clock assertion a loaded host breaks.)"""
    parsed_on: list[int] = []
    parse = promql_guard.check

    def recording(query: str, **kw: Any) -> str | None:
        parsed_on.append(threading.get_ident())
        return parse(query, **kw)

    monkeypatch.setattr(promql_guard, "check", recording)
    # A deadline no host misses: the first round must answer all 2,001 before the records
    # are read (at 5 s a loaded host gave up on some, and they had no record yet).
    rig = Rig(deadline_s=600.0)
    rig.source.guard = promql_guard.Guard(
        promql_guard.Rules(
            required_matchers=(promql_guard.parse_required_matcher("namespace={namespace}"),)
        )
    )
    for i in range(2000):
        rig.add(f"p{i}", _complex_query(i))
    # Refused for its namespace (its selectors name another one): never sent (the fake
    # source answers whatever it is asked; the real one refuses it again).
    rig.add("stranger", _complex_query(0, namespace="elsewhere"), namespace="shop")

    async def go() -> int:
        stop, leading = asyncio.Event(), rig.gates.leading
        leading.set()
        task = asyncio.create_task(rig.refresher.run(stop))
        await asyncio.wait_for(rig.gates.metrics_ready.wait(), 600)
        stop.set()
        rig.refresher.now.set()
        await asyncio.wait_for(task, 10)
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert len(parsed_on) == 2001  # every distinct query parsed once, then remembered
    assert loop_thread not in parsed_on
    results = {key: record.metrics["m"] for key, record in rig.status.records.items()}
    assert len(results) == 2001
    assert not results[model.PolicyKey("shop/stranger")].queried
    assert sum(result.queried for result in results.values()) == 2000
    # The verdicts stay remembered: a later round finds them at once, and still refuses.
    guard = rig.source.guard
    assert guard.check(_complex_query(0), namespace="shop") is None
    assert guard.check(_complex_query(0, namespace="elsewhere"), namespace="shop") is not None


def test_a_metric_whose_answer_would_pass_the_operator_wide_cap_reports_result_too_large() -> None:
    """Regression (issue 28, N8): stored values grew as metrics x nodes with no bound, so
    enough policies took every leader past its memory limit in turn. Past the cap, the
    metric's answer is refused with a condition and a MetricQueryFailed event."""
    rig = Rig()
    rig.store.max_values = 1  # each of the fake's answers holds one node's value
    rig.add("first", "first_query")
    rig.add("second", "second_query")
    asyncio.run(rig.refresher.refresh_once())
    results = {key: record.metrics["m"] for key, record in rig.status.records.items()}
    errors = sorted(str(r.error) for r in results.values())
    assert errors == ["None", "ResultTooLarge"]
    refused = next(r for r in results.values() if r.error is not None)
    assert "--max-metric-values" in refused.error_message
    assert refused.nodes_reporting == 0
    assert rig.events.count("MetricQueryFailed") == 1
    assert rig.store.values == 1
