"""NodePorts: no requested host port is in use on the node.

Contract: a node passes unless one of its pods uses a requested host port for the same
protocol and an overlapping host IP (equal, or either side 0.0.0.0), as
HostPortInfo.CheckConflict decides. Skipped for pods without host ports; only nodes
with a host port in use are looked at.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from metricsched.core import columns, framework, model

NAME: Final = "NodePorts"
REASON_NODE_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"
_BIND_ALL: Final = "0.0.0.0"


def conflicts(
    wanted: Sequence[model.HostPort], used: frozenset[model.HostPort] | Sequence[model.HostPort]
) -> bool:
    """Whether a ``wanted`` host port conflicts with one in ``used``."""
    for want in wanted:
        if want.port <= 0:
            continue
        want_ip = want.host_ip or _BIND_ALL
        want_protocol = want.protocol or "TCP"
        for have in used:
            if have.port != want.port or (have.protocol or "TCP") != want_protocol:
                continue
            have_ip = have.host_ip or _BIND_ALL
            if _BIND_ALL in (want_ip, have_ip) or want_ip == have_ip:
                return True
    return False


class NodePorts:
    name: Final = NAME

    def pre_filter(self, cycle: framework.CycleState) -> framework.PreFilterResult:
        return framework.PASS if cycle.pod.host_ports else framework.SKIP

    def filter(self, cycle: framework.CycleState, rows: columns.Rows) -> framework.Filtered:
        table = cycle.table
        wanted = cycle.pod.host_ports
        failed = np.zeros(len(rows), dtype=np.bool_)
        for position in np.flatnonzero(table.has_ports[rows]).tolist():
            failed[position] = conflicts(wanted, table.states[rows[position]].used_ports)
        return framework.rejected_where(failed, REASON_NODE_PORTS)


PLUGIN: Final[framework.FilterPlugin] = NodePorts()
