"""What kopf does per watch event that this operator does not need, switched off.

Every handler this operator registers is ``@kopf.on.event`` (runtime/kopf_source.py): it
reads the event's body and never asks kopf for ``diff``, ``old`` or ``new``, nor for
retries or progress. kopf still builds a diff-base "essence" of every event's body
(``DiffBaseStorage.build``: a ``deepcopy`` of the body, then two more in
``SmartProgressStorage.clear``, then a diff against nothing), whether a handler uses it
or not (``kopf/_core/reactor/processing.py::_detect_causes``, kopf 1.45.2).
``NoDiffBase`` makes that essence empty. kopf writes no progress for event handlers, so
the progress storage stays kopf's default.

The allocations of each event (JSON decoding, kopf's wrappers) also trigger the cyclic
garbage collector, whose full collections walked every object the process holds:
``gc.freeze()`` at kopf's first start-up leaves what exists by then (imports, the initial
LIST's cache) out of them. Once per process: kopf runs its start-up handlers again when
it restarts its watches (after ~7 s of API errors), and a freeze then would pin the
failed run's cyclic garbage for good. ``python -m bench kopf`` measures each tuning
(bench/analysis.md).

Nothing here changes what a handler receives: the body of every event, in order.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import Any

import kopf


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff-base storage that keeps nothing: every essence is empty, nothing is stored.

    Only for operators whose handlers are all ``on.event`` (and ``index``): a null
    diff-base would make every event of an ``on.create``/``on.update`` handler look like
    a creation. tests/unit/runtime/test_kopf_tuning.py keeps our registry so.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def _no_diffbase(settings: kopf.OperatorSettings) -> None:
    settings.persistence.diffbase_storage = NoDiffBase()


def _gc_freeze(settings: kopf.OperatorSettings) -> None:
    # Everything built before the watches start (imports: kopf, the kubernetes client's
    # models; the initial LIST's cache) is long-lived: moved out of the cyclic GC's
    # reach, the full collections that per-event allocations trigger stop walking it.
    # Only the first time: at a kopf restart, what is new is mostly the failed run's
    # garbage, which a freeze would keep forever.
    if gc.get_freeze_count() == 0:
        gc.freeze()


# Each tuning by name: ``python -m bench kopf`` measures them one by one against none.
TUNINGS: dict[str, Callable[[kopf.OperatorSettings], None]] = {
    "no-diffbase": _no_diffbase,
    "gc-freeze": _gc_freeze,
}


def configure(settings: kopf.OperatorSettings) -> None:
    """Apply every tuning to kopf's settings (the operator's start-up handler calls this)."""
    for tune in TUNINGS.values():
        tune(settings)
