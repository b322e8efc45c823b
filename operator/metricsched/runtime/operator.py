"""The operator process: wires the watches, cache, queue, scheduler, refresher, status
writer, reconciler and leader election together, and supervises them.

Start-up: the cluster-state informers (``runtime.informers``) list every kind, then the
policies and our pending pods are listed, all before the first decision (retried with
backoff while the API server is unreachable: no crash loop), so a restarted operator
neither forgets a pending pod nor overcommits a node it has not heard of. Then kopf
watches our pending pods and the policies, the informers the rest, and a reconciliation
closes the gap between the start-up LIST and kopf's own.

Leadership (``--leader-elect``): every replica watches and keeps its caches warm; only
the leader schedules, rebalances, refreshes metrics and writes policy status. Losing the
lease cancels the binds in flight and ends the process with status 1, as kube-scheduler does.
Every long-lived task is supervised (``runtime.supervise``): one that ends while the
operator runs is logged at ERROR and restarted with backoff; the leader elector's end
ends the process with status 1 and the reason. None ends silently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from metricsched.config import Config
from metricsched.core import model, parse, versions
from metricsched.edges import (
    endpoints,
    errors,
    events,
    http_server,
    kube,
    kube_http,
    logs,
    metric_store,
    metrics_auth,
    observe,
    policy_events,
    probes,
    query_rounds,
)
from metricsched.edges import prometheus as prom
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import gates as gates_mod
from metricsched.runtime import informers as informers_mod
from metricsched.runtime import ingest, kopf_source, leader, supervise
from metricsched.runtime import pod_usage as pod_usage_mod
from metricsched.runtime import policies as policies_mod
from metricsched.runtime import queue as queue_mod
from metricsched.runtime import rebalancer as rebalancer_mod
from metricsched.runtime import reconcile as reconcile_mod
from metricsched.runtime import refresher as refresher_mod
from metricsched.runtime import reservations as reservations_mod
from metricsched.runtime import scheduler as scheduler_mod
from metricsched.runtime import shadow as shadow_mod
from metricsched.runtime import status as status_mod

logger = logging.getLogger("metricsched.operator")

GROUP, VERSION, PLURAL = status_mod.GROUP, status_mod.VERSION, status_mod.PLURAL
POD_FIELD_SELECTOR = ingest.POD_FIELD_SELECTOR
KubeconfigError = kube.KubeconfigError
load_api_client = kube.load_api_client
connection_info = kube.connection_info
TaskEndedError = supervise.TaskEndedError

_SYNC_BACKOFF = (1.0, 30.0)
_RELIST_INTERVAL_S = 300.0
# Threads for the blocking calls (the Prometheus queries): what ``--bind-concurrency 16``
# gave them (16 + 8) before the writers moved onto the loop (``edges.kube_http``), now
# fixed. Every Kubernetes API call is on the loop (the policy status and the auth reviews
# too): the kubernetes client gives credentials only.
BLOCKING_THREADS = 24


class CrdMissingError(RuntimeError):
    """The operator cannot run without its CRD."""


class LeadershipLostError(RuntimeError):
    """The lease was lost: the process ends so that Kubernetes restarts it clean."""


class Operator:
    def __init__(self, config: Config, api_client: Any) -> None:
        self.config = config
        self.api_client = api_client
        # Leading, a consistent cluster state, the first metric round, the elector's fence:
        # made first, handed to every part that reads them (runtime.gates).
        self.gates = gates_mod.Gates()
        # The API objects, named for what they serve, all on the event loop.
        # ``writes``: the writers (Bindings, Events, pod status, Evictions, policy status),
        # with a connection pool of their own: watches hold theirs for minutes, and
        # a Binding must not wait behind them. Room for every Binding in flight and their
        # Events. ``reads`` (below): the informers, the LISTs and the NodeMetrics LIST.
        self.writes = kube_http.AsyncApi(api_client, limit=config.bind_concurrency + 16)
        self.metrics = observe.Metrics()
        self.health = probes.HealthState()
        self.cache = cache_mod.ClusterCache()
        self.queue = queue_mod.SchedulingQueue(ordering=self._ordering)
        self.store = metric_store.MetricStore(max_values=config.max_metric_values)
        self.metrics.metric_values.set_function(lambda: self.store.values)
        self.metrics.metric_values_limit.set(config.max_metric_values)
        self.source = prom.PrometheusClient(
            prom.PrometheusConfig.from_config(config), metrics=self.metrics
        )
        self.recorder = events.EventRecorder(
            self.writes,
            component=sorted(config.scheduler_names)[0],
            rate_per_s=config.events_per_second,
            burst=config.events_burst,
            metrics=self.metrics,
        )
        # Watches post (budget first, the write a task of the recorder), never wait.
        self.post = functools.partial(_post, self.recorder)
        # Policy events: a budget of their own, re-sent while a warning holds.
        self.policy_events = policy_events.PolicyEvents(
            self.writes, component=sorted(config.scheduler_names)[0], metrics=self.metrics
        )
        # Rebalancing's target reservations: leader-local, the rebalancer holds and the
        # scheduler consumes (runtime.reservations)
        self.reservations = reservations_mod.Reservations(cache=self.cache, metrics=self.metrics)
        self.scheduler = scheduler_mod.Scheduler(
            config=config,
            cache=self.cache,
            reservations=self.reservations,
            queue=self.queue,
            store=self.store,
            http=self.writes,
            recorder=self.recorder,
            metrics=self.metrics,
            gates=self.gates,
            on_fallback_change=self._fallback_changed,
            on_fail_open_change=self._fail_open_changed,
        )
        self.shadow = shadow_mod.ShadowEvaluator(
            cache=self.cache,
            store=self.store,
            metrics=self.metrics,
            config=config,
            mark=self._mark_status,
        )
        self.rebalancer = rebalancer_mod.Rebalancer(
            config=config,
            reservations=self.reservations,
            cache=self.cache,
            store=self.store,
            http=self.writes,
            recorder=self.recorder,
            metrics=self.metrics,
            gates=self.gates,
            policy_ref=lambda key: policies_mod.policy_ref(key, self.status.records.get(key)),
            mark=self._mark_status,
        )
        self.status = status_mod.PolicyStatus(
            api=self.writes,
            policies=lambda: self.cache.policies,
            nodes=self.cache.nodes,
            counters=self._counters,
            metrics=self.metrics,
            gates=self.gates,
            interval_s=config.refresh_interval_s,
            shadow=self.shadow.status_block,
            rebalance=self.rebalancer.status_block,
            fail_open=self._fail_open,
        )
        # ``reads``: the API on the event loop for the informers, the reconciler's LISTs
        # and the refresher's NodeMetrics LIST.
        self.reads = kube_http.AsyncApi(api_client)
        # ``reviews``: the TokenReviews and SubjectAccessReviews of /metrics (secure
        # serving), sent on the loop for the HTTP server's request threads, in a pool as
        # small as those threads (edges/metrics_auth.py).
        self.reviews = kube_http.AsyncApi(api_client, limit=http_server.MAX_HANDLER_THREADS)
        self.refresher = refresher_mod.Refresher(
            source=self.source,
            kube=self.reads,
            store=self.store,
            cache=self.cache,
            queue=self.queue,
            keep_result=self._keep_result,
            metrics=self.metrics,
            gates=self.gates,
            post_event=self._post_policy_event,
            interval_s=config.refresh_interval_s,
            # A query may retry once (PrometheusConfig.retries), each attempt bounded by
            # the query timeout for connect and read.
            deadline_s=max(config.refresh_interval_s, 2 * (2 * config.query_timeout_s)),
            pod_usage=pod_usage_mod.PodUsageReader(
                source=self.source,
                queries=pod_usage_mod.Queries(
                    cpu=config.pod_usage_cpu_query,
                    memory=config.pod_usage_memory_query,
                    max_pods=config.pod_usage_max_pods,
                    settled_s=config.pod_usage_settled_s,
                ),
                cache=self.cache,
                store=self.store,
                queue=self.queue,
                metrics=self.metrics,
            ),
        )
        # Each policy's lifecycle; forgetting a policy reaches every party below, once.
        self.policies = policies_mod.Policies(
            config=config,
            cache=self.cache,
            status=self.status,
            signals=policies_mod.Signals(
                record=self.post,
                refresh_now=self.refresher.now,
                policy_events=self.policy_events,
                confirmed=self.gates.policies_confirmed,
            ),
            forget=(
                self.metrics.forget_policy,
                self.scheduler.forget_policy,
                self.refresher.forget_policy,
                self.rebalancer.forget_policy,
                self.shadow.forget_policy,
            ),
        )
        self.ingest = ingest.Ingest(
            config=config,
            cache=self.cache,
            queue=self.queue,
            policies=self.policies,
            metrics=self.metrics,
            record=self.post,
            on_pod_seen=self.shadow.on_pod,
            gates=self.gates,
        )
        # kopf, supervised: our pending pods and the policies into the translation.
        self.kopf = kopf_source.KopfSource(
            config=config,
            api_client=api_client,
            sink=self.ingest,
            metrics=self.metrics,
            health=self.health,
            record=self.post,
        )
        self.cluster_state = informers_mod.ClusterState(
            api=self.reads,
            sink=self.ingest,
            gates=self.gates,
            metrics=self.metrics,
            health=self.health,
            page=config.list_page_size,
        )
        self._informers_first: asyncio.Task[None] | None = None
        self.reconciler = reconcile_mod.Reconciler(
            api=self.reads,
            watches=self.ingest,
            metrics=self.metrics,
            interval_s=_RELIST_INTERVAL_S,
            health=self.health,
        )
        self.elector: leader.Elector | None = None
        self.stop = asyncio.Event()
        self.lost = False

    # --- small bridges ---------------------------------------------------------------------

    def _ordering(self, uid: str) -> queue_mod.Ordering:
        pod = self.cache.pending.get(uid)
        if pod is None:
            return queue_mod.Ordering()
        return queue_mod.Ordering(priority=pod.priority, created=pod.creation_timestamp)

    def _counters(self, key: model.PolicyKey) -> tuple[int, int]:
        c = self.scheduler.counters.get(key)
        return (c.scheduled, c.fallback) if c is not None else (0, 0)

    def _post_policy_event(
        self, key: model.PolicyKey, *, topic: str, event_type: str, **kwargs: Any
    ) -> None:
        """A warning holds until its topic resolves (re-sent meanwhile); Normal resolves."""
        ref = policies_mod.policy_ref(key, self.status.records.get(key))
        if event_type == "Warning":
            self.policy_events.warn(ref, topic=topic, **kwargs)
        else:
            self.policy_events.resolve(ref, topic=topic, **kwargs)

    def _keep_result(self, result: query_rounds.RefreshResult) -> policies_mod.Refreshed | None:
        # The policies' owner is made after the refresher (it wakes it, and tells it what
        # to forget); the first round answers once both exist.
        return self.policies.refreshed(result)

    def _mark_status(self, key: model.PolicyKey) -> None:
        self.status.mark(key)

    def _max_metric_ages(self) -> dict[str, float]:
        # Read on the HTTP thread at scrape time: dict() copies the map in one step.
        return {key: p.max_metric_age_s for key, p in dict(self.cache.policies).items()}

    def _fallback_changed(self, key: model.PolicyKey, active: bool, reason: str) -> None:
        if active:
            self._post_policy_event(
                key,
                topic="fallback",
                event_type="Warning",
                reason="FallbackActive",
                action="Schedule",
                message=f"pods are placed by the fallback strategy: {reason}",
            )
        else:
            self._post_policy_event(key, topic="fallback", event_type="Normal")
        self.status.mark(key)

    def _fail_open_changed(self, key: model.PolicyKey, metric: str, active: bool) -> None:
        """A policy's decisions start or stop leaving ``metric``'s learned estimate out."""
        if active:
            self._post_policy_event(
                key,
                topic=f"estimate/{metric}",
                event_type="Warning",
                reason=status_mod.FAIL_OPEN_REASON,
                action="Schedule",
                message=status_mod.fail_open_message(metric),
            )
        else:
            self._post_policy_event(key, topic=f"estimate/{metric}", event_type="Normal")
        self.status.mark(key)

    def _fail_open(self, key: model.PolicyKey) -> frozenset[str]:
        counters = self.scheduler.counters.get(key)
        return counters.fail_open if counters is not None else frozenset()

    # Kept for callers and tests that drive the watch translation directly.
    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.ingest.on_pod(event_type, body)

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.ingest.on_node(event_type, body)

    def on_policy(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.ingest.on_policy(event_type, body)

    # --- start-up ----------------------------------------------------------------------

    async def initial_sync(self) -> None:
        """The cluster's state (every informer's first LIST), then the policies and our
        pending pods: what the first cycles need. Scheduling no longer waits for kopf to
        list the whole cluster: kopf lists only our pending pods, again, harmlessly
        (resourceVersions dedupe)."""
        await self.cluster_state.synced()
        try:
            await informers_mod.list_policies(self.reads, self.ingest)
        except errors.ApiError as e:
            if e.status == 404:
                raise CrdMissingError(
                    f"the SchedulingPolicy CRD ({PLURAL}.{GROUP}) is not installed; "
                    "install it with `kubectl apply -f crds/` (the Helm chart does this)"
                ) from e
            raise
        sent = self.ingest.clock()
        await informers_mod.list_pending(
            self.reads, self.ingest, self.config.scheduler_names, page=self.config.list_page_size
        )
        self.reconciler.pending_listed(at=sent)

    async def apply_version_rules(self) -> None:
        """kube-scheduler's rules for the API server's version, before anything is listed:
        on the snapshots from now on, and the kinds those rules read watched too."""
        self.cache.rules = (await detect_rules(self.reads)).rules
        if self.cache.rules.dra_extended_resources:
            self.cluster_state.include(informers_mod.DEVICE_CLASSES)

    async def load_once(self) -> None:
        """Every kind listed once, without watches, then what ``initial_sync`` lists (the
        same path as start-up; ``metricsched explain``)."""
        try:
            await self.apply_version_rules()
            for reflector in self.cluster_state.reflectors:
                await reflector.list_once()
            await self.initial_sync()
        finally:
            await self.reads.close()

    async def _sync_until_done(self) -> None:
        """The initial sync, retried with backoff while the API cannot answer."""
        delay, cap = _SYNC_BACKOFF
        while True:
            try:
                await self.initial_sync()
                return
            except CrdMissingError:
                raise
            except Exception as e:
                if self.stop.is_set():
                    return  # asked to stop while the API could not answer: not an error
                logger.warning(
                    "initial sync failed (%s); retrying in %gs", errors.describe(e), delay
                )
                self.health.set_ready(False, f"initial sync failing: {errors.describe(e)}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=delay)
            delay = min(cap, delay * 2)

    async def _run_informers(self) -> None:
        """The informers' supervised task: the run started before the initial sync, then
        (after a failure) a new one, each kind listed again."""
        first, self._informers_first = self._informers_first, None
        if first is not None:
            await first
        else:
            await self.cluster_state.run(self.stop)

    # --- leadership ----------------------------------------------------------------------

    def _started_leading(self) -> None:
        logger.info("leading: scheduling, refreshing metrics, writing policy status")
        self.metrics.leader.set(1)
        self.status.start_leading()
        self.gates.leading.set()
        self.refresher.now.set()

    def _lost_leading(self) -> None:
        self.gates.leading.clear()  # no decision, move, metric round or status write more
        cancelled = self.scheduler.cancel_binds()
        self.metrics.leader.set(0)
        self.lost = True
        logger.error(
            "lost the lease: %d bind(s) in flight cancelled; exiting so a fresh process re-syncs",
            cancelled,
        )
        self.stop.set()

    async def _heartbeat(self) -> None:
        """Liveness is the event loop's health: this beats unless the loop is stuck."""
        while not self.stop.is_set():
            self.health.beat()
            await asyncio.sleep(1.0)

    # --- run ---------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        closer = endpoints.serve(
            host=self.config.bind_address,
            metrics_port=self.config.metrics_port,
            health_port=self.config.health_port,
            health=self.health,
            metrics=self.metrics,
            secure=metrics_auth.secure_serving(
                cert_dir=self.config.metrics_cert_dir, api=self.reviews, loop=loop
            )
            if self.config.metrics_secure
            else None,
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop.set)
        # The blocking calls (the Prometheus queries) run in threads; the Kubernetes API
        # calls no longer do (they are on the loop): a fixed pool, no longer sized by
        # ``--bind-concurrency``.
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=BLOCKING_THREADS, thread_name_prefix="api"
            )
        )
        self.metrics.set_metric_age_source(
            lambda: self.store.ages(time.time()), max_ages=self._max_metric_ages
        )
        self.recorder.start()
        self.policy_events.start()
        await self.apply_version_rules()
        heartbeat = asyncio.create_task(self._heartbeat(), name="heartbeat")
        ended: supervise.TaskEndedError | None = None
        self._informers_first = asyncio.create_task(
            self.cluster_state.run(self.stop), name="informers"
        )
        try:
            await self._sync_until_done()
            if self.stop.is_set():
                return
            logger.info(
                "cache synced: %d nodes, %d pending pods, %d policies",
                len(self.cache.nodes()),
                len(self.cache.pending),
                len(self.cache.policies),
            )
            self.queue.sync(self.cache.pending)
            specs = [
                supervise.Spec("informers", self._run_informers),
                supervise.Spec("scheduler", lambda: self.scheduler.run(self.stop)),
                supervise.Spec(
                    "refresher",
                    lambda: self.refresher.run(self.stop),
                ),
                supervise.Spec("status", lambda: self.status.run(self.stop)),
                supervise.Spec("kopf", lambda: self.kopf.run(self.stop)),
                supervise.Spec("reconciler", lambda: self.reconciler.run(self.stop)),
                supervise.Spec("shadow", lambda: self.shadow.run(self.stop)),
                supervise.Spec("rebalancer", lambda: self.rebalancer.run(self.stop)),
            ]
            if self.config.leader_elect:
                elector = leader.Elector(
                    # The transport of every other request (kube_http), with a pool of
                    # its own, made on the Lease's own loop.
                    functools.partial(kube_http.AsyncApi, self.api_client, limit=leader.POOL_SIZE),
                    namespace=self.config.leader_election_namespace,
                    name=self.config.leader_election_id,
                    identity=leader.default_identity(),
                )
                self.elector = elector
                self.gates.fence = elector.fence
                # Not restarted: an elector that ended unexpectedly ends the process (its
                # fence closes by itself meanwhile), as a lost lease does.
                specs.append(
                    supervise.Spec(
                        "leader-election",
                        # On its own thread and loop: the Lease keeps its deadline
                        # whatever the scheduling loop does.
                        lambda: elector.run_on_own_thread(
                            on_started=self._started_leading, on_lost=self._lost_leading
                        ),
                        restart=False,
                    )
                )
            else:
                self._started_leading()
            self.health.set_ready(True, "caches synced")
            try:
                await supervise.run_all(specs, stop=self.stop, on_restart=self._task_restarted)
            except supervise.TaskEndedError as e:
                ended = e
            if not self.lost:
                await self.scheduler.drain()
        finally:
            heartbeat.cancel()
            await self.recorder.aclose()
            await self.policy_events.aclose()
            await self.writes.close()
            closer.close()
            self.source.close()
            if self._informers_first is not None:
                self._informers_first.cancel()
            await self.reads.close()
            await self.reviews.close()
        if self.lost:
            raise LeadershipLostError("lost the scheduling lease")
        if ended is not None:
            raise ended

    def _task_restarted(self, name: str) -> None:
        self.metrics.task_restarts.labels(task=name).inc()


def _post(recorder: events.EventRecorder, ref: events.ObjectRef, **kwargs: Any) -> None:
    recorder.post(ref, **kwargs)


VERSION_TIMEOUT_S = 10.0


async def detect_rules(api: kube_http.AsyncApi) -> versions.Choice:
    """kube-scheduler's rules for the API server's version (its ``/version``), logged; a
    version outside the supported range, or one that cannot be read, gets the nearest
    supported rules and a warning in the log (never an Event: nothing to point it at)."""
    version: versions.ServerVersion | None = None
    problem = ""
    try:
        answer = await api.request(
            "GET", "/version", timeout=aiohttp.ClientTimeout(total=VERSION_TIMEOUT_S)
        )
        if answer.ok:
            version = parse.server_version_from_body(answer.json())
        else:
            problem = f"HTTP {answer.status}"
    except (*kube_http.TRANSPORT_ERRORS, ValueError) as e:  # ParseError, bad JSON
        problem = f"{type(e).__name__}: {e}"
    choice = versions.rules_for(version)
    if choice.warning:
        logger.warning("%s%s", choice.warning, f" ({problem})" if problem else "")
    else:
        assert version is not None
        logger.info(
            "API server %s: applying kube-scheduler %s's rules", version.name, choice.rules.name
        )
    return choice


async def run(config: Config) -> None:
    logs.configure("text" if config.log_format == "text" else "json", config.log_level.upper())
    api_client = kube.load_api_client(config.kubeconfig, pool_size=BLOCKING_THREADS)
    await Operator(config, api_client).run()
