"""kube-scheduler's plugins and metricsched's own, one unit each.

Each unit is one plugin (or the part of one that metricsched does) with its name, its
reason strings and one contract comment, run by ``core.profile`` and ``core.cycle``. A
plugin with one extension point is one module; one with a Filter and a Score is one
package holding both halves (``filtering`` and ``scoring``), as kube-scheduler keeps one
folder per plugin. Like the rest of ``core``: purely computational, no I/O, no clocks, no
clients, no module-level state.

Modules:
- filters, in kube-scheduler's order: ``node_unschedulable``, ``node_name``,
  ``taint_toleration``, ``node_affinity``, ``node_ports``, ``node_resources_fit``,
  ``volume_binding``, ``node_volume_limits``, ``pod_topology_spread``,
  ``inter_pod_affinity``, ``node_declared_features`` (v1.36+), ``dynamic_resources``;
  the five of them that also score are packages (``taint_toleration``,
  ``node_affinity``, ``node_resources_fit``, ``pod_topology_spread``,
  ``inter_pod_affinity``);
- ``balanced_allocation``: NodeResourcesBalancedAllocation, a score plugin only;
- ``normalize``: kube-scheduler's shared score normalisation;
- ``kube_scores``: the one registry of kube-scheduler's default score plugins;
- ``metric_threshold``: a policy's thresholds and ``onMissing: Exclude``;
- ``fallback``: the strategies that pick a node without metrics;
- ``preemption``: DefaultPreemption's PostFilter message (metricsched does not preempt).
"""
