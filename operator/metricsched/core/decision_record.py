"""The decision kept on the pod: the ``metricsched.io/decision`` annotation.

Every Binding metricsched sends carries this annotation; kube-apiserver copies a
Binding's annotations onto the pod it binds, so the record costs no extra write. It is
compact JSON of at most ``MAX_BYTES`` bytes::

    {"v":1,"policy":"shop/web-latency","node":"node-3","score":92.5,
     "metrics":{"latency":0.12,"cpu":0.35},
     "runnerUp":{"node":"node-5","score":88,"metrics":{"latency":0.2,"cpu":0.3}},
     "fallback":null,"time":"2026-11-23T05:00:00Z"}

``policy`` is null for the operator's default policy; ``fallback`` is null when the
policy's metrics decided, else ``{"strategy": ..., "reason": ...}``; a metric value is
null when the node had no fresh value. When kube-scheduler's scores were blended into a
placement's score (spec.kubeScores), the placement also has ``"kube": {"TaintToleration":
100, ...}``, each plugin's 0..100 score (absent otherwise); when a metric's estimate
added to its sample (core.estimate), ``"estimates": {"cpu": 0.09}`` (absent otherwise); when
a Measured estimate counted the placed pod, ``"basis": {"cpu": "web's measured 0.31 cores
(p90 of 4 pods)"}``, what it rested on (left out first when the record would be too long).
Values keep 4 significant digits, scores one decimal. When the record would exceed
``MAX_BYTES`` (long names, ten metrics), the fallback reason is cut, then the kube scores
and estimates, the runner-up's metric values and then the winner's are left out, in
that order.

``encode`` builds the text from a ``model.Decision``; ``decode`` reads it back for
``metricsched explain``. No I/O here: no clients, no clocks (the time is an argument).

Whoever may edit the pod may rewrite the annotation, and every bound pod of the cluster
is read (``policy_of``), so nothing in it is trusted: ``policy_of`` (every pod) does not decode
text longer than ``MAX_READ_CHARS``, and JSON nested past the decoder's depth is "not ours", never a
``RecursionError`` (one pod's annotation must not end the informer that reads every
pod); every text ``decode`` returns is printable (control and format characters, terminal escapes
included, as ``\x1b``-style escapes), each cut to ``MAX_TEXT`` characters, at most
``MAX_ENTRIES`` values per placement, and numbers that are not finite floats are missing.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections.abc import Mapping
from typing import Any, Final

import orjson

from metricsched.core import api_formats, model

ANNOTATION: Final = "metricsched.io/decision"
MAX_BYTES: Final = 1024
MAX_READ_CHARS: Final = 4 * MAX_BYTES  # ``policy_of`` does not decode longer text: not ours
VERSION: Final = 1
MAX_TEXT: Final = 256  # characters of any text read back (a node name is at most 253)
MAX_ENTRIES: Final = 32  # metric values, kube scores or estimates read back per placement
MAX_REASON_CHARS: Final = 200
DEFAULT_POLICY_REASON: Final = "no SchedulingPolicy selects the pod (default policy)"


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    node: str
    score: float
    metrics: Mapping[str, float | None]  # {} when left out for size or decided by fallback
    kube: Mapping[str, float] = dataclasses.field(default_factory=dict)  # plugin -> 0..100
    # metric -> what its estimate added to the sample (core.estimate); nonzero ones only
    estimates: Mapping[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class DecisionRecord:
    policy: str | None  # None: the operator's default policy
    winner: Placement
    runner_up: Placement | None
    fallback_strategy: str  # "" when the policy's metrics decided
    fallback_reason: str
    time: float  # unix seconds
    # metric -> what the placed pod's Measured estimate rested on ("web's measured ...")
    basis: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _value(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


def _score(score: float) -> float:
    rounded = round(score, 1)
    return int(rounded) if rounded.is_integer() else rounded


def _placement(verdict: model.NodeVerdict) -> Placement:
    return Placement(
        node=verdict.node,
        score=_score(verdict.score),
        metrics={m.metric: _value(m.value) for m in verdict.metrics},
        kube={term.plugin: _score(term.score) for term in verdict.kube},
        estimates={
            m.metric: found
            for m in verdict.metrics
            if m.estimate and (found := _value(m.estimate)) is not None
        },
    )


def record_of(
    decision: model.Decision,
    *,
    fallback_strategy: model.FallbackStrategy,
    now: float,
) -> DecisionRecord | None:
    """The record of a decision to bind (None for any other outcome).

    ``fallback_strategy`` is the strategy of the decision's policy (the default policy's
    when ``decision.policy`` is None); it is recorded only when it decided.
    """
    if decision.outcome is not model.Outcome.BIND or decision.node is None:
        return None
    winner = next((v for v in decision.verdicts if v.node == decision.node), None)
    others = [v for v in decision.verdicts if v.feasible and v.node != decision.node]
    runner = max(others, key=lambda v: (v.score, -v.burst_count), default=None)
    fallback = bool(decision.fallback_reason) or decision.policy is None
    reason = decision.fallback_reason or (DEFAULT_POLICY_REASON if fallback else "")
    return DecisionRecord(
        policy=decision.policy,
        winner=_placement(winner)
        if winner is not None
        else Placement(node=decision.node, score=0.0, metrics={}),
        runner_up=_placement(runner) if runner is not None else None,
        fallback_strategy=str(fallback_strategy) if fallback else "",
        fallback_reason=reason,
        time=now,
        basis=dict(decision.estimate_basis),
    )


def _as_json(record: DecisionRecord) -> dict[str, Any]:
    def place(p: Placement) -> dict[str, Any]:
        found = {"node": p.node, "score": p.score, "metrics": dict(p.metrics)}
        if p.kube:
            found["kube"] = dict(p.kube)
        if p.estimates:
            found["estimates"] = dict(p.estimates)
        return found

    return {
        "v": VERSION,
        "policy": record.policy,
        **place(record.winner),
        "runnerUp": place(record.runner_up) if record.runner_up is not None else None,
        "fallback": (
            {"strategy": record.fallback_strategy, "reason": record.fallback_reason}
            if record.fallback_strategy
            else None
        ),
        "time": api_formats.rfc3339(record.time),
        **({"basis": dict(record.basis)} if record.basis else {}),
    }


def _dump(body: Mapping[str, Any]) -> str:
    # orjson: compact UTF-8 (as ``json.dumps(separators=(",", ":"), ensure_ascii=False)``)
    # in ≈ a fifth of the time, once per Binding. Non-finite values never reach it
    # (``_value`` makes them null).
    return orjson.dumps(body).decode()


def encode(record: DecisionRecord) -> str:
    """The annotation's text: compact JSON of at most ``MAX_BYTES`` UTF-8 bytes."""
    body = _as_json(record)
    if body["fallback"] is not None and len(body["fallback"]["reason"]) > MAX_REASON_CHARS:
        body["fallback"]["reason"] = body["fallback"]["reason"][: MAX_REASON_CHARS - 3] + "..."
    text = _dump(body)
    if len(text.encode()) > MAX_BYTES and "basis" in body:
        body.pop("basis")
        text = _dump(body)
    if len(text.encode()) > MAX_BYTES:
        for placement in (body, body["runnerUp"]):
            if placement is not None:
                placement.pop("kube", None)
                placement.pop("estimates", None)
        text = _dump(body)
    if len(text.encode()) > MAX_BYTES and body["runnerUp"] is not None:
        body["runnerUp"]["metrics"] = {}
        text = _dump(body)
    if len(text.encode()) > MAX_BYTES:
        body["metrics"] = {}
        text = _dump(body)
    if len(text.encode()) > MAX_BYTES and body["fallback"] is not None:
        body["fallback"]["reason"] = ""
        text = _dump(body)
    return text


def annotation(
    decision: model.Decision, *, fallback_strategy: model.FallbackStrategy, now: float
) -> str:
    """The annotation for a decision to bind; "" for any other outcome."""
    record = record_of(decision, fallback_strategy=fallback_strategy, now=now)
    return encode(record) if record is not None else ""


def _metrics(raw: object) -> dict[str, float | None]:
    if not isinstance(raw, dict):
        return {}
    return {printable(k): _number(v) for k, v in list(raw.items())[:MAX_ENTRIES]}


def _number(value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:  # a JSON integer beyond any float
        return None


def _placement_from(raw: Mapping[str, Any]) -> Placement:
    node, score = raw.get("node"), raw.get("score")
    if not isinstance(node, str) or not node:
        raise ValueError("no node")
    if not isinstance(score, int | float) or isinstance(score, bool):
        raise ValueError("no score")
    kube = raw.get("kube")
    estimates = {k: v for k, v in _metrics(raw.get("estimates")).items() if v is not None}
    score_value = _number(score)
    if score_value is None:
        raise ValueError("no score")
    return Placement(
        node=printable(node),
        score=score_value,
        metrics=_metrics(raw.get("metrics")),
        kube={k: v for k, v in _metrics(kube).items() if v is not None},
        estimates=estimates,
    )


def policy_of(text: str) -> str:
    """The policy a record names ("namespace/name"); "" for the default policy or for
    text that is not one of our records (read for every bound pod: no full decode)."""
    try:
        body = _load(text, limit=MAX_READ_CHARS)
    except ValueError:
        return ""
    if not isinstance(body, dict) or body.get("v") != VERSION:
        return ""
    policy = body.get("policy")
    return policy if isinstance(policy, str) else ""


def _load(text: str, *, limit: int | None = None) -> object:
    """``text`` as JSON: ``ValueError`` for text longer than ``limit``, for text that is
    not JSON and for JSON nested deeper than the decoder recurses."""
    if limit is not None and len(text) > limit:
        raise ValueError(f"longer than {limit} characters: not a decision record")
    try:
        return json.loads(text)
    except RecursionError as e:
        raise ValueError("nested too deeply: not a decision record") from e
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from e


def decode(text: str) -> DecisionRecord:
    """Read an annotation back; raises ``ValueError`` when it is not one of ours."""
    body = _load(text)
    if not isinstance(body, dict) or body.get("v") != VERSION:
        raise ValueError(f"not a version {VERSION} decision record")
    runner = body.get("runnerUp")
    fallback = body.get("fallback")
    policy = body.get("policy")
    try:
        moment = datetime.datetime.fromisoformat(str(body.get("time")))
    except ValueError as e:
        raise ValueError(f"bad time: {e}") from e
    return DecisionRecord(
        policy=printable(policy) if isinstance(policy, str) else None,
        winner=_placement_from(body),
        runner_up=_placement_from(runner) if isinstance(runner, dict) else None,
        fallback_strategy=(
            printable(fallback.get("strategy", "")) if isinstance(fallback, dict) else ""
        ),
        fallback_reason=(
            printable(fallback.get("reason", ""), limit=4 * MAX_TEXT)
            if isinstance(fallback, dict)
            else ""
        ),
        time=moment.timestamp(),
        basis=_texts(body.get("basis")),
    )


def _texts(raw: object) -> dict[str, str]:
    """A mapping of texts read back: keys and values printable and bounded."""
    if not isinstance(raw, dict):
        return {}
    return {
        printable(k): printable(v) for k, v in list(raw.items())[:MAX_ENTRIES] if isinstance(v, str)
    }


def printable(value: object, *, limit: int = MAX_TEXT) -> str:
    """``value`` as text safe to print on a terminal: every character that is not
    printable (control, format, line and paragraph separators) escaped, cut to ``limit``
    characters (with ``...``)."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        for c in text
    )
