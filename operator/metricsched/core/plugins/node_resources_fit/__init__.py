"""NodeResourcesFit: kube-scheduler's plugin of that name, its Filter and Score halves together.

As kube-scheduler keeps one folder per plugin (``plugins/noderesources/``, where
BalancedAllocation stands beside it), each half here is one module with its contract
comment; ``core.profile`` runs the filter and ``core.plugins.kube_scores`` registers the
score. Purely computational, like the rest of ``core``.

- ``filtering``: a free pod slot and room for every resource requested (``PLUGIN``);
- ``scoring``: LeastAllocated (and MostAllocated, for the fallback).
"""

from __future__ import annotations

from metricsched.core.plugins.node_resources_fit import filtering, scoring

__all__ = ["filtering", "scoring"]
