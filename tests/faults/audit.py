"""Reading kube-apiserver's audit log: who bound pods and who held the Lease when.

hack/cluster.py runs kube-apiserver with an audit policy that logs, at ResponseComplete,
``pods/binding`` creates (Metadata), Lease writes (Request: the body names the holder) and
``schedulingpolicies/status`` writes (Metadata). Every replica in the fault suite has its
own ServiceAccount, so the audit ``user.username`` says which replica made a request.

The rule for "a Binding by a replica that did not hold the Lease" (one clock: the API
server's own timestamps, so no skew between replicas and checker):

    A successful Binding by user X at audit stageTimestamp T is legitimate iff the last
    successful write of the scenario's Lease completed before T was made by X, named X's
    replica as holder (not a release, not another holder), and
    T < that write's stageTimestamp + leaseDurationSeconds.

(The harness names each replica's ServiceAccount after the replica and sets POD_NAME to
it, so the operator's holder identity is ``<account>_<suffix>``.)

The same rule is applied to policy status writes ("only the leader writes status").

A Binding answered 504 (the API server's own timeout) may still have been applied: when
no successful Binding of that pod exists and the pod ended bound, the 504 is taken as
the Binding that bound it, at its stageTimestamp.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_LEASE_S = 15.0


@dataclasses.dataclass(frozen=True)
class Entry:
    """One audit event, reduced to what the checker needs."""

    time: datetime.datetime  # stageTimestamp (ResponseComplete)
    user: str
    verb: str
    resource: str  # "pods/binding", "leases", "schedulingpolicies/status"
    namespace: str
    name: str
    code: int
    holder: str | None  # Lease writes: spec.holderIdentity of the request body
    lease_s: float | None  # Lease writes: spec.leaseDurationSeconds

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


@dataclasses.dataclass(frozen=True)
class Violation:
    """A write by a replica that did not hold the Lease at that moment."""

    entry: Entry
    why: str


def _parse_time(text: str) -> datetime.datetime:
    # RFC 3339 with microseconds and "Z".
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _entry(raw: dict[str, Any]) -> Entry | None:
    ref = raw.get("objectRef") or {}
    if raw.get("stage") != "ResponseComplete" or not ref:
        return None
    resource = str(ref.get("resource", ""))
    if ref.get("subresource"):
        resource += "/" + str(ref["subresource"])
    spec = ((raw.get("requestObject") or {}).get("spec")) or {}
    holder = spec.get("holderIdentity") if resource == "leases" else None
    lease_s = spec.get("leaseDurationSeconds") if resource == "leases" else None
    return Entry(
        time=_parse_time(str(raw["stageTimestamp"])),
        user=str((raw.get("user") or {}).get("username", "")),
        verb=str(raw.get("verb", "")),
        resource=resource,
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        code=int((raw.get("responseStatus") or {}).get("code", 0)),
        holder=None if holder is None else str(holder),
        lease_s=None if lease_s is None else float(lease_s),
    )


def read(directory: Path) -> list[Entry]:
    """Every entry in the audit directory (rotated files included), in time order."""
    entries: list[Entry] = []
    for path in sorted(directory.glob("*.log")):
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    e = _entry(json.loads(line))
                except (ValueError, KeyError):
                    continue  # a line cut by rotation or by a kill -9
                if e is not None:
                    entries.append(e)
    entries.sort(key=lambda e: e.time)
    return entries


def lease_writes(entries: Iterable[Entry], *, namespace: str, name: str) -> list[Entry]:
    return [
        e
        for e in entries
        if e.resource == "leases" and e.namespace == namespace and e.name == name and e.ok
    ]


def non_holder_writes(
    entries: list[Entry],
    *,
    lease_namespace: str,
    lease_name: str,
    resource: str,
    users: frozenset[str],
    namespace: str | None = None,
    bound: frozenset[str] = frozenset(),
) -> list[Violation]:
    """Successful ``resource`` writes by ``users`` that broke the rule in the docstring.

    ``bound``: pods that ended bound, so that a 504 Binding of one is counted as applied.
    """
    leases = lease_writes(entries, namespace=lease_namespace, name=lease_name)
    applied = {e.name for e in entries if e.resource == resource and e.ok}
    out: list[Violation] = []
    for e in entries:
        if e.resource != resource or e.user not in users:
            continue
        maybe = e.code == 504 and e.name in bound and e.name not in applied
        if not e.ok and not maybe:
            continue
        if namespace is not None and e.namespace != namespace:
            continue
        last = _last_before(leases, e.time)
        if last is None:
            out.append(Violation(e, "no Lease write before it"))
        elif last.user != e.user:
            out.append(Violation(e, f"the Lease was last written by {last.user} at {last.time}"))
        elif last.holder == "":
            out.append(Violation(e, f"{e.user} had released the Lease at {last.time}"))
        elif last.holder is not None and not last.holder.startswith(
            e.user.rsplit(":", 1)[-1] + "_"
        ):
            out.append(Violation(e, f"{e.user}'s last Lease write named {last.holder}"))
        else:
            expiry = last.time + datetime.timedelta(seconds=last.lease_s or DEFAULT_LEASE_S)
            if e.time >= expiry:
                out.append(
                    Violation(e, f"its Lease ran out at {expiry} (last renewed {last.time})")
                )
    return out


def _last_before(leases: list[Entry], t: datetime.datetime) -> Entry | None:
    last = None
    for w in leases:
        if w.time >= t:
            break
        last = w
    return last


def count(
    entries: Iterable[Entry], *, resource: str, users: frozenset[str], namespace: str | None = None
) -> dict[str, int]:
    """Successful writes of ``resource`` per user."""
    per: dict[str, int] = {}
    for e in entries:
        mine = namespace is None or e.namespace == namespace
        if e.resource == resource and e.user in users and e.ok and mine:
            per[e.user] = per.get(e.user, 0) + 1
    return per


def since(entries: Iterable[Entry], t: datetime.datetime) -> Iterator[Entry]:
    return (e for e in entries if e.time >= t)
