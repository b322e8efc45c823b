"""InterPodAffinity: kube-scheduler's plugin of that name, its Filter and Score halves together.

As kube-scheduler keeps one folder per plugin (``plugins/interpodaffinity/``), each half here is
one module with its contract comment; ``core.profile`` runs the filter and
``core.plugins.kube_scores`` registers the score. Purely computational, like the rest of
``core``.

- ``filtering``: required pod affinity and anti-affinity, both directions (``PLUGIN``);
- ``scoring``: preferred pod affinity and anti-affinity, both ways.
"""

from __future__ import annotations

from metricsched.core.plugins.inter_pod_affinity import filtering, scoring

__all__ = ["filtering", "scoring"]
