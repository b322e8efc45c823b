"""The operator's runtime: the state between the watches and the cycle.

I/O happens only through ``metricsched.edges``, never here directly; the Kubernetes API
on the event loop (``edges.kube_http``), the blocking Prometheus client in threads, never
on the event loop.

Modules:
- ``operator``: the process, wiring every part below.
- ``gates``: leading, consistent, metrics ready and the fence, made first and handed to
  the scheduler, the rebalancer, the refresher and the status writer.
- ``supervise``: long-lived tasks restarted with backoff, or the process failing loudly.
- ``ingest``: watch events → the cache and the queue (thin): the translation of every
  kind, no kopf.
- ``kopf_source``: kopf (our pending pods and the policies), its registry, settings and
  login, supervised, feeding the translation.
- ``policies``: a SchedulingPolicy's lifecycle, one owner: observed, parsed, rejected
  (status and a Warning) and forgotten (deleted, moved to another install, created again
  under its name, a ghost after a re-list) through one uid-aware fan-out to every party
  that keeps per-policy state; the gate that waits for a LIST after a watch gap; what
  the status record says of the spec.
- ``informers``: the cluster's state off kopf: one lean informer per kind, feeding the
  translation (``ingest``) as one sink; owns the ``consistent`` gate.
- ``kopf_tuning``: what kopf does per event that this operator does not need, off.
- ``cache``: cluster state fed by watches (nodes, pods per node, assumed pods, holds).
- ``reconcile``: kopf's pending pods and policies compared with a fresh LIST after kopf
  re-lists.
- ``queue``: which pending pod next, backoff, and the hints that wake pods.
- ``cycle_inputs``: the one builder of a cycle's inputs (``core.cycle.Inputs``) from the
  cache, the metric store and the configuration: the scheduler, explain, shadow and
  rebalance read through it.
- ``scheduler``: the loop that runs the pure cycle and hands decisions to the binder.
- ``refresher``: one PromQL query per metric per interval, answers into the store.
- ``pod_usage``: running pods' measured usage (the Measured estimate), once per round.
- ``fair_slots``: the refresher's query slots, round-robin across namespaces.
- ``learner``: how the policy's own binds moved each metric whose estimate learns.
- ``leader``: Lease election and the fence every Binding passes.
- ``status``: SchedulingPolicy status records and their writer (the leader's PATCH).
- ``rebalancer``: leader-only passes that evict what ``core.rebalance`` picks.
- ``reservations``: the targets held for replacements, shared by the rebalancer and the
  scheduler.
- ``shadow``: shadow evaluation of other schedulers' pods, off the scheduling path.
"""
