"""A mapping with O(1) amortised writes and O(1) consistent read-only snapshots.

The metric store's data structure. Copying the whole store on every write made a
refresh round quadratic in the number of metrics (4,000 metrics: 10 s of event loop per
round); copying on every snapshot taken after a write is as bad when a cycle reads
between answers. Here every key keeps the few versions of its value that a live
snapshot may still read, stamped with a write counter; a snapshot is a stamp and reads
the newest version at or before it.

Memory stays bounded whatever readers hold: once superseded versions outnumber the keys
(plus a constant), every snapshot still alive is given its own copy (O(keys), at most
once per that many writes: amortised O(1)) and the history is cut to the current
versions.

Thread-safe: writes take a lock; reads take none (a key's history is replaced, never
changed in place, and a snapshot given its own copy meanwhile reads that instead). No
I/O.
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_SLACK = 1024  # superseded versions tolerated beyond one per key before compacting


class _Gone:
    """A deleted key's version (distinct from any value, None included)."""


_GONE = _Gone()

History = dict[K, tuple[tuple[int, "V | _Gone"], ...]]


class _Snapshot(Mapping[K, V]):
    """What the map held at ``stamp``: a read-only Mapping that later writes do not move."""

    __slots__ = ("__weakref__", "_history", "_own", "_size", "_stamp")

    def __init__(self, history: History[K, V], *, stamp: int, size: int) -> None:
        self._history = history
        self._stamp = stamp
        self._size = size
        self._own: dict[K, V] | None = None  # set when the map compacts while we live

    def _lookup(self, key: K) -> V | _Gone:
        own = self._own
        if own is not None:
            return own.get(key, _GONE)
        found: V | _Gone = _GONE
        for stamp, value in reversed(self._history.get(key, ())):
            if stamp <= self._stamp:
                found = value
                break
        own = self._own
        if own is not None:  # compacted while we read: the copy is the truth
            return own.get(key, _GONE)
        return found

    def __getitem__(self, key: K) -> V:
        value = self._lookup(key)
        if isinstance(value, _Gone):
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        try:
            return not isinstance(self._lookup(key), _Gone)  # type: ignore[arg-type]
        except TypeError:  # unhashable
            return False

    def __iter__(self) -> Iterator[K]:
        own = self._own
        if own is None:
            keys = list(self._history)  # one C call: no write interleaves
            own = self._own
            if own is None:
                return (k for k in keys if not isinstance(self._lookup(k), _Gone))
        return iter(own)

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"snapshot({dict(self.items())!r})"

    def detach(self) -> None:
        """Take a copy of what this snapshot shows, before the history it reads is cut."""
        if self._own is None:
            self._own = {k: v for k in self if not isinstance(v := self._lookup(k), _Gone)}


class SnapshotMap(Generic[K, V]):
    """Writes (``set``, ``delete``) in O(1) amortised; ``snapshot()`` in O(1), the same
    object until the next write."""

    def __init__(self, *, slack: int = _SLACK) -> None:
        self._slack = slack
        self._lock = threading.Lock()
        self._history: History[K, V] = {}
        self._stamp = 0
        self._size = 0  # keys present now
        self._versions = 0  # entries in the history
        # Snapshots that may still be read, by id (a Mapping is unhashable: no WeakSet).
        self._live: dict[int, weakref.ref[_Snapshot[K, V]]] = {}
        self._current: Mapping[K, V] | None = None

    def get(self, key: K) -> V | None:
        """The current value of ``key`` (None if absent)."""
        versions = self._history.get(key)
        if not versions or isinstance(versions[-1][1], _Gone):
            return None
        return versions[-1][1]

    def __len__(self) -> int:
        return self._size

    @property
    def versions(self) -> int:
        """Values kept, current and superseded: at most twice the keys plus ``slack``."""
        return self._versions

    def present(self) -> list[K]:
        """The keys present now."""
        return [
            k
            for k, versions in list(self._history.items())
            if not isinstance(versions[-1][1], _Gone)
        ]

    def snapshot(self) -> Mapping[K, V]:
        """A read-only view of the current contents that later writes do not change."""
        current = self._current
        if current is not None:
            return current
        with self._lock:
            if self._current is None:
                snap: _Snapshot[K, V] = _Snapshot(self._history, stamp=self._stamp, size=self._size)
                self._live[id(snap)] = weakref.ref(snap, self._forget(id(snap)))
                self._current = types.MappingProxyType(snap)
            return self._current

    def set(self, key: K, value: V) -> None:
        with self._lock:
            self._write(key, value)

    def delete(self, key: K) -> bool:
        """Remove ``key``; whether it was present."""
        with self._lock:
            versions = self._history.get(key)
            if not versions or isinstance(versions[-1][1], _Gone):
                return False
            self._write(key, _GONE)
            return True

    def _forget(self, ident: int) -> Callable[[object], None]:
        def forget(_: object) -> None:
            self._live.pop(ident, None)  # runs when the snapshot dies, in any thread

        return forget

    def _write(self, key: K, value: V | _Gone) -> None:
        self._stamp += 1
        self._current = None
        old = self._history.get(key, ())
        present_before = bool(old) and not isinstance(old[-1][1], _Gone)
        present_after = not isinstance(value, _Gone)
        self._size += int(present_after) - int(present_before)
        stamps = [s._stamp for ref in list(self._live.values()) if (s := ref()) is not None]
        if stamps:
            # Keep what the oldest live snapshot may read: the newest version at or before
            # its stamp, and everything after it.
            oldest = min(stamps)
            keep = 0
            for index, (stamp, _) in enumerate(old):
                if stamp <= oldest:
                    keep = index
            kept = old[keep:]
        else:
            kept = ()
        if not kept and not present_after:
            self._history.pop(key, None)  # nobody can see it: forget the key
        else:
            self._history[key] = (*kept, (self._stamp, value))
        self._versions += len(kept) + (0 if not kept and not present_after else 1) - len(old)
        if self._versions > 2 * len(self._history) + self._slack:
            self._compact()

    def _compact(self) -> None:
        """Give every live snapshot its own copy, then keep only current versions."""
        for ref in list(self._live.values()):
            snap = ref()
            if snap is not None:
                snap.detach()
        self._live.clear()
        history: History[K, V] = {
            k: (versions[-1],)
            for k, versions in self._history.items()
            if not isinstance(versions[-1][1], _Gone)
        }
        # A new dict: detached snapshots no longer read the old one.
        self._history = history
        self._versions = len(history)
