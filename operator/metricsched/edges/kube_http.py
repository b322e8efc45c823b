"""The Kubernetes API on the event loop: aiohttp with the kubernetes client's credentials.

``AsyncApi`` sends requests and reads watch streams without a thread hop. It takes
everything from the kubernetes client's ``Configuration`` (one source of truth, as
``kube.connection_info`` does for kopf): the host, the CA, client certificates, and the
bearer token with its refresh hook (run before each request; ``kube.RefreshAtMost`` keeps
that cheap). JSON is decoded with orjson.

Writers (the Binding, Events, the PodScheduled condition, Evictions) send through
``request``: a per-request timeout (connect and total, ``timeout``), a ``gate`` read right
before each send (the leader's fence: ``wire.fence_gate``), and a 401 answered by running
the refresh hook at once (past ``RefreshAtMost``'s throttle) and sending again, once: a
token that expired within the throttle's second is not a failed write. A 401 was never
processed, so sending again is safe even for a Binding. aiohttp itself sends a request
again on a pooled connection found closed only for GET and PUT, never a POST or PATCH: a
Binding whose connection breaks is an unknown outcome for the caller to read back.

An answer is read to its end before its connection goes back to the pool (``Answer``
holds the bytes), so a lost or half-read answer never poisons the next request.

A write costs the loop little besides aiohttp's own work: its body may come as bytes
(the Binding's is serialised once, ``binder.body``), its headers are built once per
credential and content type, a path ``kube.path`` quoted is not quoted again, and the
TLS files are looked at once a second (``TLS_CHECK_S``), not on every request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http
import logging
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import orjson
import yarl

from metricsched.edges import errors

logger = logging.getLogger("metricsched.kube_http")

# What a request raises when no answer arrived (refused, reset, timed out): the request
# may or may not have reached the API server.
TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class AnswerTooLargeError(Exception):
    """An answer longer than the request's ``max_bytes``: reading stopped there."""


# Connecting (TCP) takes at most this long, within a request's total timeout.
CONNECT_S = 5.0

# A request looks at the TLS files on disk (``AsyncApi.session``) at most this often: a
# rotation is seen within a second, without three ``stat`` calls per Binding.
TLS_CHECK_S = 1.0

# A path of only these characters (what ``kube.path`` makes) is already quoted: its URL
# is built without yarl's quoting pass.
_QUOTED_PATH = re.compile(r"(?:[A-Za-z0-9_.~/-]|%[0-9A-F]{2})*")


def timeout(total_s: float, *, connect_s: float = CONNECT_S) -> aiohttp.ClientTimeout:
    """A request's timeout: ``total_s`` for all of it, connecting within ``connect_s``."""
    return aiohttp.ClientTimeout(total=total_s, sock_connect=min(connect_s, total_s))


class NotSent(Exception):  # noqa: N818 (an outcome, not an error)
    """A request's ``gate`` refused it: nothing was sent."""


# Called right before each send: the timeout of that send, or ``NotSent`` raised.
Gate = Callable[[], aiohttp.ClientTimeout]


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    status: int
    data: bytes

    def json(self) -> Any:
        return orjson.loads(self.data) if self.data else None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error(self, *, fallback: str = "") -> errors.ApiError:
        """This error answer as an ``errors.ApiError`` (``fallback``: the message of an
        empty body)."""
        return errors.from_answer(self.status, self.data, fallback=fallback)

    def phrased_error(self) -> errors.ApiError:
        """This error answer as an ``errors.ApiError`` whose reason, and message when the
        body is empty, is the HTTP reason phrase (``503: Service Unavailable``): what the
        policy status, the auth reviews and the command line said of it on the kubernetes
        client."""
        phrase = reason_phrase(self.status)
        return errors.from_answer(self.status, self.data, fallback=phrase, phrase=phrase)


def reason_phrase(status: int) -> str:
    """The HTTP reason phrase of ``status`` ("" for a code without one)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def json_object(answer: Answer) -> dict[str, Any]:
    """A 2xx answer's body, a JSON object. An error status raises ``errors.ApiError`` (the
    caller checks first for the statuses it handles: a GET's 404, a PUT's 409); a body
    that is not a JSON object raises ``ValueError``."""
    if not answer.ok:
        raise answer.error()
    body = answer.json()
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    return body


def ssl_context(cfg: Any) -> ssl.SSLContext | bool:
    """The TLS settings of a kubernetes ``Configuration`` as aiohttp takes them."""
    if not str(cfg.host).startswith("https"):
        return False
    context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if not cfg.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return context


def tls_files(cfg: Any) -> tuple[tuple[str, float, int], ...]:
    """Path, modification time and size of each TLS file ``cfg`` names (what to watch
    for a rotation); a file that cannot be read counts as changed once it can."""
    found = []
    for path in (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file):
        if not path:
            continue
        try:
            stat = os.stat(path)
        except OSError:
            found.append((str(path), -1.0, -1))
            continue
        found.append((str(path), stat.st_mtime, stat.st_size))
    return tuple(found)


class AsyncApi:
    """Requests and watch streams to the API server, on the running event loop."""

    def __init__(
        self, api_client: Any, *, limit: int = 64, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._cfg = api_client.configuration
        self._clock = clock
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None
        self._tls_files: tuple[tuple[str, float, int], ...] = ()
        self._tls_checked = -float("inf")  # monotonic time of the last look at the files
        # (authorization, basic credentials, content type) -> a request's headers
        self._header_cache: dict[
            tuple[str, tuple[str | None, str | None], str | None], dict[str, str]
        ] = {}
        self.tls_reloads = 0
        # The configuration's host as set, as used, and whether it is ASCII (an IDN host
        # goes through yarl's encoding).
        self._host = ("", "", True)

    @property
    def host(self) -> str:
        raw = self._cfg.host
        if raw != self._host[0]:
            host = str(raw).rstrip("/")
            self._host = (raw, host, host.isascii())
        return self._host[1]

    def _url(self, path: str) -> yarl.URL | str:
        url = self.host + path
        if self._host[2] and _QUOTED_PATH.fullmatch(path):
            return yarl.URL(url, encoded=True)
        return url

    def _pool(self) -> aiohttp.ClientSession:
        """``session``, its look at the TLS files made at most every ``TLS_CHECK_S``."""
        now = self._clock()
        if self._session is None or self._session.closed or now - self._tls_checked >= TLS_CHECK_S:
            self._tls_checked = now
            return self.session()
        return self._session

    def _headers(
        self, *, refresh_now: bool = False, content_type: str | None = None
    ) -> Mapping[str, str]:
        """A request's headers, built once per credential and content type (callers
        never change them: aiohttp copies what it is given)."""
        cfg = self._cfg
        hook = cfg.refresh_api_key_hook
        if hook is not None:
            # ``kube.RefreshAtMost`` runs the loaders' hook at most once a second;
            # ``refresh_now`` (after a 401) runs it past that throttle.
            (getattr(hook, "refresh_now", hook) if refresh_now else hook)(cfg)
        authorization = ""
        # As the client's get_api_key_with_prefix reads them, without running the hook
        # once per key it tries.
        for key in ("BearerToken", "authorization"):
            token = cfg.api_key.get(key)
            if token:
                prefix = cfg.api_key_prefix.get(key)
                token = f"{prefix} {token}" if prefix else str(token)
                authorization = token if " " in token else f"Bearer {token}"
                break
        basic = (cfg.username, cfg.password) if not authorization else (None, None)
        cache_key = (authorization, basic, content_type)
        headers = self._header_cache.get(cache_key)
        if headers is not None:
            return headers
        headers = {"Accept": "application/json", "User-Agent": "metricsched"}
        if authorization:
            headers["Authorization"] = authorization
        elif cfg.username or cfg.password:
            headers["Authorization"] = aiohttp.BasicAuth(
                cfg.username or "", cfg.password or ""
            ).encode()
        if content_type is not None:
            headers["Content-Type"] = content_type
        if len(self._header_cache) >= 16:  # credentials rotated many times: start afresh
            self._header_cache.clear()
        self._header_cache[cache_key] = headers
        return headers

    def session(self) -> aiohttp.ClientSession:
        """The connection pool, rebuilt when the CA or client certificate files changed on
        disk (a rotated cluster CA, a renewed client certificate: the mounted files are
        replaced, and a pool built with the old ones could no longer connect while the
        Lease, renewed over another pool, still succeeds). Open streams of the old pool
        end and are resumed by their readers."""
        files = tls_files(self._cfg)
        if self._session is not None and not self._session.closed and files != self._tls_files:
            self.tls_reloads += 1
            logger.info("kube pool: TLS files changed on disk, connecting with them")
            old = self._session
            self._session = None
            asyncio.get_running_loop().create_task(old.close(), name="kube pool: old TLS")
        if self._session is None or self._session.closed:
            self._tls_files = files
            connector = aiohttp.TCPConnector(
                ssl=ssl_context(self._cfg), limit=self._limit, enable_cleanup_closed=True
            )
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode()
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
        gate: Gate | None = None,
        max_bytes: int | None = None,
    ) -> Answer:
        """One request; the whole answer read (with ``max_bytes``, at most that much:
        past it, ``AnswerTooLargeError`` and the connection is dropped). Transport errors
        raise (aiohttp's ``ClientError``, ``TimeoutError``: ``TRANSPORT_ERRORS``); an
        error status is returned, not raised.

        ``gate``, if given, is called right before each send (the first, and the one
        after a 401) and gives that send's timeout; it raises ``NotSent`` to refuse, and
        nothing is sent. A 401 refreshes the credentials at once and is sent again, once.
        """
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
        for refresh_now in (False, True):
            answer = await self._send(
                method,
                path,
                params=params,
                data=data,
                content_type=content_type,
                timeout=timeout,
                gate=gate,
                refresh_now=refresh_now,
                max_bytes=max_bytes,
            )
            if answer.status != 401:
                break
        return answer

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        data: bytes | None,
        content_type: str,
        timeout: aiohttp.ClientTimeout | None,
        gate: Gate | None,
        refresh_now: bool = False,
        max_bytes: int | None = None,
    ) -> Answer:
        headers = self._headers(
            refresh_now=refresh_now, content_type=content_type if data is not None else None
        )
        if gate is not None:
            timeout = gate()
        async with self._pool().request(
            method,
            self._url(path),
            params=params,
            data=data,
            headers=headers,
            timeout=timeout or aiohttp.ClientTimeout(total=60, sock_connect=10),
        ) as response:
            if max_bytes is None:
                return Answer(status=response.status, data=await response.read())
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.content.iter_chunked(64 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise AnswerTooLargeError(f"an answer over {max_bytes} bytes")
                chunks.append(chunk)
            return Answer(status=response.status, data=b"".join(chunks))

    async def lines(
        self,
        path: str,
        *,
        params: Mapping[str, str],
        timeout: aiohttp.ClientTimeout,
    ) -> AsyncIterator[bytes]:
        """A watch stream's lines (one JSON event each). An error status raises
        ``errors.ApiError``."""
        async with self.session().get(
            self.host + path, params=params, headers=self._headers(), timeout=timeout
        ) as response:
            if response.status != 200:
                raise Answer(response.status, await response.read()).error()
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield line
            if buffer.strip():
                yield buffer

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
            await asyncio.sleep(0)  # let the connector close its transports
