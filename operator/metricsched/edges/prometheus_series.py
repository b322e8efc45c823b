"""Prometheus result series mapped to Nodes: the values a policy's decisions use.

Each series of an instant vector is matched to a Node by its ``nodeLabel`` value (the
node's name, or one of its addresses with a ``:port`` stripped); values must be finite.
What did not make it is COUNTED, never described: labels of a series that named no node
are data the policy did not match, and its namespace must not read them (up to three of
them are kept for the operator's DEBUG log only).

Pure: no I/O. Raises ``BadResultError`` for a result that is not an instant vector.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from metricsched.core import model


class BadResultError(Exception):
    """The result is not an instant vector of labelled series."""


@dataclasses.dataclass(slots=True)
class MappedSeries:
    """The outcome of ``map_series``: values by node and what did not make it."""

    values: dict[model.NodeName, float]
    series_total: int = 0
    unknown: int = 0
    duplicates: int = 0
    dropped: int = 0
    unknown_valued: int = 0  # unknown series that had the node label (naming no node)
    unknown_examples: list[str] = dataclasses.field(default_factory=list)  # for DEBUG logs
    node_label: str = ""

    def error(self) -> tuple[model.QueryErrorKind, str] | None:
        """EMPTY_RESULT / BAD_RESULT when no known node got a usable value.

        The message holds counts only: labels of series that named no node are data the
        policy did not match, and its namespace must not read them.
        """
        if self.values:
            return None
        if self.dropped:
            return (
                model.QueryErrorKind.BAD_RESULT,
                f"all {self.dropped} series for known nodes had NaN or unparsable values",
            )
        if self.series_total == 0:
            return model.QueryErrorKind.EMPTY_RESULT, "the query returned no series"
        without = self.series_total - self.unknown_valued
        return (
            model.QueryErrorKind.EMPTY_RESULT,
            f"none of the {self.series_total} series names a known node: {without} without"
            f" label {self.node_label!r}, {self.unknown_valued} with a value that is no"
            " node's name or address",
        )


def map_series(
    result: object,
    *,
    node_label: str,
    nodes: Sequence[model.NodeInfo],
) -> MappedSeries:
    """Map an instant-vector result (``data.result``) to finite values by node.

    A series belongs to a node when its ``node_label`` value is the node's name or one of
    its addresses, either as is or with a ``:port`` / ``[ipv6]:port`` suffix removed.
    Several series for one node (an unaggregated query, or a target scraped by name and
    by address) are counted as duplicates and one is kept deterministically: a series
    naming the node exactly beats one matched through an address, then the smallest
    label set in sorted order. Not the max or min: the store does not know the metric's
    goal, and a value that does not depend on Prometheus's result order stays stable
    from one refresh to the next instead of flapping.

    Raises ``BadResultError`` for a result that is not an instant vector.
    """
    if not isinstance(result, list):
        raise BadResultError(
            f"unexpected result of type {type(result).__name__}, expected an instant vector",
        )
    if result and not all(isinstance(item, dict) for item in result):
        raise BadResultError(
            "the query returned a scalar or a string, not an instant vector:"
            " return one series per node, e.g. avg by (node) (...)",
        )
    if any("values" in item and "value" not in item for item in result):
        raise BadResultError(
            "the query returned a range vector (matrix), not an instant vector:"
            " wrap the range selector in a function such as avg_over_time() or rate()",
        )

    by_name: dict[str, model.NodeName] = {n.name: n.name for n in nodes}
    by_address: dict[str, model.NodeName] = {}
    for info in sorted(nodes, key=lambda n: n.name):
        for address in info.addresses:
            by_address.setdefault(address, info.name)

    mapped = MappedSeries(values={}, series_total=len(result), node_label=node_label)
    chosen: dict[model.NodeName, tuple[int, tuple[tuple[str, str], ...]]] = {}
    for item in result:
        labels = item.get("metric")
        if not isinstance(labels, dict):
            raise BadResultError("a result series has no label set ('metric')")
        label_value = labels.get(node_label)
        match = _match_node(label_value, by_name, by_address) if label_value else None
        if match is None:
            mapped.unknown += 1
            if label_value:
                mapped.unknown_valued += 1
                if len(mapped.unknown_examples) < 3:
                    mapped.unknown_examples.append(str(label_value))
            continue
        node, exact = match
        value = _sample_value(item.get("value"))
        if value is None:
            mapped.dropped += 1
            continue
        rank = (0 if exact else 1, tuple(sorted((str(k), str(v)) for k, v in labels.items())))
        if node in chosen:
            mapped.duplicates += 1
            if rank >= chosen[node]:
                continue
        chosen[node] = rank
        mapped.values[node] = value
    return mapped


def _match_node(
    value: object,
    by_name: Mapping[str, model.NodeName],
    by_address: Mapping[str, model.NodeName],
) -> tuple[model.NodeName, bool] | None:
    """The node a label value names, and whether it names it exactly (not via an address)."""
    if not isinstance(value, str):
        return None
    if value in by_name:
        return by_name[value], True
    if value in by_address:
        return by_address[value], False
    host = _strip_port(value)
    if host in by_name:
        return by_name[host], False
    if host in by_address:
        return by_address[host], False
    return None


def _strip_port(value: str) -> str:
    """``host:port`` → ``host``; ``[v6]:port`` and ``[v6]`` → ``v6``; bare IPv6 unchanged."""
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    host, sep, port = value.rpartition(":")
    if sep and host and ":" not in host and port.isdigit():
        return host
    return value


def _sample_value(raw: object) -> float | None:
    """A float from ``[timestamp, "value"]`` (±Inf are values); None for NaN or garbage."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    text = raw[1]
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value
