"""A cluster whose nodes do not change for minutes never pauses scheduling (issue 29).

Not a fault injected: the quiet that real clusters have. Kubelets post a node's status only
on change (at least every 5 minutes), and the API server bookmarks a watch only when its
kind's resourceVersion moved, so the operator's Node watch may hear nothing for minutes.
On the test bed's v1.37.2 a fresh clone's port-flood scenario once got no event and no
bookmark on the Node watch for 65 s, and the silence check (``runtime/informers.py``,
``SUSPECT_S``) took the quiet watch for a stalled one and stopped scheduling until the
90-s re-list. The fix asks the API server to end the Node and Pod watches every 30-40 s
and counts the end as a sign of life.

Here nodes are added, then left alone for ``QUIET_S`` (the test bed's kwok posts a node's
status every ~10 minutes and renews its Lease, not the Node), while a pod of ours arrives
every ``ARRIVE_EVERY_S``. Invariants, besides the suite's usual four: no replica logs the
silence hold or a stall re-list, and every pod binds within ``MAX_WAIT_S`` of its creation.
The scenario fails as testing nothing if an independent watch saw node events closer
together than ``QUIET_STRETCH_S`` throughout.

Marked ``soak``: it runs for minutes, so it is not in ``make test``; ``make soak`` runs it.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import kubernetes
import pytest

from tests.faults import replicas
from tests.faults.conftest import ScenarioFactory

pytestmark = pytest.mark.soak

QUIET_S = 180.0
ARRIVE_EVERY_S = 10.0
MAX_WAIT_S = 10.0
SUSPECT_S = 65.0  # runtime/informers.py SUSPECT_S, written here as the bound under test
QUIET_STRETCH_S = 2 * SUSPECT_S
HOLD_LINES = ("not scheduling until it delivers", "stalled; listing again")


class NodeEvents:
    """When any Node changed, seen by a watch of our own (no bookmarks)."""

    def __init__(self, api_client: Any) -> None:
        self._core: Any = kubernetes.client.CoreV1Api(api_client)
        self.times: list[float] = []
        self._watch: Any = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        self._thread = threading.Thread(target=self._run, name="node-events", daemon=True)

    def start(self) -> NodeEvents:
        self._thread.start()
        return self

    def _run(self) -> None:
        version = self._core.list_node().metadata.resource_version
        while True:
            try:
                for _ in self._watch.stream(
                    self._core.list_node, resource_version=version, timeout_seconds=60
                ):
                    self.times.append(time.time())
            except Exception:  # an observer: the scenario judges what it saw
                time.sleep(1.0)
            if self._stopped:
                return

    _stopped = False

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()

    def longest_quiet(self, start: float, end: float) -> float:
        marks = [start, *(t for t in self.times if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(marks))


def test_nodes_quiet_for_minutes_never_pause_scheduling(scenario: ScenarioFactory) -> None:
    s = scenario("quiet-nodes", f"No node changes for {QUIET_S:g} s while pods arrive")
    s.add_nodes(3)
    s.start_replicas(2)
    holder = s.holder()
    nodes = NodeEvents(s.api).start()
    created: dict[str, float] = {}
    with s.fault(f"nodes left alone for {QUIET_S:g} s") as window:
        t0 = window.start
        k = 0
        while time.time() < t0 + QUIET_S:
            sent = time.time()
            (name,) = s.create_pods("quiet", 1, cpu_m=10)
            created[name] = sent
            k += 1
            time.sleep(max(0.0, t0 + k * ARRIVE_EVERY_S - time.time()))
        end = time.time()
    nodes.stop()
    s.wait_bound_count(len(created))
    waits = {n: s.watch.bound_at[n] - at for n, at in created.items() if n in s.watch.bound_at}
    holds = [
        f"{r.name} at +{rec['at'] - t0:.1f}s: {rec['message']}"
        for r in s.replicas
        for rec in replicas.log_records(r.log, since=t0)
        if any(line in str(rec.get("message", "")) for line in HOLD_LINES)
    ]
    quiet = nodes.longest_quiet(t0, end)
    s.extra["node_events_in_window"] = sum(1 for t in nodes.times if t0 < t < end)
    s.extra["longest_node_quiet_s"] = round(quiet, 1)
    s.extra["longest_wait_s"] = round(max(waits.values(), default=0.0), 1)
    s.extra["holds"] = holds
    failures = []
    if quiet < QUIET_STRETCH_S:
        failures.append(
            f"nodes changed at least every {quiet:.0f} s: no quiet stretch of "
            f"{QUIET_STRETCH_S:g} s, so the scenario tested nothing"
        )
    if holds:
        failures.append(f"scheduling held on a quiet watch: {holds}")
    if late := {n: round(w, 1) for n, w in waits.items() if w > MAX_WAIT_S}:
        failures.append(f"pods waited over {MAX_WAIT_S:g} s to bind: {late}")
    if s.holder() != holder:
        failures.append(f"the Lease moved from {holder} to {s.holder()}")
    s.extra["failures"] = failures
    s.verify(recover_from=window.end)
