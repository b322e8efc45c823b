"""What /healthz and /readyz report: the operator loop's heartbeat (liveness) and each
subsystem's readiness, updated by the operator and read by the probes' server thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class HealthState:
    """What /healthz and /readyz report; updated by the operator, read by the server.

    Liveness: the operator loop calls ``beat()`` regularly; a heartbeat older than
    ``max_heartbeat_age_s`` means the loop is stuck and the pod should be restarted.
    Readiness is per subsystem (the operator's start-up, kopf's watches, each informer
    kind, the cluster state's sync): ``set_ready(False, reason, subsystem=...)`` blocks it
    until the same subsystem calls ``set_ready(True)``, so one subsystem recovering never
    hides another that still fails (no last writer wins). /readyz answers 503 with every
    blocking reason while any is set.
    """

    def __init__(
        self,
        *,
        max_heartbeat_age_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._max_age = max_heartbeat_age_s
        self._last_beat = clock()  # start-up counts as a beat: a grace period
        self._blocked: dict[str, str] = {"operator": "starting: caches not synced yet"}
        self._ready_reason = "ready"

    def beat(self) -> None:
        with self._lock:
            self._last_beat = self._clock()

    def set_ready(self, ready: bool, reason: str = "", *, subsystem: str = "operator") -> None:
        with self._lock:
            if ready:
                self._blocked.pop(subsystem, None)
                self._ready_reason = reason or "ready"
            else:
                self._blocked[subsystem] = reason or "not ready"

    def liveness(self) -> tuple[bool, str]:
        with self._lock:
            age = self._clock() - self._last_beat
        if age <= self._max_age:
            return True, f"ok: last heartbeat {age:.1f}s ago"
        return False, f"operator loop stalled: last heartbeat {age:.1f}s ago (> {self._max_age:g}s)"

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            if not self._blocked:
                return True, self._ready_reason
            return False, "; ".join(self._blocked[k] for k in sorted(self._blocked))
