"""The metric store: the latest ``MetricSeries`` of every policy metric.

Written by the refresher's answers (in worker threads and on the loop), read by every
scheduling cycle as one consistent view. No I/O.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable

from metricsched.core import model
from metricsched.edges import snapshot_map


class MetricStore:
    """The latest ``MetricSeries`` of every policy metric, shared between threads.

    ``view()`` is a consistent read-only snapshot (a cycle sees one state of the store
    whatever is written meanwhile), taken in O(1); a write costs O(1) amortised however
    many metrics there are (``snapshot_map``: no copy of the store per metric or per
    view).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: snapshot_map.SnapshotMap[model.MetricKey, model.MetricSeries] = (
            snapshot_map.SnapshotMap()
        )
        self._version = 0

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
            self._data.set(key, series)
            if changed:
                self._version += 1
            return changed

    def set_learned(self, key: model.MetricKey, learned: model.LearnedEffect | None) -> None:
        """Attach what the estimate learner knows to ``key``'s series (kept by later
        refreshes until replaced); the version stays: values and errors are unchanged."""
        with self._lock:
            series = self._data.get(key)
            if series is None or series.learned is learned:
                return
            self._data.set(key, dataclasses.replace(series, learned=learned))

    def set_usage(self, keys: Iterable[model.MetricKey], usage: model.PodUsage) -> None:
        """Attach the measured per-pod usage to the series of ``keys`` (the metrics whose
        estimate is Measured; kept by later refreshes until replaced); the version stays."""
        with self._lock:
            for key in keys:
                series = self._data.get(key)
                if series is not None and series.usage is not usage:
                    self._data.set(key, dataclasses.replace(series, usage=usage))

    def retain(self, keys: Iterable[model.MetricKey]) -> int:
        """Drop every metric not in ``keys`` (deleted policies or metrics); return how many."""
        keep = set(keys)
        with self._lock:
            removed = sum(self._data.delete(k) for k in self._data.present() if k not in keep)
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
