"""The scheduling cycle: policy selection, filters, scoring, fallback, explanation.

Everything in this package is purely data-manipulative and computational. No external
calls or any I/O activities are done here: no kopf, no kubernetes or Prometheus clients,
no clocks (the current time is an argument), no randomness that is not seeded by an
argument. The operator, ``metricsched explain`` and the tests run the same code.

Modules:
- ``model``: typed views of nodes, pods, policies, metric values and decisions, and
  the parsers that build them from raw API bodies.
- ``quantity``: Kubernetes resource quantities.
- ``filters``: kube-scheduler-compatible feasibility filters with its reason strings.
- ``policy``: SchedulingPolicy parsing, validation and selection for a pod.
- ``scoring``: metric normalisation, weights, goals, onMissing and burst penalty.
- ``cycle``: one scheduling decision for one pod.
- ``explain``: the human-readable table of a decision.
- ``rebalance``: which pods a policy with ``spec.rebalance`` moves, by a dry run of the
  cycle.
"""
