"""kube-scheduler's shared score normalisation (plugins/helper ``DefaultNormalizeScore``).

Used by TaintToleration (reversed) and NodeAffinity. Purely computational.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

MAX_NODE_SCORE: Final = 100


def default_normalize(raw: Sequence[int], *, reverse: bool) -> tuple[float, ...]:
    """Each count as ``100 * count // max`` (reversed: 100 minus that); all 0: 0 each, or
    100 each when reversed. Integer arithmetic, as kube-scheduler's."""
    highest = max(raw, default=0)
    if highest == 0:
        return tuple(float(MAX_NODE_SCORE if reverse else 0) for _ in raw)
    scaled = [MAX_NODE_SCORE * count // highest for count in raw]
    if reverse:
        scaled = [MAX_NODE_SCORE - score for score in scaled]
    return tuple(float(score) for score in scaled)
