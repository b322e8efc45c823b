"""The fault-injection suite: the operator under API faults, against the local control plane.

Tooling: ``proxy`` (a TCP fault proxy per replica), ``replicas`` (supervised operator
processes), ``identity`` (a ServiceAccount per replica), ``audit`` (who bound what, who
held the Lease), ``checker`` (pods lost, overcommitted nodes), ``harness`` (one scenario)
and ``report`` (docs/reliability.md). Scenarios are the ``test_*.py`` modules.
"""
