"""RSS after the informers' first LISTs of 5,000 nodes and 10,000 bound pods (realistic
bodies, bench/memory_cost.py's), served in process, as the operator starts them
(``ClusterState``'s reflectors, each kind's LIST at once), then the pending pods' and
policies' LISTs (``initial_sync``). One fresh process per run:

    .venv/bin/python -m bench.list_memory --page 500
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

import kubernetes

from bench import memory_cost
from metricsched import config as config_mod
from metricsched.runtime import operator as operator_mod


async def _sync(op: operator_mod.Operator) -> None:
    await asyncio.gather(*(r.list_once() for r in op.cluster_state.reflectors))
    await op.initial_sync()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    cluster = memory_cost.Cluster(nodes=args.nodes, pods=args.pods, pending=0, shape="realistic")
    config = config_mod.from_args(argparse.Namespace(list_page_size=args.page), env={})
    op = operator_mod.Operator(
        config, kubernetes.client.ApiClient(kubernetes.client.Configuration())
    )
    fake = memory_cost.FakeHttp(cluster)
    op.reads = fake  # type: ignore[assignment]
    for reflector in op.cluster_state.reflectors:
        reflector._api = fake  # type: ignore[assignment]
    before = memory_cost.proc_status()
    started = time.process_time()
    asyncio.run(_sync(op))
    cpu = time.process_time() - started
    gc.collect()
    after = memory_cost.proc_status()
    print(
        f"page {args.page}: RSS {before['VmRSS']} -> {after['VmRSS']} MiB "
        f"(+{after['VmRSS'] - before['VmRSS']:.1f}), peak {after['VmHWM']} MiB, "
        f"CPU {cpu:.1f} s, {len(op.cache.nodes())} nodes"
    )


if __name__ == "__main__":
    main()
