"""explain on a rebalancing policy: the room its moves hold for replacements, per node
(``status.rebalance.held``, as the leader wrote it), however that status was edited."""

from __future__ import annotations

from metricsched.core import api_formats, explain
from tests.unit.conftest import NOW


def entry(
    node: str, owner: str = "shop/Deployment/web", *, left: float = 40.0
) -> dict[str, object]:
    return {
        "node": node,
        "owner": owner,
        "amount": {"cpu": "800m", "memory": "128Mi"},
        "until": api_formats.rfc3339(NOW + left),
    }


def test_held_room_is_listed_per_node_with_owner_amount_and_time_left():
    text = explain.render_held(
        "shop/web-latency",
        [entry("cool-2", left=10.0), entry("cool-1", "shop/StatefulSet/db"), entry("cool-2")],
        now=NOW,
    )
    assert text == (
        "Room held for replacements of pods rebalancing moved "
        "(status.rebalance.held of shop/web-latency):\n"
        "NODE    FOR                  CPU   MEMORY  AT MOST\n"
        "cool-1  shop/StatefulSet/db  800m  128Mi   40s\n"
        "cool-2  shop/Deployment/web  800m  128Mi   10s\n"
        "cool-2  shop/Deployment/web  800m  128Mi   40s\n"
    )


def test_nothing_held_prints_nothing():
    assert explain.render_held("shop/p", [], now=NOW) is None
    assert explain.render_held("shop/p", None, now=NOW) is None
    assert explain.render_held("shop/p", "not a list", now=NOW) is None


def test_an_edited_status_cannot_break_the_terminal_or_the_table():
    odd = {"node": "cool\x1b[2J", "owner": 7, "amount": "lots", "until": "yesterday"}
    text = explain.render_held(
        "shop/p", [odd, {"owner": "no node"}, "junk", entry("x", left=-5)], now=NOW
    )
    assert text is not None
    lines = text.splitlines()
    assert lines[1].split() == ["NODE", "FOR", "CPU", "MEMORY", "AT", "MOST"]
    assert lines[2].split() == ["cool\\x1b[2J", "7", "-", "-", "-"]
    assert lines[3].split() == ["x", "shop/Deployment/web", "800m", "128Mi", "0s"]
    assert len(lines) == 4


def test_at_most_the_crds_bound_of_rows_is_printed():
    many = [entry(f"n-{i:03d}") for i in range(50)]
    text = explain.render_held("shop/p", many, now=NOW)
    assert text is not None and len(text.splitlines()) == 2 + explain.MAX_HELD_ROWS
