"""The gates every writer of this replica passes: made first, handed to those who read them.

- ``leading``: set while this replica leads (always, without ``--leader-elect``): the
  scheduler, the rebalancer, the refresher, the policy status writer and the report of
  the kubelet's rejections act only while it is set. Set and cleared by the operator on
  the elector's word; the scheduler clears it too when it cancels its binds.
- ``consistent``: set while the informers' cluster state is whole (every kind listed, no
  re-list under way, no suspect silence): the scheduler and the rebalancer decide nothing
  meanwhile. Written by the informers (``runtime.informers``) alone.
- ``metrics_ready``: set once the first metric round since this replica began leading has
  answered (or run out of time): the scheduler's first decisions wait for it. Written by
  the refresher alone.
- ``policies_confirmed``: set while the cached policies are confirmed by a LIST sent
  after the last gap in what the watches delivered: the scheduler and the rebalancer
  decide nothing meanwhile (no pod goes by a policy deleted in the gap). Written by the
  policies' owner (``runtime.policies``) alone; set at first (nothing cached to confirm).
- ``fence``: the elector's fence, seconds this replica may still write as leader, read
  before every Binding and Eviction; None without leader election. Given once, when the
  elector is made (``runtime.leader``).

A reader built on its own (a tool, a test) gets ``Gates.open()``: every gate open but
``leading``, as each reader's default was before the gates had one home.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable


def _set() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclasses.dataclass
class Gates:
    leading: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    consistent: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    metrics_ready: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    policies_confirmed: asyncio.Event = dataclasses.field(default_factory=_set)
    fence: Callable[[], float] | None = None

    @classmethod
    def open(cls) -> Gates:
        """Gates for a reader run on its own: consistent and metrics ready (nothing feeds
        them), not leading until told, no fence."""
        gates = cls()
        gates.consistent.set()
        gates.metrics_ready.set()
        return gates
