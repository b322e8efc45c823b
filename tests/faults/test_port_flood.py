"""Port flood: idle connections held to the leader's health port cost it no probe (N2).

The health port is open to every pod of the cluster unless the NetworkPolicy is on. From
the harness, ``IDLE`` TCP connections that never send a byte are held to the leader's
health port for ``FLOOD_S``, each re-opened as soon as the operator closes it, while pods
arrive in waves. A kubelet-style prober asks every replica's /healthz every 2 s with a
2-s timeout (the chart's livenessProbe has timeoutSeconds 2 and failureThreshold 3).

Beside the suite's invariants (Scenario.verify): no replica's /healthz fails 3 probes in
a row (the kubelet would restart it), no replica exits, the Lease stays with the same
replica, and the pods keep binding with no gap over ``MAX_GAP_S`` between binds. Before
issue 28 every probe failed: 72 idle connections filled the pool of 8 handler threads and
64 waiting places, and the operator closed the probe's connection unanswered.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import selectors
import socket
import threading
import time
import urllib.request

from tests.faults import harness, test_tenants
from tests.faults.conftest import ScenarioFactory

IDLE = 80
FLOOD_S = 90.0
PODS = 200
WAVES = 18  # a wave every 5 s or so for the first 85 s of the flood
PROBE_EVERY_S = 2.0
MAX_GAP_S = 10.0
FAILURES_IN_A_ROW = 3  # the chart's livenessProbe failureThreshold


class IdleConnections:
    """``count`` TCP connections to ``port`` that never send a byte, each re-opened as
    soon as the other side closes it (an attacker keeping a pool full)."""

    def __init__(self, port: int, count: int) -> None:
        self.port = port
        self.count = count
        self.opened = 0
        self.closed_by_server = 0
        self.answered = 0  # closed connections that got bytes first: none should
        self.most_held = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="port-flood", daemon=True)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        held: set[socket.socket] = set()
        try:
            while not self._stop.is_set():
                while len(held) < self.count and not self._stop.is_set():
                    try:
                        new = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
                    except OSError:
                        self._stop.wait(0.05)  # refused or a full backlog: again soon
                        break
                    new.setblocking(False)
                    selector.register(new, selectors.EVENT_READ)
                    held.add(new)
                    self.opened += 1
                self.most_held = max(self.most_held, len(held))
                for key, _ in selector.select(timeout=0.05):
                    conn = key.fileobj
                    assert isinstance(conn, socket.socket)
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        data = b""
                    self.answered += bool(data)
                    selector.unregister(conn)
                    held.discard(conn)
                    conn.close()
                    self.closed_by_server += 1
        finally:
            for conn in held:
                conn.close()
            selector.close()

    def start(self) -> IdleConnections:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _dropped(metrics_port: int) -> dict[str, float]:
    """The replica's own count of connections it did not serve, by reason (empty if the
    scrape fails: reported, never asserted)."""
    with contextlib.suppress(OSError):
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        counts: dict[str, float] = {}
        for m in re.finditer(r"^metricsched_http_dropped_total\{([^}]*)\} (\S+)$", text, re.M):
            reason = re.search(r'reason="([^"]*)"', m.group(1))
            if reason is not None:
                counts[reason.group(1)] = counts.get(reason.group(1), 0.0) + float(m.group(2))
        return counts
    return {}


def _longest_gap(bound_at: dict[str, float], names: list[str]) -> float:
    """The longest time between consecutive binds of ``names`` (from the first)."""
    times = sorted(bound_at[n] for n in names if n in bound_at)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def test_idle_connections_to_the_health_port_fail_no_probe_and_stop_no_binding(
    scenario: ScenarioFactory,
) -> None:
    s = scenario("port-flood", f"{IDLE} idle connections held to the leader's health port")
    s.add_nodes(harness.nodes_for(PODS))
    s.start_replicas(2)
    leader = s.leader()
    holder = s.holder()
    probes = test_tenants.Probes(s.replicas, interval_s=PROBE_EVERY_S)
    start = len(s.created)
    with s.fault(f"{IDLE} idle connections to {leader.name}'s health port") as w:
        flood = IdleConnections(leader.health_port, IDLE).start()
        try:
            s.arrive("during", PODS, over_s=FLOOD_S - 5.0, waves=WAVES)
            time.sleep(max(0.0, w.start + FLOOD_S - time.time()))
        finally:
            flood.stop()
    worst = probes.stop()
    arrived = s.created[start:]
    s.wait_bound_count(len(arrived))
    gap = _longest_gap(s.watch.bound_at, arrived)
    s.extra["flood"] = {
        "idle_connections": IDLE,
        "most_held_at_once": flood.most_held,
        "opened": flood.opened,
        "closed_by_the_operator": flood.closed_by_server,
        "answered": flood.answered,
        "dropped_by_the_leader": _dropped(leader.metrics_port),
    }
    s.extra["probes"] = {"made": probes.made, "failed": probes.failed}
    s.extra["health_failures_in_a_row"] = worst
    s.extra["longest_gap_between_binds_s"] = round(gap, 1)
    s.extra["leader_kept_the_lease"] = s.holder() == holder
    failures = []
    if flood.most_held < IDLE:
        failures.append(f"the flood never held {IDLE} connections (at most {flood.most_held})")
    if any(n >= FAILURES_IN_A_ROW for n in worst.values()):
        failures.append(f"/healthz failed {FAILURES_IN_A_ROW} probes in a row: {worst}")
    if exits := [(r.name, r.exits) for r in s.replicas if r.exits]:
        failures.append(f"replicas exited: {exits}")
    if s.holder() != holder:
        failures.append(f"the Lease moved from {holder} to {s.holder()} under the flood")
    if gap > MAX_GAP_S:
        failures.append(f"pods waited {gap:.1f} s between binds (> {MAX_GAP_S:g})")
    s.extra["failures"] = failures
    s.verify(recover_from=w.end)
