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
    q.retry_later("a", now=0.0, unschedulable=True)
    q.retry_later("a", now=0.0, unschedulable=True)  # backoff 2 s
    assert q.on_cluster_change(now=2.0) == 1
    assert q.pop_ready(2.0, 10) == ["a"]
    assert q.attempts("a") == 2
    assert q.retry_later("a", now=2.0) == 4.0


def test_an_unschedulable_pod_waits_for_an_event_not_for_its_backoff() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0, max_unschedulable_s=300.0)
    q.retry_later("a", now=0.0, unschedulable=True)
    assert q.pop_ready(10.0, 10) == []  # no event: nothing could have changed for it
    assert q.on_cluster_change(now=10.0) == 1
    assert q.pop_ready(10.0, 10) == ["a"]


def test_an_event_during_the_backoff_brings_the_pod_back_when_the_backoff_ends() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=0.0, unschedulable=True)
    q.retry_later("a", now=0.0, unschedulable=True)  # backoff until 2.0
    assert q.on_cluster_change(now=0.5) == 1
    assert q.pop_ready(1.9, 10) == []
    assert q.pop_ready(2.0, 10) == ["a"]


def test_an_unschedulable_pod_without_any_event_is_tried_after_max_unschedulable() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0, max_unschedulable_s=300.0)
    q.retry_later("a", now=0.0, unschedulable=True)
    assert q.pop_ready(299.9, 10) == []
    assert q.pop_ready(300.0, 10) == ["a"]


def test_a_pod_whose_attempt_failed_otherwise_is_retried_when_its_backoff_ends() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=0.0)  # a Binding error, not "no node fits"
    assert q.pop_ready(0.9, 10) == []
    assert q.pop_ready(1.0, 10) == ["a"]


def test_a_pod_whose_own_spec_changed_is_tried_again_after_its_backoff() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=0.0, unschedulable=True)
    q.update("a", now=5.0)
    assert q.pop_ready(5.0, 10) == ["a"]
    q.update("b", now=5.0)  # not queued yet: added
    assert q.pop_ready(5.0, 10) == ["b"]


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


# --- queueing hints ---------------------------------------------------------------------


def test_new_metrics_move_back_only_the_pods_their_policy_decided() -> None:
    q = queue_mod.SchedulingQueue()
    q.retry_later("web", now=0.0, policy="shop/web-latency", unschedulable=True)
    q.retry_later("batch", now=0.0, policy="shop/batch-cost", unschedulable=True)
    q.retry_later("plain", now=0.0, unschedulable=True)
    assert q.on_metrics_change({"shop/web-latency"}, now=1.0) == 1
    assert q.pop_ready(1.0, 10) == ["web"]
    assert "batch" in q and "plain" in q


def test_no_event_means_a_waiting_pod_waits_out_its_backoff() -> None:
    q = queue_mod.SchedulingQueue(initial_backoff_s=1.0)
    q.retry_later("a", now=0.0)
    q.retry_later("a", now=0.0)  # second failure: 2 s
    assert q.on_metrics_change(set(), now=0.0) == 0
    assert q.pop_ready(1.9, 10) == []
    assert q.pop_ready(2.0, 10) == ["a"]


# --- PrioritySort -----------------------------------------------------------------------


def _ordering(table: dict[str, queue_mod.Ordering]) -> queue_mod.SchedulingQueue:
    return queue_mod.SchedulingQueue(ordering=lambda uid: table.get(uid, queue_mod.Ordering()))


def test_higher_priority_pods_come_out_first_then_the_oldest() -> None:
    q = _ordering(
        {
            "low-old": queue_mod.Ordering(priority=0, created=1.0),
            "high-new": queue_mod.Ordering(priority=1000, created=9.0),
            "low-new": queue_mod.Ordering(priority=0, created=5.0),
            "high-old": queue_mod.Ordering(priority=1000, created=2.0),
        }
    )
    for uid in ("low-new", "high-new", "low-old", "high-old"):
        q.add(uid)
    assert q.pop_ready(0.0, 10) == ["high-old", "high-new", "low-old", "low-new"]


def test_a_pod_moved_back_takes_its_place_by_priority() -> None:
    q = _ordering({"vip": queue_mod.Ordering(priority=10, created=5.0)})
    q.add("a")
    q.retry_later("vip", now=0.0, unschedulable=True)
    q.on_cluster_change(now=1.0)
    assert q.pop_ready(1.0, 10) == ["vip", "a"]


def test_a_pod_done_while_active_never_comes_out() -> None:
    q = queue_mod.SchedulingQueue()
    q.add("a")
    q.add("b")
    q.done("a")
    assert q.pop_ready(0.0, 10) == ["b"]
    assert len(q) == 0
