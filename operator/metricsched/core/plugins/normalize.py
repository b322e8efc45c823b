"""kube-scheduler's shared score normalisation (plugins/helper ``DefaultNormalizeScore``).

Used by TaintToleration (reversed) and NodeAffinity. Purely computational.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from metricsched.core import columns

MAX_NODE_SCORE: Final = 100


def default_normalize(raw: columns.Ints, *, reverse: bool) -> columns.Floats:
    """Each count as ``100 * count // max`` (reversed: 100 minus that); all 0: 0 each, or
    100 each when reversed. Integer arithmetic, as kube-scheduler's."""
    highest = int(raw.max()) if len(raw) else 0
    if highest == 0:
        return np.full(len(raw), float(MAX_NODE_SCORE if reverse else 0))
    scaled = MAX_NODE_SCORE * raw // highest
    if reverse:
        scaled = MAX_NODE_SCORE - scaled
    return scaled.astype(np.float64)
