"""NodeAffinity: kube-scheduler's plugin of that name, its Filter and Score halves together.

As kube-scheduler keeps one folder per plugin (``plugins/nodeaffinity/``), each half here is
one module with its contract comment; ``core.profile`` runs the filter and
``core.plugins.kube_scores`` registers the score. Purely computational, like the rest of
``core``.

- ``filtering``: ``spec.nodeSelector`` and the required node affinity (``PLUGIN``);
- ``scoring``: the pod's preferred node affinity terms.
"""

from __future__ import annotations

from metricsched.core.plugins.node_affinity import filtering, scoring

__all__ = ["filtering", "scoring"]
