"""kube-scheduler plugins beyond the filters of ``core.filters``, one module each.

Each module is one plugin (or the part of one that metricsched does) with its name, its
reason strings and one contract comment, called from ``core.cycle``. Like the rest of
``core``: purely computational, no I/O, no clocks, no clients, no module-level state.
"""
