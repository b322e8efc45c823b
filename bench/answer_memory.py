"""Peak memory of one Prometheus query whose answer holds N series.

    python -m bench.answer_memory 500000            # the operator's default caps
    python -m bench.answer_memory 500000 --uncapped # caps lifted: the whole answer parsed

A loopback server in this process streams a Prometheus-shaped instant vector (chunked, so
the server never holds the body) to ``edges.prometheus.PrometheusClient``; the script
prints the answer's size, the query's outcome and the growth of the peak RSS. Run each
case in a fresh process: the peak RSS only grows.
"""

from __future__ import annotations

import argparse
import http.server
import resource
import threading
from collections.abc import Iterator

from metricsched.core import model
from metricsched.edges import prometheus, prometheus_http

SERIES = (
    '{"metric":{"__name__":"x","instance":"10.%d.%d.%d:9100","job":"node","node":"node-%d"},'
    '"value":[1.7e9,"0.5"]}'
)


def answer(count: int) -> Iterator[bytes]:
    yield b'{"status":"success","data":{"resultType":"vector","result":['
    for start in range(0, count, 1000):
        end = min(count, start + 1000)
        block = ",".join(
            SERIES % (i >> 16 & 255, i >> 8 & 255, i & 255, i) for i in range(start, end)
        )
        yield block.encode() + (b"," if end < count else b"")
    yield b"]}}"


def serve(count: int) -> str:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for chunk in answer(count):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client stopped reading at its cap
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("series", type=int)
    parser.add_argument("--uncapped", action="store_true")
    args = parser.parse_args()
    limits = prometheus_http.Limits()
    if args.uncapped:
        limits = prometheus_http.Limits(max_bytes=1 << 40, max_series=10**9)
    size = sum(len(chunk) for chunk in answer(args.series))
    source = prometheus.PrometheusClient(
        prometheus.PrometheusConfig(url=serve(args.series), timeout_s=60, retries=0, limits=limits)
    )
    nodes = [
        model.NodeInfo(
            name=model.NodeName(f"node-{i}"),
            labels={},
            annotations={},
            taints=(),
            unschedulable=False,
            allocatable=model.Resources(milli_cpu=1000, memory=1 << 30, pods=110),
            addresses=(),
        )
        for i in range(5)
    ]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = source.query_nodes_report("x", node_label="node", nodes=nodes, now=0.0, namespace="a")
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    caps = (
        "uncapped"
        if args.uncapped
        else f"caps {limits.max_series} series, {limits.max_bytes >> 20} MiB"
    )
    print(
        f"{args.series} series, {size / 2**20:.1f} MiB answer, {caps}:"
        f" {report.series.error or 'read'}, peak RSS +{grown:.0f} MiB"
    )


if __name__ == "__main__":
    main()
