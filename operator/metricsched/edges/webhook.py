"""The opt-in admission webhook (namespace or pod label): kopf's server, one ``@kopf.on.mutate``.

kopf serves the AdmissionReviews; core/opt_in.py decides. The webhook must never be the
reason a pod is not created: the handler answers "allowed" whatever happens (an error is
logged, counted, and the pod goes on as it came), and the MutatingWebhookConfiguration
(the chart's) says ``failurePolicy: Ignore`` with a short timeout for when the operator
cannot answer at all. It reads nothing from the API: the configuration's selectors already
sent only the pods of opted-in namespaces, or (its second entry, webhook.podOptIn) the pods
labelled for this install. Every replica serves it, leader or not:
admission cannot wait for an election.

While the server does not listen (not started yet, kopf restarting it after API errors, a
certificate change), the API server creates pods unchanged and they go to
default-scheduler for good (schedulerName is immutable). Nothing here can count those:
the API server does (``apiserver_admission_webhook_fail_open_count``, the chart's
MetricschedWebhookFailOpen alert). What this side says: ``metricsched_webhook_serving``
and readiness (subsystem ``webhook``) are false while it does not listen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import kopf

from metricsched.config import Config
from metricsched.core import opt_in
from metricsched.edges import observe, probes

logger = logging.getLogger("metricsched.webhook")

# The handler's id is the URL path kopf routes to it: https://<host>:<port>/scheduler-name.
HANDLER_ID = "scheduler-name"
PATH = f"/{HANDLER_ID}"
ERROR = "Error"


SUBSYSTEM = "webhook"  # its key in probes.HealthState's readiness


class WebhookServer(kopf.WebhookServer):
    """kopf's HTTPS server, which also gives each pod its request's namespace, and says
    whether it listens (``health``, ``metrics``).

    The API server fills in a new object's namespace only after admission: a pod created
    by a ReplicaSet reaches the webhook without ``metadata.namespace``, which the
    AdmissionReview carries in ``request.namespace``."""

    def __init__(
        self,
        *,
        health: probes.HealthState | None = None,
        metrics: observe.Metrics | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._health = health
        self._metrics = metrics
        self._serving(False, "webhook: not serving yet")

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        async def with_namespace(request: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return await fn(with_request_namespace(request), **kwargs)
            finally:
                if self._metrics is not None:
                    self._metrics.webhook_admission_duration.observe(time.monotonic() - started)

        try:
            # kopf yields a client configuration once the server listens (and again on a
            # certificate change); the generator ends when the server stops.
            async for client_config in super().__call__(with_namespace):
                self._serving(True, "webhook serving")
                yield client_config
        finally:
            self._serving(False, "webhook: the server stopped; pods are created unchanged")

    def _serving(self, serving: bool, reason: str) -> None:
        if self._health is not None:
            self._health.set_ready(serving, reason, subsystem=SUBSYSTEM)
        if self._metrics is not None:
            self._metrics.webhook_serving.set(1 if serving else 0)


def with_request_namespace(request: Any) -> Any:
    """The AdmissionReview, its object's ``metadata.namespace`` filled from the request."""
    payload = request.get("request") if isinstance(request, Mapping) else None
    if not isinstance(payload, dict):
        return request
    obj, namespace = payload.get("object"), payload.get("namespace")
    if isinstance(obj, dict) and namespace:
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict) and not meta.get("namespace"):
            meta["namespace"] = namespace
    return request


def server(
    config: Config,
    *,
    health: probes.HealthState | None = None,
    metrics: observe.Metrics | None = None,
) -> WebhookServer:
    """The server of ``--webhook``: the certificate files are re-read when they change.
    ``health``: readiness is false (subsystem ``webhook``) while it does not listen."""
    return WebhookServer(
        health=health,
        metrics=metrics,
        addr=config.webhook_bind_address,
        port=config.webhook_port,
        certfile=config.webhook_cert_file,
        pkeyfile=config.webhook_key_file,
    )


def rules(config: Config) -> opt_in.Rules:
    return opt_in.rules(
        scheduler_name=config.webhook_scheduler_name,
        excluded_namespaces=config.webhook_excluded_namespaces,
        pod_label=config.webhook_pod_label,
    )


def admit(
    body: Mapping[str, Any],
    patch: kopf.Patch,
    *,
    rules: opt_in.Rules,
    metrics: observe.Metrics,
) -> None:
    """Decide for one pod and write the decision into kopf's patch; never raise."""
    try:
        namespace = str((body.get("metadata") or {}).get("namespace") or "")
        decision = opt_in.decide(body, namespace=namespace, namespace_labels=None, rules=rules)
        if decision.scheduler_name is not None:
            patch.setdefault("spec", {})["schedulerName"] = decision.scheduler_name
            logger.debug(
                "pod %s/%s given schedulerName %s",
                namespace,
                (body.get("metadata") or {}).get("name")
                or (body.get("metadata") or {}).get("generateName", ""),
                decision.scheduler_name,
            )
        metrics.webhook_admissions.labels(result=decision.reason.value).inc()
    except Exception:
        patch.clear()
        logger.exception("the opt-in webhook failed; the pod is admitted unchanged")
        metrics.webhook_admissions.labels(result=ERROR).inc()


def register(registry: kopf.OperatorRegistry, *, config: Config, metrics: observe.Metrics) -> None:
    """Add the mutating handler (pods, CREATE only) to kopf's registry."""
    the_rules = rules(config)
    for reason in opt_in.Reason:
        metrics.webhook_admissions.labels(result=reason.value)
    metrics.webhook_admissions.labels(result=ERROR)

    @kopf.on.mutate(
        "v1", "pods", id=HANDLER_ID, operations=["CREATE"], ignore_failures=True, registry=registry
    )
    async def set_scheduler_name(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        admit(body, patch, rules=the_rules, metrics=metrics)
