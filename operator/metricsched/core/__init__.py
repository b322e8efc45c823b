"""The scheduling cycle: policy selection, filters, scoring, fallback, explanation.

Everything in this package is purely data-manipulative and computational. No external
calls or any I/O activities are done here: no kopf, no kubernetes or Prometheus clients,
no clocks (the current time is an argument), no randomness that is not seeded by an
argument. The operator, ``metricsched explain`` and the tests run the same code. It
imports nothing from ``metricsched.edges`` or ``metricsched.runtime`` (``make lint``
checks it with import-linter).

Modules:
- ``model``: typed views of nodes, pods, policies, metric values and decisions.
- ``parse``: raw API bodies to those views.
- ``body_fields``: a raw body's field readers; a wrong type is a ``ParseError`` naming it.
- ``pod_resources``: a pod's effective requests and limits, as kube-scheduler sums them.
- ``api_formats``: the API's wire formats the writers share (metav1.Time, the note limit).
- ``node_state``: a node's state from the pods on it (the one builder), and snapshots
  built from pods and nodes.
- ``quantity``: Kubernetes resource quantities.
- ``columns``: the node table, one array per per-node quantity (and recent pods).
- ``selectors``: label selectors and pod-spec terms, parsed once.
- ``framework``: the plugin contract, the per-cycle state and the memo across cycles.
- ``profile``: kube-scheduler's filter plugins in its order, and its FitError message.
- ``plugins``: one unit per plugin (filters, kube-scheduler's score plugins beside their
  filters, the metric threshold, fallback, preemption's message) and
  ``plugins.kube_scores``, the one registry of the score plugins.
- ``policy``: a SchedulingPolicy body parsed into a policy (``PolicyError`` lists every
  problem), and the operator's default policy.
- ``policy_defaults``: the CRD's names, limits and defaults the parser applies.
- ``policy_fields``: a policy body's field readers (durations, bounded numbers, enums,
  selectors), each adding its problem to one list.
- ``policy_metrics``: ``spec.metrics``: sources, weights, goals, thresholds and scale.
- ``policy_estimate``: a metric's ``estimate``, declared or defaulted.
- ``policy_rebalance``: ``spec.rebalance``: durations, caps, margin and triggers.
- ``policy_selection``: the policy that governs a pod, and the shadow one that evaluates it.
- ``policy_installs``: which install serves a policy; other installs' policies that
  select a pod.
- ``promql_guard``: the cluster admin's rules for what a policy may query.
- ``scoring``: metric values, normalisation, weights, goals, onMissing, burst penalty.
- ``estimate``: what pods bound since a sample add to it.
- ``learning``: what settled binds teach a learned estimate (the learner's arithmetic).
- ``usage``: measured per-pod usage, each workload's quantile, one pod's estimated usage.
- ``pod_budget``: caps on what one pod may cost a cycle (terms, tolerations, ...).
- ``opt_in``: which created pods the opt-in webhook gives this install's scheduler name.
- ``phases``: the metric phases after the filters (PreScore, the metric Filter, Score and
  the ranking), each a function of the one before's record.
- ``cycle``: one scheduling decision for one pod: filters, the phases, then rendering.
- ``class_run``: consecutive pods of one class decided as a run, each as ``cycle`` decides it.
- ``decision_record``: the decision annotation kept on the pod.
- ``explain``: the human-readable table of a decision.
- ``shadow``: what a shadow policy would have done, and its status block.
- ``rebalance``: which pods a policy with ``spec.rebalance`` moves, by a dry run of the
  cycle.
- ``rebalance_room``: rebalancing's arithmetic: a pod's contribution to a trigger, the
  pooled room of a pass, acceptance by improvement.
- ``reservation``: room a rebalancing move's target holds for the evicted pod's
  replacement, as the cycle sees it.
- ``versions``: the API server's version mapped to kube-scheduler's rules of that minor.
- ``kubelet_rejection``: a pod we bound that the kubelet refused at admission, and what
  its Event says.
"""
