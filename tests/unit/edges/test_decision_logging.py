"""Logs are JSON lines or text; every decision is one INFO line with its fields."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from metricsched.core import model
from metricsched.edges import logs

DECISION = model.Decision(
    pod=model.PodKey("shop/web-7d4"),
    policy=model.PolicyKey("shop/web-latency"),
    outcome=model.Outcome.BIND,
    node=model.NodeName("node-3"),
    fallback_reason="",
    verdicts=(
        model.NodeVerdict(model.NodeName("node-1"), True, "", (), 0, 88.0),
        model.NodeVerdict(model.NodeName("node-3"), True, "", (), 0, 92.456),
    ),
    message="Successfully assigned shop/web-7d4 to node-3",
)


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Root logging as ``configure`` leaves it, with the handler's stream captured."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    yield stream
    root.handlers[:], _ = saved
    root.setLevel(saved[1])


def redirect(stream: io.StringIO) -> None:
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(
            handler, "_metricsched_handler", False
        ):
            handler.setStream(stream)


def test_a_decision_is_one_json_line_with_its_fields(captured: io.StringIO) -> None:
    logs.configure("json", "INFO")
    redirect(captured)
    logs.log_decision(logging.getLogger("metricsched.decisions"), DECISION, duration_ms=4.2)
    (line,) = captured.getvalue().splitlines()
    record = json.loads(line)
    assert record["level"] == "INFO"
    assert record["logger"] == "metricsched.decisions"
    assert "time" in record
    assert {
        k: record[k]
        for k in ("pod", "policy", "outcome", "node", "score", "fallback", "duration_ms")
    } == {
        "pod": "shop/web-7d4",
        "policy": "shop/web-latency",
        "outcome": "Bind",
        "node": "node-3",
        "score": 92.46,
        "fallback": None,
        "duration_ms": 4.2,
    }


def test_a_fallback_decision_in_text_format_keeps_its_fields_readable(
    captured: io.StringIO,
) -> None:
    logs.configure("text", logging.INFO)
    redirect(captured)
    waiting = model.Decision(
        pod=model.PodKey("shop/web-1"),
        policy=None,
        outcome=model.Outcome.WAIT,
        node=None,
        fallback_reason="Prometheus unreachable",
        verdicts=(),
        message="0/3 nodes are available",
    )
    logs.log_decision(logging.getLogger("metricsched.decisions"), waiting, duration_ms=1.0)
    line = captured.getvalue()
    assert "INFO" in line
    assert (
        'pod=shop/web-1 policy=default outcome=Wait node= score= fallback="Prometheus unreachable"'
        in line
    )


def test_configuring_twice_replaces_our_handler_only(captured: io.StringIO) -> None:
    root = logging.getLogger()
    others = [h for h in root.handlers if not getattr(h, "_metricsched_handler", False)]
    logs.configure("json", "INFO")
    logs.configure("text", "DEBUG")
    ours = [h for h in root.handlers if getattr(h, "_metricsched_handler", False)]
    assert len(ours) == 1
    assert [h for h in root.handlers if h not in ours] == others
    assert root.level == logging.DEBUG


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="json"):
        logs.configure("yaml", "INFO")  # type: ignore[arg-type]
