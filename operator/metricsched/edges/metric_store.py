"""The metric store: the latest ``MetricSeries`` of every policy metric.

Written by the refresher's answers (in worker threads and on the loop), read by every
scheduling cycle as one consistent view. No I/O.

Its size is what grows with the cluster (about 100 bytes per stored value: metrics x
nodes), so it may hold at most ``max_values`` values across every policy
(``--max-metric-values``): an answer that would pass the cap is refused as
``ResultTooLarge`` for its metrics, which keep what they held (aging out by their
``maxMetricAge``), and the other metrics are unaffected. An answer shared by several
metrics (one query, one ``values`` mapping) counts once.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping, Sequence

from metricsched.core import model
from metricsched.edges import snapshot_map


class MetricStore:
    """The latest ``MetricSeries`` of every policy metric, shared between threads.

    ``view()`` is a consistent read-only snapshot (a cycle sees one state of the store
    whatever is written meanwhile), taken in O(1); a write costs O(1) amortised however
    many metrics there are (``snapshot_map``: no copy of the store per metric or per
    view).
    """

    def __init__(self, *, max_values: int | None = None) -> None:
        self._lock = threading.Lock()
        self._data: snapshot_map.SnapshotMap[model.MetricKey, model.MetricSeries] = (
            snapshot_map.SnapshotMap()
        )
        self._version = 0
        self.max_values = max_values  # None: no cap (tests, explain)
        # The values mappings held, by identity: [their length, how many keys hold them].
        # Metrics sharing one query's answer share its mapping, which costs memory once.
        self._held: dict[int, list[int]] = {}
        self._total = 0

    @property
    def values(self) -> int:
        """Values held across every metric (a mapping shared by several counted once)."""
        return self._total

    @property
    def version(self) -> int:
        """Increments whenever values or error states change (not on mere re-confirmation)."""
        return self._version

    def view(self) -> model.MetricView:
        return self._data.snapshot()

    def get(self, key: model.MetricKey) -> model.MetricSeries | None:
        """The current series of ``key``, without taking a snapshot."""
        return self._data.get(key)

    def update(self, key: model.MetricKey, series: model.MetricSeries) -> bool:
        """Store the outcome of a refresh; return whether the version changed.

        A failed refresh keeps the previous samples with their old ``refreshed_at``, so
        they age out by ``maxMetricAge`` instead of looking fresh; it only records the
        attempt time and the error. A successful refresh replaces the values. What the
        learner attached (``learned``) and the measured usage (``usage``) are carried forward
        unless ``series`` brings its own.
        """
        with self._lock:
            return self._update(key, series)

    def _update(self, key: model.MetricKey, series: model.MetricSeries) -> bool:
        """``update`` with the lock held."""
        previous = self._data.get(key)
        if series.error is not None and previous is not None:
            series = model.MetricSeries(
                values=previous.values,
                last_refresh=series.last_refresh,
                error=series.error,
                error_message=series.error_message,
            )
        if previous is not None and series.learned is None:
            series = dataclasses.replace(series, learned=previous.learned)
        if previous is not None and series.usage is None:
            series = dataclasses.replace(series, usage=previous.usage)
        changed = previous is None or _signature(previous) != _signature(series)
        self._put(key, series)
        if changed:
            self._version += 1
        return changed

    def update_shared(
        self, keys: Sequence[model.MetricKey], series: model.MetricSeries
    ) -> model.MetricSeries:
        """Store one query's answer for every metric in ``keys`` (they share it) and
        return what was stored as the attempt's outcome: ``series``, or, if its values
        would take the store past ``max_values``, the same attempt refused as
        ``ResultTooLarge`` (those metrics keep what they held; nothing else is dropped)."""
        with self._lock:
            if series.error is None and self.max_values is not None:
                refusal = self._over_cap(keys, series.values)
                if refusal is not None:
                    series = model.MetricSeries(
                        values={},
                        last_refresh=series.last_refresh,
                        error=model.QueryErrorKind.RESULT_TOO_LARGE,
                        error_message=refusal,
                    )
            for key in keys:
                self._update(key, series)
            return series

    def _over_cap(
        self, keys: Sequence[model.MetricKey], values: Mapping[model.NodeName, model.MetricSample]
    ) -> str | None:
        """Why storing ``values`` for ``keys`` would pass ``max_values``; None if it fits.
        What ``keys`` alone hold now is freed by the replacement."""
        assert self.max_values is not None
        holding: dict[int, int] = {}
        for key in keys:
            previous = self._data.get(key)
            if previous is not None:
                holding[id(previous.values)] = holding.get(id(previous.values), 0) + 1
        freed = sum(
            self._held[ident][0] for ident, n in holding.items() if self._held[ident][1] == n
        )
        added = 0 if id(values) in self._held else len(values)
        kept = self._total - freed
        if kept + added <= self.max_values:
            return None
        return (
            f"the answer has {len(values)} values; with the {kept} the other metrics hold,"
            f" that passes the operator's cap of {self.max_values} stored values"
            " (--max-metric-values, sized to its memory limit): return fewer series (one"
            " per node), or ask the cluster admin to raise the cap with the memory limit"
        )

    def _put(self, key: model.MetricKey, series: model.MetricSeries) -> None:
        """Store ``series`` under ``key`` (lock held), keeping the count of values."""
        previous = self._data.get(key)
        if previous is not None:
            self._release(previous.values)
        held = self._held.setdefault(id(series.values), [len(series.values), 0])
        if held[1] == 0:
            self._total += held[0]
        held[1] += 1
        self._data.set(key, series)

    def _release(self, values: Mapping[model.NodeName, model.MetricSample]) -> None:
        held = self._held[id(values)]
        held[1] -= 1
        if held[1] == 0:
            # Forgotten with its last holder: its id may be reused by a new mapping.
            self._total -= held[0]
            del self._held[id(values)]

    def set_learned(self, key: model.MetricKey, learned: model.LearnedEffect | None) -> None:
        """Attach what the estimate learner knows to ``key``'s series (kept by later
        refreshes until replaced); the version stays: values and errors are unchanged."""
        with self._lock:
            series = self._data.get(key)
            if series is None or series.learned is learned:
                return
            self._put(key, dataclasses.replace(series, learned=learned))

    def set_usage(self, keys: Iterable[model.MetricKey], usage: model.PodUsage) -> None:
        """Attach the measured per-pod usage to the series of ``keys`` (the metrics whose
        estimate is Measured; kept by later refreshes until replaced); the version stays."""
        with self._lock:
            for key in keys:
                series = self._data.get(key)
                if series is not None and series.usage is not usage:
                    self._put(key, dataclasses.replace(series, usage=usage))

    def retain(self, keys: Iterable[model.MetricKey]) -> int:
        """Drop every metric not in ``keys`` (deleted policies or metrics); return how many."""
        keep = set(keys)
        with self._lock:
            removed = 0
            for key in [k for k in self._data.present() if k not in keep]:
                series = self._data.get(key)
                if series is not None:
                    self._release(series.values)
                removed += self._data.delete(key)
            if removed:
                self._version += 1
            return removed

    def ages(self, now: float) -> dict[tuple[str, str], float]:
        """Age of each metric's freshest value, keyed (policy, metric), for observe.Metrics."""
        return {
            (key.policy, key.metric): now - max(s.refreshed_at for s in series.values.values())
            for key, series in self._data.snapshot().items()
            if series.values
        }


def _signature(series: model.MetricSeries) -> tuple[object, ...]:
    # Values and error kind, not timestamps: a refresh that confirms the same numbers does
    # not wake every pending pod, but a recovery (error -> None) does.
    return ({node: s.value for node, s in series.values.items()}, series.error)
