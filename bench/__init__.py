"""metricsched benchmarks: throughput, latency and cost against kube-scheduler and a null binder.

Run ``make bench`` (full matrix) or ``make bench-smoke`` (a short CI-sized run); see
``bench/README.md`` for the method and the latest results.
"""
