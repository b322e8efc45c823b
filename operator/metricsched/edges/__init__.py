"""I/O at the edges: talks to Prometheus and the Kubernetes API; holds no scheduling logic.

Every blocking client call here is plain synchronous code meant to run in a worker thread
(``asyncio.to_thread``), never on kopf's event loop. Objects that share state between
threads (``prometheus.MetricStore``, ``binder.EventRecorder``, ``observe.HealthState``)
guard it with locks. Errors of the outside world are classified and returned (or counted),
not raised: the operator decides what to retry.

Modules:
- ``prometheus``: one instant query per metric (checked against the admin's query rules
  first), classified and scrubbed errors, the metric store.
- ``prometheus_http``: the query API read incrementally under byte and series caps.
- ``prometheus_series``: result series mapped to nodes, counts of what was left out.
- ``policy_events``: policy events on a budget of their own, re-sent while they hold.
- ``binder``: the Binding API, aggregated and rate-limited Events, the PodScheduled condition.
- ``eviction``: the Eviction API (rebalancing), fenced like a Binding.
- ``observe``: Prometheus metrics of the scheduler itself and the health/metrics HTTP server.
- ``logs``: structured logging setup and the one-line-per-decision log.
"""
