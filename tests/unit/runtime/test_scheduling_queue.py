"""The scheduling queue: FIFO for new pods, backoff for failures, nothing ever lost."""

from __future__ import annotations

import asyncio

from metricsched.runtime import queue as queue_mod


def test_new_pods_come_out_first_in_first_out() -> None:
    q = queue_mod.SchedulingQueue()
    for uid in ("a", "b", "c"):
        q.add(uid)
    assert q.pop_ready(0.0, 10) == ["a", "b", "c"]
    assert len(q) == 0


def test_adding_a_queued_pod_twice_keeps_one_entry() -> None:
    q = queue_mod.SchedulingQueue()
    q.add("a")
    q.add("a")
    assert q.pop_ready(0.0, 10) == ["a"]


def test_failed_pod_backs_off_exponentially_up_to_the_maximum() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0, max_backoff_s=10.0)
    delays = []
    for _ in range(6):
        delays.append(q.retry_later("a", now=0.0))
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_backing_off_pod_is_not_ready_before_its_time_and_is_after() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=100.0)
    assert q.pop_ready(100.5, 10) == []
    assert "a" in q
    assert q.pop_ready(101.0, 10) == ["a"]


def test_a_new_add_does_not_cut_a_backoff_short() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=5.0)
    q.retry_later("a", now=0.0)
    q.add("a")
    assert q.pop_ready(1.0, 10) == []


def test_cluster_change_moves_waiting_pods_back_but_keeps_their_attempt_count() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=0.0)
    q.retry_later("a", now=0.0)
    q.move_all_to_active()
    assert q.pop_ready(0.0, 10) == ["a"]
    assert q.attempts("a") == 2
    assert q.retry_later("a", now=0.0) == 4.0


def test_done_forgets_the_pod_and_its_attempts() -> None:
    q = queue_mod.SchedulingQueue()
    q.retry_later("a", now=0.0)
    q.done("a")
    assert "a" not in q
    assert q.attempts("a") == 0
    assert q.pop_ready(1e9, 10) == []


def test_sync_re_adds_pending_pods_the_queue_lost_track_of() -> None:
    q = queue_mod.SchedulingQueue()
    q.add("a")
    q.retry_later("b", now=0.0)
    assert q.sync(["a", "b", "c"]) == 1
    assert q.pop_ready(0.0, 10) == ["a", "c"]


def test_pop_ready_respects_the_limit_and_keeps_the_rest() -> None:
    q = queue_mod.SchedulingQueue()
    for uid in "abcde":
        q.add(uid)
    assert q.pop_ready(0.0, 2) == ["a", "b"]
    assert q.pop_ready(0.0, 10) == ["c", "d", "e"]


def test_wait_returns_when_a_pod_is_added() -> None:
    async def scenario() -> list[str]:
        q = queue_mod.SchedulingQueue()
        waiter = asyncio.create_task(q.wait(now=0.0, max_wait=5.0))
        await asyncio.sleep(0.01)
        q.add("a")
        await asyncio.wait_for(waiter, timeout=1.0)
        return q.pop_ready(0.0, 10)

    assert asyncio.run(scenario()) == ["a"]
