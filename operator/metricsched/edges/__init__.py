"""I/O at the edges: talks to Prometheus and the Kubernetes API; holds no scheduling logic.

Every Kubernetes API call goes through ``kube_http``, made for the event loop (aiohttp),
and so do the writers on it (``binder``, ``eviction``, ``pod_status``, ``events``,
``policy_events``); the blocking client left here (Prometheus) is plain synchronous code
meant to run in a worker thread (``asyncio.to_thread``), never on kopf's event loop.
``http_server`` runs a loop of its own on its own thread, so that the probes never wait
for the operator's; ``metrics_auth``'s reviews, made from that server's request threads,
are handed to the operator's loop with a bounded wait. Objects that share state
between threads (``metric_store.MetricStore``, ``probes.HealthState``) guard it with
locks. Errors of the outside world are classified and returned (or counted), not raised:
the operator decides what to retry. Nothing here imports ``metricsched.runtime``
(``make lint`` checks it with import-linter).

Modules:
- ``kube``: the kubernetes client, for its credentials only (and ``path``, an API path).
- ``kube_http``: the API on an event loop (aiohttp, orjson): requests and watch streams
  with the kubernetes client's credentials; the one transport of every API call (the
  Lease, the informers, every writer, the policy status, the auth reviews, explain's
  reads).
- ``errors``: the API's errors in one vocabulary: ``ApiError`` (status, reason,
  message), the one reading of an error body's message, the one line that describes a
  failed call.
- ``informer``: a lean informer (LIST+WATCH with bookmarks, 410 re-list) of one resource.
- ``binder``: the Binding (one POST per pod, fenced) and the read-back of a lost answer.
- ``eviction``: the Eviction API (rebalancing), fenced like a Binding.
- ``pod_status``: the PodScheduled condition, as kube-scheduler sets it.
- ``events``: Events, merged and rate-limited like a controller's recorder.
- ``wire``: what the writers share: a transport error's text, the fence, the one fenced
  POST, Event note truncation, times.
- ``policy_events``: policy events on a budget of their own, re-sent while they hold.
- ``prometheus``: the Prometheus client: one instant query (checked against the admin's
  query rules first), answers mapped to nodes, classified and scrubbed errors.
- ``metrics_api``: the resource metrics API (metrics.k8s.io): one LIST of NodeMetrics
  read as cpu and memory utilisation per node, for metrics with source metricsServer.
- ``query_rounds``: a round's queries grouped per distinct query, answers stored for
  each metric, one result per metric for status and events.
- ``metric_store``: the latest values of every policy metric, one consistent view per
  cycle.
- ``snapshot_map``: the store's mapping: O(1) updates, views that never change.
- ``prometheus_http``: the query API read incrementally under byte and series caps.
- ``prometheus_series``: result series mapped to nodes, counts of what was left out.
- ``observe``: Prometheus metrics of the scheduler itself, on a registry of its own.
- ``probes``: what /healthz and /readyz report: the loop's heartbeat, each subsystem's
  readiness.
- ``endpoints``: which of /healthz, /readyz and /metrics each port serves.
- ``http_server``: the server of those ports: requests read under a deadline, the probes
  answered at once whatever else holds the port, /metrics in a small bounded pool.
- ``metrics_auth``: /metrics behind TokenReview and SubjectAccessReview.
- ``logs``: structured logging setup and the one-line-per-decision log.
- ``webhook``: the namespace opt-in admission webhook (kopf's server, one mutate handler).
"""
