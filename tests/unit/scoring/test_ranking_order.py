"""The ranking's order after the winner: the first index of the best is the first name.

``scoring.ranking`` once walked every tied node's name (``min(best, key=names[...])``) to
order the runner-up; the cycle's nodes are rows of the node table, in name order, so the
first index of those tied is the same node. These tests hold the old rule as the
reference and check the ranking against it on random scores, bursts and node names.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from metricsched.core import scoring


def _reference_ranking(
    totals: list[float], bursts: list[int], names: list[str], seed: int, count: int
) -> list[int]:
    """The ranking as it was: the winner drawn among the tied, then min by name."""

    def best(among: list[int]) -> list[int]:
        top = max(totals[i] for i in among)
        highest = [i for i in among if totals[i] == top]
        fewest = min(bursts[i] for i in highest)
        return [i for i in highest if bursts[i] == fewest]

    everyone = list(range(len(totals)))
    if not everyone:
        return []
    tied = best(everyone)
    winner = tied[0] if len(tied) == 1 else tied[random.Random(seed).randrange(len(tied))]
    chosen = [winner]
    while len(chosen) < count and len(chosen) < len(totals):
        following = min(best([i for i in everyone if i not in chosen]), key=lambda i: names[i])
        chosen.append(following)
    return chosen


@settings(max_examples=300)
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from([0.0, 50.0, 70.0, 70.5, 100.0]), st.integers(0, 3)),
        max_size=40,
    ),
    names=st.sets(st.text("abcdefghij-0123456789", min_size=1, max_size=8), min_size=40),
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 4),
)
def test_ranking_of_nodes_in_name_order_equals_the_name_walk(nodes, names, seed, count):
    ordered = sorted(names)[: len(nodes)]  # rows of a node table: in name order
    totals = [total for total, _ in nodes]
    bursts = [burst for _, burst in nodes]
    found = scoring.ranking(totals=totals, burst_counts=bursts, seed=seed, count=count)
    assert found == _reference_ranking(totals, bursts, ordered, seed, count)
    assert all(isinstance(index, int) for index in found)
