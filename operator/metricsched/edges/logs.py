"""Structured logging: JSON lines (python-json-logger) or plain text, one line per decision.

``configure`` installs one handler on the root logger (idempotent: calling it again
replaces the handler it installed, not others). ``log_decision`` writes the INFO line
every scheduling decision gets; its fields are both in the message (readable in text
format) and top-level JSON keys (queryable in a log store).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Literal

import pythonjsonlogger.json

from metricsched.core import model

_HANDLER_MARK = "_metricsched_handler"
_TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure(fmt: Literal["json", "text"] = "json", level: int | str = logging.INFO) -> None:
    """Send all logs to stderr as JSON lines or text, at ``level`` and above."""
    formatter: logging.Formatter
    if fmt == "json":
        formatter = pythonjsonlogger.json.JsonFormatter(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            # kopf attaches object references to its records: render them, never fail.
            json_default=str,
        )
    elif fmt == "text":
        formatter = logging.Formatter(_TEXT_FORMAT)
    else:
        raise ValueError(f"log format must be 'json' or 'text', not {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # kopf logs every handler call at INFO ("Handler ... succeeded"): one line per watch
    # event. Our own decision lines are the per-pod log; kopf's warnings still show.
    # The same for aiohttp's access log of kopf's webhook server: one line per pod created
    # in an opted-in namespace (the webhook counts them in /metrics instead).
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("kopf").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def log_decision(
    logger: logging.Logger,
    decision: model.Decision,
    *,
    duration_ms: float,
) -> None:
    """One INFO line for one decision: pod, policy, outcome, node, score, fallback, duration."""
    if not logger.isEnabledFor(logging.INFO):
        return
    score = next(
        (
            v.score
            for v in decision.verdicts
            if decision.node is not None and v.node == decision.node
        ),
        None,
    )
    fields = {
        "pod": decision.pod,
        "policy": decision.policy or "default",
        "outcome": decision.outcome.value,
        "node": decision.node,
        "score": None if score is None else round(score, 2),
        "fallback": decision.fallback_reason or None,
        "duration_ms": round(duration_ms, 3),
    }
    text = " ".join(f"{k}={_logfmt(v)}" for k, v in fields.items())
    logger.info("decision %s", text, extra=fields)


def _logfmt(value: object) -> str:
    if value is None:
        return ""
    text = str(value)
    return json.dumps(text) if (" " in text or '"' in text or "=" in text) else text
