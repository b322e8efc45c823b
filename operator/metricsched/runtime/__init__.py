"""The operator's runtime: the state between the watches and the cycle.

``cache`` (cluster state fed by watches), ``queue`` (which pending pod next, backoff),
``scheduler`` (the loop that runs the pure cycle and hands decisions to the binder),
``rebalancer`` (leader-only passes that evict what ``core.rebalance`` picks),
``operator`` (the thin kopf wiring). I/O happens only through ``metricsched.edges``,
in threads, never on the event loop.
"""
