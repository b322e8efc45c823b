"""The kubernetes client at the edge, for its credentials only.

``load_api_client`` reads them as kubectl does (in-cluster, else the kubeconfig) into the
kubernetes client's ``Configuration``, the one source of truth: kopf takes them from it
(``connection_info``), and so does ``kube_http.AsyncApi``, which makes every API call the
operator and its command line make (the informers, the Lease, Bindings, Events, pod
status, Evictions, the policy status, the auth reviews of /metrics, explain's reads).
``RefreshAtMost`` keeps the loaders' credential refresh hook cheap, and ``path`` builds an
API path. No request is sent from here: the generated API classes are never imported
(``CoreV1Api`` and its siblings alone cost ≈ 26 MiB of RSS and ≈ 1 s of CPU at start-up).
"""

from __future__ import annotations

import math
import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import kopf
import kubernetes


class KubeconfigError(RuntimeError):
    """No usable cluster credentials: said in one line, not a traceback."""


# What ``quote(s, safe="")`` leaves as is: a segment of only these (every valid object
# name) is used without quoting, a tenth of the cost on the write path.
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~-]*")


def path(prefix: str, *segments: str) -> str:
    """An API path: ``prefix`` as is, then each segment quoted (a name, or a word such as
    ``pods``): ``path("api/v1/namespaces", namespace, "pods", name, "binding")``."""
    return "/".join(
        (
            "",
            prefix,
            *(s if _UNQUOTED.fullmatch(s) else urllib.parse.quote(s, safe="") for s in segments),
        )
    )


def connection_info(api_client: Any) -> kopf.ConnectionInfo:
    """kopf's credentials, taken from the kubernetes client's (one source of truth)."""
    cfg = api_client.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
        "authorization"
    )
    scheme, token = None, None
    if header:
        parts = header.split(" ", 1)
        scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        username=cfg.username or None,
        password=cfg.password or None,
    )


def load_api_client(
    kubeconfig: str | None, *, pool_size: int = 32, context: str | None = None
) -> Any:
    """The kubernetes ApiClient: in-cluster, else the kubeconfig (explicit or default).

    ``context`` picks a kubeconfig context (kubectl's ``--context``); with it, or with
    ``kubeconfig``, the in-cluster config is not tried.
    """
    try:
        return _load_api_client(kubeconfig, pool_size=pool_size, context=context)
    except (kubernetes.config.ConfigException, OSError, ValueError, TypeError) as e:
        where = kubeconfig or "in-cluster config or ~/.kube/config"
        raise KubeconfigError(f"cannot load cluster credentials from {where}: {e}") from e


def _load_api_client(kubeconfig: str | None, *, pool_size: int, context: str | None) -> Any:
    cfg = kubernetes.client.Configuration()
    if kubeconfig or context:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig or None, context=context, client_configuration=cfg
        )
    else:
        try:
            kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=cfg
            )
    # urllib3 keeps this many connections per host, for the tools that still send through
    # the kubernetes client from threads (hack/kube_sync.py); the operator sends nothing
    # through it.
    cfg.connection_pool_maxsize = pool_size
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook = RefreshAtMost(cfg.refresh_api_key_hook, REFRESH_EVERY_S)
    return kubernetes.client.ApiClient(cfg)


# How often the credentials' refresh hook runs at most (see ``RefreshAtMost``).
REFRESH_EVERY_S = 1.0


class RefreshAtMost:
    """The kubernetes client's credential refresh hook, run at most once per ``every_s``.

    The kubeconfig and in-cluster loaders install a hook that the client calls before
    every request; besides re-reading an expired token it sets the host, TLS files and
    proxy on the configuration again (each ``Configuration.host`` set reads the proxy
    environment): ≈ 50 µs per request, two requests per pod. Tokens still refresh on the
    loaders' own schedule (an expiry a minute ahead for projected service-account tokens),
    at most ``every_s`` later."""

    def __init__(
        self,
        hook: Callable[[Any], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hook = hook
        self._every = every_s
        self._clock = clock
        self._last = -math.inf

    def __call__(self, configuration: Any) -> None:
        now = self._clock()
        if now - self._last >= self._every:
            self.refresh_now(configuration)

    def refresh_now(self, configuration: Any) -> None:
        """Run the hook now, whenever it last ran (the API answered 401)."""
        self._hook(configuration)
        self._last = self._clock()
