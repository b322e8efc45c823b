"""The placement-quality benchmark (``python -m bench quality``, issue 19).

The same seeded scenarios (a burst, steady arrivals and departures, a hot spot) are played
against kube-scheduler, metricsched with its usage estimate on and off, and random
placement, each from the same starting state, on nodes whose utilisation the load model
(hack/loadmodel.py) derives from the pods bound there. The figures come from the load
model's ground-truth record, never from what a scheduler believed.

- ``scenarios``: the seeded nodes, workloads and event schedules (pure; no I/O).
- ``metrics``: figures from the load model's record (pure; no I/O).
- ``loadmodel``: the load model's HTTP API and record file.
- ``randombinder``: the random-placement system (a process of its own).
- ``runner``: plays the scenarios on the benchmark's control plane.
- ``report``: tables, headline and plots from a results file.
"""
