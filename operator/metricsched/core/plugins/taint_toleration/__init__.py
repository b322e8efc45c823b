"""TaintToleration: kube-scheduler's plugin of that name, its Filter and Score halves together.

As kube-scheduler keeps one folder per plugin (``plugins/tainttoleration/``), each half here is
one module with its contract comment; ``core.profile`` runs the filter and
``core.plugins.kube_scores`` registers the score. Purely computational, like the rest of
``core``.

- ``filtering``: every NoSchedule and NoExecute taint of the node is tolerated (``PLUGIN``);
- ``scoring``: PreferNoSchedule taints the pod does not tolerate keep it away.
"""

from __future__ import annotations

from metricsched.core.plugins.taint_toleration import filtering, scoring

__all__ = ["filtering", "scoring"]
