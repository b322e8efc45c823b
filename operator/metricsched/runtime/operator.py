"""The operator process: kopf wiring, start-up sync, the metric refresher, policy status.

kopf is used thinly: ``@kopf.on.event`` handlers (which store nothing on the objects they
see) translate watch events into cache updates and queue entries. Pods are watched with a
server-side field selector that leaves out finished pods. At start-up the cache is filled
from one LIST of nodes, pods and policies before the first decision, so a restarted
operator neither forgets a pending pod nor overcommits a node it has not heard of yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import functools
import json
import logging
import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import kopf
import kubernetes

from metricsched.config import Config
from metricsched.core import model, parse, policy, scoring
from metricsched.edges import binder, logs, observe
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import leader
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import scheduler as scheduler_mod

logger = logging.getLogger("metricsched.operator")

GROUP, VERSION, PLURAL = "metricsched.io", "v1alpha1", "schedulingpolicies"
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


class CrdMissingError(RuntimeError):
    """The operator cannot run without its CRD."""


@dataclasses.dataclass(slots=True)
class MetricHealth:
    ok: bool | None = None  # None = not refreshed yet
    kind: model.QueryErrorKind | None = None
    message: str = ""


@dataclasses.dataclass(slots=True)
class PolicyRecord:
    uid: str = ""
    generation: int = 0
    invalid: str = ""  # validation error, "" if valid
    metrics: dict[str, prom.RefreshResult] = dataclasses.field(default_factory=dict)
    health: dict[str, MetricHealth] = dataclasses.field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    last_written: str = ""  # JSON of the last status written


class Operator:
    def __init__(self, config: Config, api_client: Any) -> None:
        self.config = config
        self.api_client = api_client
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.metrics = observe.Metrics()
        self.health = observe.HealthState()
        self.cache = cache_mod.ClusterCache()
        self.queue = queue_mod.SchedulingQueue()
        self.store = prom.MetricStore()
        self.source = prom.PrometheusSource(
            prom.PrometheusConfig(
                url=config.prometheus_url,
                token_file=config.prometheus_token_file,
                ca_file=config.prometheus_ca_file,
                verify_tls=config.prometheus_verify_tls,
                timeout_s=config.query_timeout_s,
            ),
            metrics=self.metrics,
        )
        self.recorder = binder.EventRecorder(
            self.core,
            component=sorted(config.scheduler_names)[0],
            rate_per_s=config.events_per_second,
            burst=config.events_burst,
            metrics=self.metrics,
        )
        self.scheduler = scheduler_mod.Scheduler(
            config=config,
            cache=self.cache,
            queue=self.queue,
            store=self.store,
            core_api=self.core,
            recorder=self.recorder,
            metrics=self.metrics,
            on_fallback_change=self._fallback_changed,
        )
        self.records: dict[model.PolicyKey, PolicyRecord] = {}
        self.refresh_now = asyncio.Event()
        self.stop = asyncio.Event()
        # --namespace narrows which pods are scheduled and which policies apply; pods of all
        # namespaces are still watched, because they all take capacity on the same nodes.
        self._namespaces = frozenset(config.namespaces)

    # --- watch events (called by kopf handlers) ----------------------------------------

    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            self.cache.remove_pod(uid)
            self.queue.done(uid)
            return
        ours = (body.get("spec") or {}).get("schedulerName") in self.config.scheduler_names and (
            not self._namespaces or meta.get("namespace") in self._namespaces
        )
        try:
            pod = parse.pod_from_body(body)
        except parse.ParseError as e:
            if ours and not (body.get("spec") or {}).get("nodeName"):
                # A pod we cannot read is reported, not dropped: it stays Pending with a reason.
                self._record(
                    binder.ObjectRef.pod(
                        namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid
                    ),
                    event_type="Warning",
                    reason="FailedScheduling",
                    action="Scheduling",
                    message=f"metricsched cannot read this pod's spec: {e}",
                )
            return
        self.cache.upsert_pod(pod, ours=ours)
        if uid in self.cache.pending:
            self.cache.pod_conditions[uid] = tuple(
                (body.get("status") or {}).get("conditions") or ()
            )
            self.queue.add(uid)
        else:
            self.queue.done(uid)

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        name = model.NodeName(str((body.get("metadata") or {}).get("name", "")))
        if event_type == "DELETED":
            self.cache.remove_node(name)
            return
        try:
            self.cache.upsert_node(parse.node_from_body(body))
        except parse.ParseError as e:
            logger.warning("ignoring node %s: %s", name, e)

    def on_policy(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        if self._namespaces and meta.get("namespace") not in self._namespaces:
            return
        key = model.PolicyKey(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        if event_type == "DELETED":
            self.cache.remove_policy(key)
            self.records.pop(key, None)
            self.store.retain(self._metric_keys())
            return
        record = self.records.setdefault(key, PolicyRecord())
        generation = int(meta.get("generation") or 0)
        changed = generation != record.generation or record.uid != meta.get("uid")
        record.uid = str(meta.get("uid", ""))
        record.generation = generation
        try:
            parsed = policy.policy_from_body(body)
        except policy.PolicyError as e:
            message = "; ".join(e.problems)
            self.cache.reject_policy(key, message)
            if changed or not record.invalid:
                self._record(
                    self._policy_ref(key),
                    event_type="Warning",
                    reason="InvalidPolicy",
                    action="Validate",
                    message=f"policy ignored until fixed: {message}",
                )
            record.invalid = message
            self._write_status_soon()
            return
        record.invalid = ""
        old = self.cache.policies.get(key)
        self.cache.upsert_policy(parsed)
        if old is None or old.metrics != parsed.metrics:
            record.health.clear()
            record.metrics.clear()
            self.refresh_now.set()  # new metrics: query them now, not at the next tick
        if changed:
            # Our own status PATCH comes back as an event too: only a spec change (or a
            # new object) writes at once; counters follow at each refresh.
            self._write_status_soon()

    def _record(self, ref: binder.ObjectRef, **kwargs: Any) -> None:
        """Post an event without blocking the event loop (the recorder's I/O is blocking)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread (the start-up sync): post directly
            self.recorder.record(ref, **kwargs)
            return
        loop.run_in_executor(None, functools.partial(self.recorder.record, ref, **kwargs))

    # --- start-up ----------------------------------------------------------------------

    def initial_sync(self) -> None:
        """LIST nodes, policies and pods once (blocking; run in a thread)."""
        for item in _list_all(self._list_nodes):
            self.on_node("ADDED", item)
        try:
            for item in _list_all(self._list_policies):
                self.on_policy("ADDED", item)
        except kubernetes.client.exceptions.ApiException as e:
            if e.status == 404:
                raise CrdMissingError(
                    f"the SchedulingPolicy CRD ({PLURAL}.{GROUP}) is not installed; "
                    "install it with `kubectl apply -f crds/` (the Helm chart does this)"
                ) from e
            raise
        for item in _list_all(self._list_pods):
            self.on_pod("ADDED", item)

    def _list_nodes(self, cont: str | None) -> Any:
        return self.core.list_node(limit=500, _continue=cont, _preload_content=False)

    def _list_pods(self, cont: str | None) -> Any:
        return self.core.list_pod_for_all_namespaces(
            limit=500, _continue=cont, field_selector=POD_FIELD_SELECTOR, _preload_content=False
        )

    def _list_policies(self, cont: str | None) -> Any:
        return self.custom.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, limit=500, _continue=cont, _preload_content=False
        )

    # --- metrics refresher -------------------------------------------------------------

    def _metric_keys(self) -> list[model.MetricKey]:
        return [
            model.MetricKey(p.key, m.name) for p in self.cache.policies.values() for m in p.metrics
        ]

    async def refresher(self) -> None:
        while not self.stop.is_set():
            self.refresh_now.clear()
            started = time.time()
            policies = list(self.cache.policies.values())
            if any(
                isinstance(m.source, model.PrometheusSource) for p in policies for m in p.metrics
            ):
                results = await asyncio.to_thread(
                    functools.partial(
                        prom.refresh_policy_metrics,
                        source=self.source,
                        store=self.store,
                        policies=policies,
                        nodes=self.cache.nodes(),
                        now=started,
                        metrics=self.metrics,
                    )
                )
                self._after_refresh(results)
            self.store.retain(self._metric_keys())
            self.health.beat()
            await self._write_statuses()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.refresh_now.wait(), timeout=self.config.refresh_interval_s
                )

    def _after_refresh(self, results: list[prom.RefreshResult]) -> None:
        for r in results:
            record = self.records.get(r.policy)
            if record is None:
                continue
            record.metrics[r.metric] = r
            health = record.health.setdefault(r.metric, MetricHealth())
            ok = r.error is None
            if not ok and health.ok is not False:
                logger.warning(
                    "metric %s of policy %s failed: %s: %s",
                    r.metric,
                    r.policy,
                    r.error,
                    r.error_message,
                )
                self._record(
                    self._policy_ref(r.policy),
                    event_type="Warning",
                    reason="MetricQueryFailed",
                    action="QueryMetrics",
                    message=f"metric {r.metric}: {r.error}: {r.error_message}",
                )
            elif ok and health.ok is False:
                logger.info("metric %s of policy %s recovered", r.metric, r.policy)
                self._record(
                    self._policy_ref(r.policy),
                    event_type="Normal",
                    reason="MetricsRecovered",
                    action="QueryMetrics",
                    message=f"metric {r.metric}: {r.nodes_reporting} node(s) reporting again",
                )
            health.ok, health.kind, health.message = ok, r.error, r.error_message

    def _fallback_changed(self, key: model.PolicyKey, active: bool, reason: str) -> None:
        if active:
            self._record(
                self._policy_ref(key),
                event_type="Warning",
                reason="FallbackActive",
                action="Schedule",
                message=f"pods are placed by the fallback strategy: {reason}",
            )
        self._write_status_soon()

    def _policy_ref(self, key: model.PolicyKey) -> binder.ObjectRef:
        namespace, _, name = key.partition("/")
        record = self.records.get(key)
        return binder.ObjectRef.policy(
            namespace=namespace, name=name, uid=record.uid if record else ""
        )

    # --- policy status -----------------------------------------------------------------

    def _write_status_soon(self) -> None:
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(self._write_statuses())

    async def _write_statuses(self) -> None:
        for key, record in list(self.records.items()):
            status = self.status_of(key, record)
            text = json.dumps(status, sort_keys=True)
            if text == record.last_written:
                continue
            namespace, _, name = key.partition("/")
            try:
                await asyncio.to_thread(
                    self.custom.patch_namespaced_custom_object_status,
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    {"status": status},
                    _content_type="application/merge-patch+json",
                )
            except kubernetes.client.exceptions.ApiException as e:
                if e.status != 404:
                    logger.warning("could not write status of %s: %s", key, e.reason)
                continue
            record.last_written = text
            self.metrics.api_writes.labels(kind="status").inc()  # policy status patch

    def status_of(self, key: model.PolicyKey, record: PolicyRecord) -> dict[str, Any]:
        counters = self.scheduler.counters.get(key, scheduler_mod.PolicyCounters())
        pol = self.cache.policies.get(key)
        metrics_status: list[dict[str, Any]] = []
        kinds: list[model.QueryErrorKind] = []
        pending = False
        if pol is not None:
            for m in pol.metrics:
                if isinstance(m.source, model.AnnotationSource):
                    n = sum(
                        1
                        for node in self.cache.nodes()
                        if scoring.annotation_value(node.annotations.get(m.source.annotation))
                        is not None
                    )
                    metrics_status.append(
                        {
                            "name": m.name,
                            "nodesReporting": n,
                            "nodesMissing": len(self.cache.nodes()) - n,
                            "lastError": "",
                        }
                    )
                    continue
                r = record.metrics.get(m.name)
                if r is None:
                    pending = True
                    metrics_status.append(
                        {"name": m.name, "nodesReporting": 0, "nodesMissing": 0, "lastError": ""}
                    )
                    continue
                if r.error is not None:
                    kinds.append(r.error)
                metrics_status.append(
                    {
                        "name": m.name,
                        "nodesReporting": r.nodes_reporting,
                        "nodesMissing": r.nodes_missing,
                        "lastRefreshTime": _rfc3339(r.finished_at),
                        "lastError": f"{r.error}: {r.error_message}" if r.error else "",
                    }
                )
        if record.invalid:
            ready = ("False", "InvalidSpec", record.invalid)
            available = ("Unknown", "InvalidSpec", "the policy is not in use until fixed")
        elif model.QueryErrorKind.BAD_QUERY in kinds:
            bad = [s["name"] for s in metrics_status if "BadQuery" in s["lastError"]]
            ready = ("False", "BadQuery", f"Prometheus rejected the query of {', '.join(bad)}")
            available = ("False", "BadQuery", _first_error(metrics_status))
        elif kinds:
            reason = str(kinds[0])
            ready = (
                "False",
                "MetricsUnavailable",
                f"pods are placed by fallback {pol.fallback if pol else ''}: "
                + _first_error(metrics_status),
            )
            available = ("False", reason, _first_error(metrics_status))
        elif pending:
            ready = ("Unknown", "Pending", "waiting for the first metric refresh")
            available = ("Unknown", "Pending", "waiting for the first metric refresh")
        else:
            ready = ("True", "MetricsFresh", "all metrics refreshed")
            available = (
                "True",
                "AllMetricsReporting",
                "every metric returned values at the last refresh",
            )
        conditions = [
            self._condition(record, "Ready", *ready),
            self._condition(record, "MetricsAvailable", *available),
        ]
        return {
            "observedGeneration": record.generation,
            "conditions": conditions,
            # The Metrics printer column reads this (JSONPath columns show one match only).
            "metricNames": policy.metric_names(pol) if pol is not None else "",
            "metrics": metrics_status,
            "scheduledPods": counters.scheduled,
            "fallbackPods": counters.fallback,
        }

    def _condition(
        self, record: PolicyRecord, ctype: str, status: str, reason: str, message: str
    ) -> dict[str, Any]:
        previous = record.conditions.get(ctype)
        since = (
            previous["lastTransitionTime"]
            if previous and previous["status"] == status
            else _rfc3339(time.time())
        )
        cond = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message[:1024],
            "lastTransitionTime": since,
            "observedGeneration": record.generation,
        }
        record.conditions[ctype] = cond
        return cond

    # --- run ---------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        closer = observe.serve(
            host=self.config.bind_address,
            metrics_port=self.config.metrics_port,
            health_port=self.config.health_port,
            health=self.health,
            metrics=self.metrics,
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop.set)
        # Every API call runs in a thread; the default pool (cpu + 4 threads) would cap the
        # Bindings in flight well below --bind-concurrency.
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=self.config.bind_concurrency + 8, thread_name_prefix="api"
            )
        )
        self.metrics.set_metric_age_source(lambda: self.store.ages(time.time()))
        self.recorder.start()
        try:
            await asyncio.to_thread(self.initial_sync)
            logger.info(
                "cache synced: %d nodes, %d pending pods, %d policies",
                len(self.cache.nodes()),
                len(self.cache.pending),
                len(self.cache.policies),
            )
            self.queue.sync(self.cache.pending)
            elector = None
            if self.config.leader_elect:
                elector = leader.start(
                    self.config, self.api_client, loop=loop, on_change=self._leadership_changed
                )
            else:
                self.scheduler.active.set()
            self.health.set_ready(True, "caches synced")
            registry = build_registry(self)
            tasks = [
                asyncio.create_task(self.scheduler.run(self.stop), name="scheduler"),
                asyncio.create_task(self.refresher(), name="refresher"),
                asyncio.create_task(self._kopf(registry), name="kopf"),
            ]
            stopper = asyncio.create_task(self.stop.wait())
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            self.stop.set()
            for t in done:
                if t is not stopper and t.exception() is not None:
                    logger.error("%s stopped with an error", t.get_name(), exc_info=t.exception())
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.scheduler.drain()
            if elector is not None:
                elector.stop()
        finally:
            self.recorder.close()
            closer.close()
            self.source.close()

    def _leadership_changed(self, leading: bool) -> None:
        if leading:
            logger.info("became leader; scheduling")
            self.scheduler.active.set()
        else:
            logger.warning("lost leadership; exiting so a fresh process re-syncs")
            self.stop.set()

    async def _kopf(self, registry: kopf.OperatorRegistry) -> None:
        await kopf.operator(
            registry=registry, clusterwide=True, standalone=True, stop_flag=self.stop
        )


def build_registry(op: Operator) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # we post our own events, from the scheduler's name
        settings.scanning.disabled = True
        settings.peering.standalone = True
        settings.watching.field_selectors[("v1", "pods")] = POD_FIELD_SELECTOR
        # LIST in pages: an unchunked initial list holds every pod's body at once.
        settings.watching.chunk_size = 500
        # kopf keeps a worker (and the last body) per object until it idles out: pods see
        # a burst of events around their bind and then quiet, so let the workers go soon.
        settings.queueing.idle_timeout = 1.0
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 60

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(op.api_client)

    @kopf.on.event("v1", "pods", registry=registry)
    async def pod_event(event: Mapping[str, Any], **_: Any) -> None:
        op.on_pod(event.get("type"), event["object"])

    @kopf.on.event("v1", "nodes", registry=registry)
    async def node_event(event: Mapping[str, Any], **_: Any) -> None:
        op.on_node(event.get("type"), event["object"])

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def policy_event(event: Mapping[str, Any], **_: Any) -> None:
        op.on_policy(event.get("type"), event["object"])

    return registry


def connection_info(api_client: Any) -> kopf.ConnectionInfo:
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


class KubeconfigError(RuntimeError):
    """No usable cluster credentials: said in one line, not a traceback."""


def load_api_client(kubeconfig: str | None, *, pool_size: int = 32) -> Any:
    """The kubernetes ApiClient: in-cluster, else the kubeconfig (explicit or default)."""
    try:
        return _load_api_client(kubeconfig, pool_size=pool_size)
    except (kubernetes.config.ConfigException, OSError, ValueError, TypeError) as e:
        where = kubeconfig or "in-cluster config or ~/.kube/config"
        raise KubeconfigError(f"cannot load cluster credentials from {where}: {e}") from e


def _load_api_client(kubeconfig: str | None, *, pool_size: int = 32) -> Any:
    cfg = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=cfg
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
    # urllib3 keeps this many connections per host: one per Binding in flight, plus the
    # event and status writers (the client's default, 10, would queue the binds).
    cfg.connection_pool_maxsize = pool_size
    return kubernetes.client.ApiClient(cfg)


def _list_all(fetch: Any) -> Iterator[Mapping[str, Any]]:
    cont: str | None = None
    while True:
        resp = fetch(cont)
        try:
            body = json.loads(resp.data)
        finally:
            resp.release_conn()
        yield from body.get("items") or []
        cont = (body.get("metadata") or {}).get("continue") or None
        if not cont:
            return


def _first_error(metrics_status: list[dict[str, Any]]) -> str:
    for s in metrics_status:
        if s.get("lastError"):
            return f"{s['name']}: {s['lastError']}"
    return ""


def _rfc3339(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def run(config: Config) -> None:
    logs.configure("text" if config.log_format == "text" else "json", config.log_level.upper())
    api_client = load_api_client(config.kubeconfig, pool_size=config.bind_concurrency + 8)
    await Operator(config, api_client).run()
