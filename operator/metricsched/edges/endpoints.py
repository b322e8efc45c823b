"""Which of /healthz, /readyz and /metrics each of the operator's ports serves.

``serve`` puts the three paths on one or two ports, each an ``http_server.Server``: its
own loop on its own thread answers the probes at once, so the scheduling loop's stalls
show in /healthz only through the heartbeat (``probes.HealthState``), and no client of the
port (idle connections, slow ones, a flood of /metrics) can make a probe wait or fail;
/metrics (``observe.Metrics``' exposition) runs in that server's small bounded pool and is
shed first. With ``secure`` (see ``metrics_auth``), /metrics is served over HTTPS to
authenticated, authorised callers only, and the probes stay plain HTTP on the health port.
"""

from __future__ import annotations

import collections
import ssl
from collections.abc import Callable

import prometheus_client

from metricsched.edges import http_server, metrics_auth, observe, probes


def _probe(check: Callable[[], tuple[bool, str]]) -> http_server.Route:
    def route(_request: http_server.Request) -> http_server.Response:
        ok, reason = check()
        return http_server.text(200 if ok else 503, reason)

    return http_server.Route(route)  # answered on the server's loop: it never waits


def _guarded(route: http_server.Route, guard: metrics_auth.Guard) -> http_server.Route:
    """``route`` behind ``guard``; blocking, as the guard may ask the API server."""

    def guarded(request: http_server.Request) -> http_server.Response:
        denial = guard(request.headers.get("authorization"), request.path)
        if denial is not None:
            return http_server.text(denial.status, denial.reason)
        return route.handle(request)

    return http_server.Route(guarded, blocking=True)


class Closer:
    """The running endpoint servers: their bound ports (useful with port 0) and a stop."""

    def __init__(
        self, *, metrics_port: int, health_port: int, servers: list[http_server.Server]
    ) -> None:
        self.metrics_port = metrics_port
        self.health_port = health_port
        self._servers = servers

    def dropped(self) -> dict[http_server.DropReason, int]:
        """Connections closed unanswered and requests shed, all servers together, by reason."""
        total: collections.Counter[http_server.DropReason] = collections.Counter()
        for server in self._servers:
            total.update(server.dropped)
        return {reason: n for reason, n in total.items() if n}

    def close(self) -> None:
        """Stop serving and release the ports; idempotent."""
        for server in self._servers:
            server.close()
        self._servers.clear()


def serve(
    *,
    host: str,
    metrics_port: int,
    health_port: int,
    health: probes.HealthState,
    metrics: observe.Metrics,
    secure: metrics_auth.SecureServing | None = None,
) -> Closer:
    """Serve /metrics on ``metrics_port`` and /healthz, /readyz on ``health_port``.

    Equal ports (0 included) share one server answering all three paths, unless ``secure``:
    then /metrics is HTTPS behind its guard and the probes need a port of their own. Port 0
    binds an ephemeral port; the ``Closer`` reports the ports actually bound. The probes
    are answered on each server's own loop; /metrics (the exposition, the reviews) in its
    bounded pool (``http_server``).
    """

    def metrics_route(_request: http_server.Request) -> http_server.Response:
        body = metrics.exposition()
        return http_server.Response(200, prometheus_client.CONTENT_TYPE_LATEST, body)

    metrics_routes = {"/metrics": http_server.Route(metrics_route, blocking=True)}
    health_routes = {"/healthz": _probe(health.liveness), "/readyz": _probe(health.readiness)}
    plan: list[tuple[int, dict[str, http_server.Route], Callable[[], ssl.SSLContext] | None]]
    if secure is not None:
        if metrics_port == health_port and metrics_port != 0:
            raise ValueError("secure /metrics needs a health port of its own for the probes")
        guarded = {path: _guarded(route, secure.guard) for path, route in metrics_routes.items()}
        certificates = secure.certificates
        plan = [
            (metrics_port, guarded, lambda: certificates.context),  # the renewed one, if any
            (health_port, health_routes, None),
        ]
    elif metrics_port == health_port:
        plan = [(metrics_port, {**metrics_routes, **health_routes}, None)]
    else:
        plan = [(metrics_port, metrics_routes, None), (health_port, health_routes, None)]

    servers: list[http_server.Server] = []
    try:
        for port, routes, tls in plan:
            servers.append(
                http_server.Server(
                    host=host, port=port, routes=routes, tls=tls, on_drop=metrics.count_http_drop
                )
            )
        for server in servers:
            metrics.start_http_drops(server.port)
            server.start()
    except BaseException:
        for server in servers:
            server.close()
        raise
    return Closer(metrics_port=servers[0].port, health_port=servers[-1].port, servers=servers)
