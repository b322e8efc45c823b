"""PodTopologySpread: kube-scheduler's plugin of that name, its Filter and Score halves together.

As kube-scheduler keeps one folder per plugin (``plugins/podtopologyspread/``), each half here is
one module with its contract comment; ``core.profile`` runs the filter and
``core.plugins.kube_scores`` registers the score. Purely computational, like the rest of
``core``.

- ``filtering``: every DoNotSchedule constraint stays within its maxSkew (``PLUGIN``);
- ``scoring``: ScheduleAnyway constraints and the system default spreading.
"""

from __future__ import annotations

from metricsched.core.plugins.pod_topology_spread import filtering, scoring

__all__ = ["filtering", "scoring"]
