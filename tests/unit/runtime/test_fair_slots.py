"""Query slots go round-robin across namespaces: the namespace with the most waiting
queries does not take every slot that frees (issue 24, finding 9)."""

from __future__ import annotations

import asyncio

import pytest

from metricsched.runtime import fair_slots


async def _hold(
    slots: fair_slots.FairSlots, tenant: str, name: str, served: list[str], go: asyncio.Event
) -> None:
    async with slots.slot(tenant):
        served.append(name)
        await go.wait()


def test_freed_slots_go_to_each_waiting_namespace_in_turn() -> None:
    async def run() -> list[str]:
        slots = fair_slots.FairSlots(2)
        served: list[str] = []
        gates: dict[str, asyncio.Event] = {}
        tasks = []
        # team-a queues ten queries before team-b and team-c queue one each.
        order = [("team-a", f"a{i}") for i in range(10)] + [("team-b", "b0"), ("team-c", "c0")]
        for tenant, name in order:
            gates[name] = asyncio.Event()
            tasks.append(asyncio.create_task(_hold(slots, tenant, name, served, gates[name])))
        await asyncio.sleep(0)
        assert served == ["a0", "a1"]
        assert slots.waiting() == {"team-a": 8, "team-b": 1, "team-c": 1}
        for name in ["a0", "a1", "a2", "b0", "c0"]:  # release each holder in turn
            gates[name].set()
            for _ in range(3):
                await asyncio.sleep(0)
        for gate in gates.values():
            gate.set()
        await asyncio.gather(*tasks)
        assert slots.free == 2 and slots.waiting() == {}
        return served

    served = asyncio.run(run())
    # FIFO would serve b0 after every a; in turn, each namespace waits one slot per other.
    assert served[:5] == ["a0", "a1", "a2", "b0", "c0"]
    assert served.index("b0") < served.index("a3")
    assert served.index("c0") < served.index("a4")


def test_a_waiter_cancelled_before_or_after_being_handed_a_slot_loses_no_slot() -> None:
    async def run() -> None:
        slots = fair_slots.FairSlots(1)
        go = asyncio.Event()
        served: list[str] = []
        holder = asyncio.create_task(_hold(slots, "a", "h", served, go))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(_hold(slots, "b", "w", served, asyncio.Event()))
        handed = asyncio.create_task(_hold(slots, "c", "x", served, asyncio.Event()))
        await asyncio.sleep(0)
        waiting.cancel()  # cancelled while waiting
        await asyncio.sleep(0)
        assert slots.waiting() == {"c": 1}
        go.set()
        await asyncio.sleep(0)  # the holder ends: its release hands the slot to c ...
        assert holder.done()
        handed.cancel()  # ... which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await handed
        assert slots.free == 1 and slots.waiting() == {}
        assert served == ["h"]

    asyncio.run(run())
