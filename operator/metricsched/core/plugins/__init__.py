"""kube-scheduler's plugins and metricsched's own, one module each.

Each module is one plugin (or the part of one that metricsched does) with its name, its
reason strings and one contract comment, run by ``core.profile`` and ``core.cycle``. Like
the rest of ``core``: purely computational, no I/O, no clocks, no clients, no
module-level state.

Modules:
- filters, in kube-scheduler's order: ``node_unschedulable``, ``node_name``,
  ``taint_toleration``, ``node_affinity``, ``node_ports``, ``node_resources_fit``,
  ``volume_binding``, ``node_volume_limits``, ``pod_topology_spread``,
  ``inter_pod_affinity``, ``node_declared_features`` (v1.36+), ``dynamic_resources``;
- ``metric_threshold``: a policy's thresholds and ``onMissing: Exclude``;
- ``fallback``: the strategies that pick a node without metrics;
- ``preemption``: DefaultPreemption's PostFilter message (metricsched does not preempt);
- ``kube_scores``: kube-scheduler's default score plugins (a package of its own).
"""
