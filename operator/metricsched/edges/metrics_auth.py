"""/metrics as controller-runtime serves it: HTTPS, TokenReview, SubjectAccessReview.

A scrape must carry a bearer token. The API server says who it belongs to (TokenReview)
and whether that user may ``get`` the non-resource URL ``/metrics`` (SubjectAccessReview),
so access is granted with ordinary RBAC (the chart's ``metrics-reader`` ClusterRole).
Answers are cached as controller-runtime caches them: authentication for a minute,
"allowed" for five, "denied" for thirty seconds, so a scrape every few seconds costs the
API server two requests per token every few minutes.

Unknown tokens cost bounded work: a rejected token is remembered (30 s) in a cache of
its own, so junk never pushes an accepted token out; tokens never seen accepted are
reviewed at most ``UNKNOWN_REVIEWS_PER_S`` a second (``UNKNOWN_REVIEWS_BURST`` at once),
the rest answered 429 without a review; a token accepted within the hour is always
reviewed (the real scraper is never refused for the junk of others); a token longer than
``MAX_TOKEN_CHARS`` is refused unread. The health probes never come here:
they stay plain HTTP on their own port.

The certificate is read from a directory holding ``tls.crt`` and ``tls.key`` (a
cert-manager or ``kubernetes.io/tls`` Secret mounted there) and re-read when it changes;
without one, a self-signed certificate is made at start-up with ``openssl`` (as
controller-runtime makes one in memory).

The guard runs on the HTTP server's request threads (``http_server``: at most
``MAX_HANDLER_THREADS`` per port, ``MAX_WAITING`` more queued, the rest answered 503), and
its reviews are sent on the operator's event loop (``kube_http.AsyncApi``, one client for
every API call): ``ApiReviews`` hands each to the loop (``run_coroutine_threadsafe``) and
waits for it at most ``REVIEW_TIMEOUT_S`` plus ``LOOP_SLACK_S``, then cancels it and
answers 500. A port flood therefore puts at most as many reviews on the loop as there
are request threads, each bounded in time, and the unknown-token budget bounds how many
of them are new tokens; a stuck loop costs a scrape a 500, never a thread forever. The
reviews have a connection pool of their own, as small as the threads that use it, so
they never wait behind (or hold up) a Binding. Kept on the kubernetes client in the
threads, they would hold the same threads for the same time but keep a second client
(urllib3, its pool, its errors) for two calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import logging
import os
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from metricsched.edges import kube, kube_http

logger = logging.getLogger(__name__)

AUTHN_TTL_S = 60.0
ALLOW_TTL_S = 300.0
DENY_TTL_S = 30.0
CACHE_SIZE = 1024
KNOWN_TTL_S = 3600.0  # an accepted token's digest bypasses the unknown-token budget
UNKNOWN_REVIEWS_PER_S = 1.0
UNKNOWN_REVIEWS_BURST = 10
MAX_TOKEN_CHARS = 16384  # service-account tokens are about 1 KiB
REVIEW_TIMEOUT_S = 5.0
LOOP_SLACK_S = 1.0  # a review waits this much past its own timeout for a busy loop
CERT_RELOAD_CHECK_S = 10.0


class AuthError(RuntimeError):
    """Secure serving cannot start (no certificate could be loaded or made)."""


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Denial:
    """Why a request is refused: the HTTP status and a one-line reason."""

    status: int  # 401, 403, 429 (too many unknown tokens) or 500
    reason: str


class Guard(Protocol):
    def __call__(self, authorization: str | None, path: str) -> Denial | None:
        """None when the request may be served, else why not."""


class Reviews(Protocol):
    """The two API calls a guard makes (the real ones: ``ApiReviews``)."""

    def token_review(self, token: str) -> User | None: ...

    def access_review(self, user: User, path: str, verb: str) -> tuple[bool, str]: ...


class ApiReviews:
    """TokenReview and SubjectAccessReview on the operator's event loop ``loop``, through
    ``api``; called from the HTTP server's request threads, never from ``loop`` itself."""

    def __init__(
        self,
        api: kube_http.AsyncApi,
        *,
        loop: asyncio.AbstractEventLoop,
        timeout_s: float = REVIEW_TIMEOUT_S,
    ) -> None:
        self._api = api
        self._loop = loop
        self._timeout = timeout_s

    def token_review(self, token: str) -> User | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        answer = self._post(
            "apis/authentication.k8s.io/v1", "tokenreviews", {**body, "spec": {"token": token}}
        )
        status = _json(answer).get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(user.get("groups") or ()),
            extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())),
        )

    def access_review(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
        answer = self._post(
            "apis/authorization.k8s.io/v1", "subjectaccessreviews", {**body, "spec": spec}
        )
        status = _json(answer).get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason", ""))

    def _post(self, prefix: str, plural: str, body: dict[str, Any]) -> kube_http.Answer:
        """POST ``body`` on the loop; this thread waits for the answer, within bounds."""
        request = self._api.request(
            "POST", kube.path(prefix, plural), body=body, timeout=kube_http.timeout(self._timeout)
        )
        return _on_loop(self._loop, request, wait_s=self._timeout + LOOP_SLACK_S)


def _on_loop(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, kube_http.Answer],
    *,
    wait_s: float,
) -> kube_http.Answer:
    """``coro`` run on ``loop`` from another thread, waited for at most ``wait_s`` (then
    cancelled: ``TimeoutError``)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("a review waited for on its own event loop would block it")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout=wait_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise


def _json(answer: kube_http.Answer) -> dict[str, Any]:
    if not answer.ok:
        raise answer.phrased_error()
    return kube_http.json_object(answer)


class _TtlCache:
    """A small thread-safe cache whose entries expire; the oldest go first when full."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> tuple[bool, Any]:
        with self._lock:
            hit = self._items.get(key)
            if hit is None or hit[0] <= self._clock():
                self._items.pop(key, None)
                return False, None
            return True, hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        with self._lock:
            if len(self._items) >= CACHE_SIZE:
                self._items.pop(next(iter(self._items)))
            self._items[key] = (self._clock() + ttl, value)


class _Budget:
    """A token bucket: ``rate`` per second, at most ``burst`` at once."""

    def __init__(self, clock: Callable[[], float], *, rate: float, burst: int) -> None:
        self._clock = clock
        self._rate = rate
        self._burst = float(burst)
        self._left = float(burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self._clock()
            self._left = min(self._burst, self._left + max(0.0, now - self._stamp) * self._rate)
            self._stamp = now
            if self._left >= 1.0:
                self._left -= 1.0
                return True
            return False


class ReviewGuard:
    """Bearer token → TokenReview → SubjectAccessReview(get path), answers cached."""

    def __init__(
        self, reviews: Reviews, *, clock: Callable[[], float] = time.monotonic, verb: str = "get"
    ) -> None:
        self._reviews = reviews
        self._verb = verb
        self._users = _TtlCache(clock)  # accepted tokens only: junk cannot evict them
        self._rejected = _TtlCache(clock)
        self._known = _TtlCache(clock)  # accepted within KNOWN_TTL_S
        self._unknown_budget = _Budget(
            clock, rate=UNKNOWN_REVIEWS_PER_S, burst=UNKNOWN_REVIEWS_BURST
        )
        self._access = _TtlCache(clock)

    def __call__(self, authorization: str | None, path: str) -> Denial | None:
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Denial(401, "Unauthorized: a bearer token is required")
        key = hashlib.sha256(token.encode()).hexdigest()  # the token itself is never kept
        hit, user = self._users.get(key)
        if not hit:
            rejected, _ = self._rejected.get(key)
            if rejected or len(token) > MAX_TOKEN_CHARS:
                return Denial(401, "Unauthorized: the token was not accepted")
            known, _ = self._known.get(key)
            if not known and not self._unknown_budget.take():
                return Denial(429, "Too Many Requests: too many unknown tokens; try again later")
            try:
                user = self._reviews.token_review(token)
            except Exception as e:
                logger.warning("TokenReview failed: %s", _short(e))
                return Denial(500, "Internal Server Error: authentication failed")
            if user is None:
                self._rejected.put(key, True, DENY_TTL_S)
                return Denial(401, "Unauthorized: the token was not accepted")
            self._users.put(key, user, AUTHN_TTL_S)
            self._known.put(key, True, KNOWN_TTL_S)
        access_key = (user, path)
        hit, answer = self._access.get(access_key)
        if not hit:
            try:
                answer = self._reviews.access_review(user, path, self._verb)
            except Exception as e:
                logger.warning("SubjectAccessReview failed: %s", _short(e))
                return Denial(500, "Internal Server Error: authorization failed")
            self._access.put(access_key, answer, ALLOW_TTL_S if answer[0] else DENY_TTL_S)
        allowed, _reason = answer
        if not allowed:
            return Denial(403, f'Forbidden: user "{user.name}" may not {self._verb} {path}')
        return None


def _short(e: Exception) -> str:
    status = getattr(e, "status", None)
    reason = getattr(e, "reason", None)
    return f"{status} {reason}" if status else f"{type(e).__name__}: {e}"


# --- TLS -------------------------------------------------------------------------------


class Certificates:
    """The serving certificate: from ``cert_dir`` (re-read when it changes) or self-signed."""

    def __init__(self, cert_dir: str | None, *, hostnames: tuple[str, ...] = ()) -> None:
        if cert_dir:
            self._crt = Path(cert_dir) / "tls.crt"
            self._key = Path(cert_dir) / "tls.key"
            self.self_signed = False
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="metricsched-tls-")
            self._crt, self._key = _self_signed(Path(self._tmp.name), hostnames)
            self.self_signed = True
        self._lock = threading.Lock()
        self._stamp = self._files_stamp()
        self._checked = time.monotonic()
        self.context = self._load()

    def _files_stamp(self) -> tuple[float, float]:
        try:
            return (self._crt.stat().st_mtime, self._key.stat().st_mtime)
        except OSError as e:
            raise AuthError(f"cannot read the metrics certificate: {e}") from e

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self._crt, self._key)
        except (OSError, ssl.SSLError) as e:
            raise AuthError(f"cannot load the metrics certificate {self._crt}: {e}") from e
        context.sni_callback = self._maybe_reload
        return context

    def _maybe_reload(self, sock: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        """On a handshake, at most every few seconds: a renewed certificate is picked up."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= CERT_RELOAD_CHECK_S:
                self._checked = now
                try:
                    stamp = self._files_stamp()
                    if stamp != self._stamp:
                        self.context = self._load()
                        self._stamp = stamp
                        logger.info("reloaded the metrics certificate %s", self._crt)
                except AuthError as e:
                    logger.warning("keeping the current metrics certificate: %s", e)
            sock.context = self.context


def _self_signed(directory: Path, hostnames: tuple[str, ...]) -> tuple[Path, Path]:
    crt, key = directory / "tls.crt", directory / "tls.key"
    names = ["DNS:localhost", "IP:127.0.0.1", *(f"DNS:{h}" for h in hostnames if h)]
    try:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-nodes", "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:prime256v1", "-days", "365",
                "-subj", "/CN=metricsched-metrics", "-addext",
                f"subjectAltName={','.join(names)}", "-keyout", str(key), "-out", str(crt),
            ],
            capture_output=True,
            check=True,
            timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        raise AuthError(
            f"cannot make a self-signed metrics certificate with openssl ({e}); "
            "give one with --metrics-cert-dir"
        ) from e
    return crt, key


@dataclasses.dataclass(frozen=True, slots=True)
class SecureServing:
    """What ``endpoints.serve`` needs to serve /metrics securely."""

    certificates: Certificates
    guard: Guard


def secure_serving(
    *, cert_dir: str | None, api: kube_http.AsyncApi, loop: asyncio.AbstractEventLoop
) -> SecureServing:
    """HTTPS with the certificate of ``cert_dir`` (or a self-signed one) and API reviews
    sent through ``api`` on ``loop``."""
    hostnames = (os.environ.get("HOSTNAME", ""),)
    return SecureServing(
        certificates=Certificates(cert_dir, hostnames=hostnames),
        guard=ReviewGuard(ApiReviews(api, loop=loop)),
    )
