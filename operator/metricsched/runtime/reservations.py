"""Rebalancing's target reservations, kept by the leader between an eviction and the bind
of its replacement.

The rebalancer holds room on the node its dry run chose for an evicted pod (``hold``,
before the eviction is sent) and gives it back when the eviction is not accepted
(``release``). The scheduler consumes one hold of a workload when it binds a pod of
that workload, on whatever node (``consume``: the hold on that node if there is one,
else the oldest, which is simply dropped), and ends holds past their bound
(``expire``). Both are handed the one ``Reservations`` at construction; the holds reach
the scheduling cycle only through the snapshot (``core.reservation``): each is a
placeholder pod on its node in the cluster cache, listed in ``ClusterSnapshot.reserved``.

The bound is ``BOUND_S``, or the policy's window if that is shorter: a Deployment's
replacement is created within a second or two of the eviction and scheduled at once, so
a hold that is still there a minute later has lost its pod (deleted, scaled down,
scheduled by someone else) and must not keep room from the pods that are there.
Monotonic clock, as for the cache's holds. Leader-local: a new leader starts with none,
which only lets an arrival win the room, as without reservations.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from metricsched.core import model, reservation
from metricsched.edges import observe
from metricsched.runtime import cache as cache_mod

BOUND_S = 60.0  # a hold ends this long after the eviction at the latest


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    placeholder: model.PodInfo  # counted on ``placeholder.node_name``
    until: float  # monotonic

    @property
    def workload(self) -> str:
        return self.placeholder.usage_workload

    @property
    def node(self) -> str:
        return self.placeholder.node_name


class Reservations:
    def __init__(
        self,
        *,
        cache: cache_mod.ClusterCache,
        metrics: observe.Metrics,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.metrics = metrics
        self._wall = wall
        self._monotonic = monotonic
        self._holds: dict[str, Hold] = {}  # evicted pod's uid -> its hold, oldest first

    def __len__(self) -> int:
        return len(self._holds)

    def holds(self) -> tuple[Hold, ...]:
        return tuple(self._holds.values())

    def hold(self, pod: model.PodInfo, *, node: str, window_s: float) -> bool:
        """Hold room on ``node`` for the replacement of ``pod`` (about to be evicted); False
        when the node is gone (nothing held)."""
        placeholder = reservation.placeholder(pod, node=model.NodeName(node), at=self._wall())
        if not self.cache.reserve(placeholder):
            return False
        self.release(pod.uid)
        until = self._monotonic() + min(BOUND_S, window_s)
        self._holds[pod.uid] = Hold(placeholder=placeholder, until=until)
        self._export()
        return True

    def release(self, uid: str) -> None:
        """The eviction of pod ``uid`` failed or was refused: its room is free again."""
        held = self._holds.pop(uid, None)
        if held is not None:
            self.cache.unreserve(held.placeholder.uid)
            self._export()

    def consume(self, pod: model.PodInfo, node: str) -> None:
        """``pod`` is being bound to ``node``: one hold of its workload ends, the one on
        ``node`` if there is one (the pod takes its room), else the oldest."""
        if not self._holds:
            return
        workload = pod.usage_workload
        mine = [uid for uid, held in self._holds.items() if held.workload == workload]
        if not mine:
            return
        here = [uid for uid in mine if self._holds[uid].node == node]
        self.release((here or mine)[0])

    def expire(self) -> int:
        """End the holds past their bound; how many ended."""
        now = self._monotonic()
        ended = [uid for uid, held in self._holds.items() if held.until <= now]
        for uid in ended:
            self.release(uid)
        return len(ended)

    def _export(self) -> None:
        self.metrics.rebalance_reservations.set(len(self._holds))
