"""metricsched: a metrics-aware Kubernetes scheduler.

Pods whose ``spec.schedulerName`` names this scheduler are placed by the
SchedulingPolicy that governs them: nodes are filtered the way kube-scheduler
filters them, scored from cached Prometheus data, and bound through the Binding
API, with every decision explained in Events.

Sub-packages:
- ``metricsched.core``: the pure scheduling cycle (no I/O).
- ``metricsched.runtime``: the state between the watches and the cycle (cache, queue,
  the scheduling loop, the metric refresher, leader election).
- ``metricsched.edges``: the I/O at the edges (Kubernetes API, Prometheus, /metrics).

Modules:
- ``cli``: the ``metricsched`` command (``run``, ``explain``, ``shadow``, ``version``).
- ``config``: flags with METRICSCHED_* environment equivalents.
"""

__version__ = "0.2.0"
