"""What kopf in a child process would cost per pod event: the forwarding alone.

    python -m bench.child_ipc [--events 20000]

A prototype of the hand-over, not of the operator: a forked child frames each event as a
4-byte length, ``b"TYPE uid rv\\n"`` and the raw body's JSON (orjson; what a child's
``kopf.on.event`` handler has in ``event["object"]``) and writes the frames, 16 at a time,
to a socketpair; the parent reads them with an ``asyncio.Protocol`` that splits frames in
``data_received``, reads the header, and decodes the body of an ADDED (a new pod: what the
parent would parse) but not of a DELETED (the uid is enough). Half the events are each.
The pods are ``bench/kopf_cost.py``'s Deployment-like pod with the metadata the API
server adds. Printed: the parent's CPU per event received, and the child's CPU per event
to frame and send (``getrusage`` of each process). docs/performance.md compares them
with kopf's own cost per event (``python -m bench kopf``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import struct
import sys
from typing import Any

import orjson

from bench import kopf_cost

_FRAME = struct.Struct("!I")
_BATCH = 16


def _body(i: int) -> dict[str, Any]:
    body = kopf_cost._pod(f"kc-{i:05d}", i)
    body["metadata"].update(
        {
            "namespace": "shop",
            "uid": f"0f1e2d3c-4b5a-6978-{i:04x}-8796a5b4c3d2",
            "resourceVersion": str(100_000 + i),
            "creationTimestamp": "2026-11-29T13:00:00Z",
            "generateName": "web-7d4b9c8f5-",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d4b9c8f5",
                    "uid": "aa-bb",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
    )
    body["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return body


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(sock: socket.socket, events: int) -> None:
    bodies = [_body(i) for i in range(200)]
    started = _cpu_s()
    out: list[bytes] = []
    size = 0
    for i in range(events):
        body = bodies[i % len(bodies)]
        meta = body["metadata"]
        kind = b"ADDED" if i % 2 == 0 else b"DELETED"
        head = b"%s %s %s\n" % (kind, meta["uid"].encode(), meta["resourceVersion"].encode())
        payload = head + orjson.dumps(body)
        size = len(payload)
        out.append(_FRAME.pack(len(payload)) + payload)
        if len(out) >= _BATCH:
            sock.sendall(b"".join(out))
            out.clear()
    if out:
        sock.sendall(b"".join(out))
    cost = (_cpu_s() - started) / events * 1e6
    sock.sendall(_FRAME.pack(0))
    print(f"child: {cost:.1f} µs CPU per event to frame and send ({size} B frames)", flush=True)


class _Reader(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[int]) -> None:
        self.buffer = bytearray()
        self.done = done
        self.events = 0
        self.pods: dict[bytes, Any] = {}

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        at = 0
        while len(buffer) - at >= _FRAME.size:
            (size,) = _FRAME.unpack_from(buffer, at)
            if size == 0:
                self.done.set_result(self.events)
                return
            if len(buffer) - at - _FRAME.size < size:
                break
            frame = bytes(buffer[at + _FRAME.size : at + _FRAME.size + size])
            at += _FRAME.size + size
            end = frame.index(b"\n")
            kind, uid, _rv = frame[:end].split(b" ")
            if kind == b"ADDED":
                self.pods[uid] = orjson.loads(memoryview(frame)[end + 1 :])
            else:
                self.pods.pop(uid, None)
            self.events += 1
        del buffer[:at]


async def _parent(sock: socket.socket) -> float:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    started = _cpu_s()
    await loop.connect_accepted_socket(lambda: _Reader(done), sock)
    events = await done
    return (_cpu_s() - started) / events * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child_ipc")
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    parent_end, child_end = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent_end.close()
        _child(child_end, args.events)
        os._exit(0)
    child_end.close()
    cost = asyncio.run(_parent(parent_end))
    os.waitpid(pid, 0)
    print(f"parent: {cost:.1f} µs CPU per event received ({args.events} events, half decoded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
