"""One fault scenario: its namespace, nodes, pods, replicas, faults and verdict.

A scenario owns a namespace, a scheduler name (``faults-<namespace>``) and a set of kwok
nodes labelled ``metricsched.io/fault-set=<namespace>``; its pods select those nodes and
name that scheduler, so scenarios never see each other's pods or capacity. Nodes are sized
so the scenario's pods fill them to about 95 %: a pod bound twice over, or by two leaders
at once, shows up as an overcommitted node.

``Scenario.verify()`` records the invariant counts and recovery times to the results JSON
(rendered by ``python -m tests.faults.report``) and then asserts the four invariants:
0 pods lost, 0 overcommitted nodes, 0 Bindings by a non-holder, no crash loop; and a
fifth that the binder owes its users: no bound pod left with PodScheduled=False (a
Binding the server applied, reported as failed). It never asserts on time; recovery
times are reported only.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes

from hack import kwok_node
from tests.e2e.conftest import STATE, Cluster, wait_for

__all__ = ["STATE", "Scenario"]
from tests.faults import audit, checker, identity, replicas
from tests.faults import proxy as proxy_mod

FILL = 0.95
NODE_CPU_M = 2000
POD_CPU_M = 100
POD_MEMORY = "64Mi"
SET_LABEL = "metricsched.io/fault-set"
SETTLE_S = 120.0  # the "generous wait" before a pending pod counts as lost
AUDIT_FLUSH_S = 2.0  # a ResponseComplete audit line is written after the answer is sent


def results_path() -> Path:
    return Path(os.environ.get("METRICSCHED_FAULTS_RESULTS", STATE / "faults" / "results.json"))


def api_client(kubeconfig: str, *, pool: int = 32) -> Any:
    cfg = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    return kubernetes.client.ApiClient(cfg)


def nodes_for(pods: int, *, pod_cpu_m: int = POD_CPU_M, node_cpu_m: int = NODE_CPU_M) -> int:
    """How many nodes the pods fill to about FILL of their cpu."""
    per_node = node_cpu_m // pod_cpu_m
    return max(1, math.ceil(pods / (per_node * FILL)))


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.5) -> bool:
    """Poll ``check`` until it is true (True) or ``timeout`` passes (False, no failure):
    for a scenario that records what it saw and fails on it in ``verify``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return bool(check())


def retry(fn: Callable[[], Any], *, attempts: int = 60, pause: float = 1.0) -> Any:
    """The harness's own API calls ride out the outages it causes (409 = done)."""
    for i in range(attempts):
        try:
            return fn()
        except kubernetes.client.exceptions.ApiException as e:
            if e.status == 409:
                return None
            if (e.status < 500 and e.status != 429) or i == attempts - 1:
                raise
        except Exception:
            if i == attempts - 1:
                raise
        time.sleep(pause)
    return None


class Scenario:
    def __init__(self, cluster: Cluster, namespace: str, *, key: str, title: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.key = key
        self.title = title
        self.api = api_client(cluster.kubeconfig)
        self.core: Any = kubernetes.client.CoreV1Api(self.api)
        self.scheduler = f"faults-{namespace}"
        self.lease = "metricsched"
        self.replicas: list[replicas.Replica] = []
        self.faults: list[replicas.FaultWindow] = []
        self.nodes: list[str] = []
        self.created: list[str] = []
        self.deleted: set[str] = set()
        self.unschedulable: set[str] = set()
        self.extra: dict[str, Any] = {}
        self.recovery: dict[str, float | None] = {}
        self.leader_lost: list[tuple[float, str | None]] = []  # (when, holder then)
        self.started = datetime.datetime.now(datetime.UTC)
        self.watch = checker.PodWatch(self.api, namespace).start()
        self._logs = STATE / "logs" / "faults"
        self._logs.mkdir(parents=True, exist_ok=True)

    # --- nodes and pods ----------------------------------------------------------------

    def add_nodes(
        self, count: int, *, cpu_m: int = NODE_CPU_M, memory: str = "16Gi", pods: int = 110
    ) -> list[str]:
        start = len(self.nodes)
        names = [f"{self.namespace}-n{start + i}" for i in range(count)]
        capacity = {"cpu": f"{cpu_m}m", "memory": memory, "pods": str(pods)}

        def create(name: str) -> None:
            body = kwok_node.Node(
                name=name,
                capacity=capacity,
                labels={"kubernetes.io/os": "linux", SET_LABEL: self.namespace},
            ).body()
            retry(lambda: self.core.create_node(body))

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, names))
        self.nodes.extend(names)
        wait_for(f"{count} Ready nodes", lambda: self._ready_nodes() >= len(self.nodes), timeout=90)
        return names

    def _ready_nodes(self) -> int:
        n = 0
        for node in checker.list_nodes(self.api, selector=f"{SET_LABEL}={self.namespace}"):
            for c in (node.get("status") or {}).get("conditions") or []:
                n += c.get("type") == "Ready" and c.get("status") == "True"
        return n

    def pod_body(
        self, name: str, *, cpu_m: int = POD_CPU_M, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "schedulerName": self.scheduler,
                "nodeSelector": {SET_LABEL: self.namespace},
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.invalid/app:1",
                        "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": POD_MEMORY}},
                    }
                ],
            },
        }

    def create_pods(
        self,
        prefix: str,
        count: int,
        *,
        cpu_m: int = POD_CPU_M,
        unschedulable: bool = False,
        labels: dict[str, str] | None = None,
        threads: int = 8,
    ) -> list[str]:
        """Create pods (retrying through outages); unschedulable ones fit no node."""
        start = sum(1 for n in self.created if n.startswith(prefix + "-"))
        names = [f"{prefix}-{start + i}" for i in range(count)]

        def create(name: str) -> None:
            body = self.pod_body(name, cpu_m=cpu_m, labels=labels)
            retry(lambda: self.core.create_namespaced_pod(self.namespace, body))

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, names))
        self.created.extend(names)
        if unschedulable:
            self.unschedulable.update(names)
        return names

    def arrive(self, prefix: str, count: int, *, over_s: float = 30.0, waves: int = 10) -> None:
        """Pods arriving in waves over ``over_s``: long enough after a fault for a leader
        that silently stopped renewing to be replaced, so two binders would both be seen."""
        per = max(1, count // waves)
        for i in range(waves):
            self.create_pods(prefix, per if i < waves - 1 else count - per * (waves - 1))
            if i < waves - 1:
                time.sleep(over_s / waves)

    def bind_elsewhere(self, name: str, node: str, *, cpu_m: int) -> None:
        """A pod of another scheduler, bound at creation (``spec.nodeName``, as
        default-scheduler's Binding would leave it): its requests count on ``node``, and
        the operator learns of it only through its watch of bound pods. Not in
        ``created``: the operator never places it."""
        body = self.pod_body(name, cpu_m=cpu_m)
        body["spec"]["schedulerName"] = "default-scheduler"
        body["spec"]["nodeName"] = node
        body["spec"].pop("nodeSelector")
        retry(functools.partial(self.core.create_namespaced_pod, self.namespace, body))

    def delete_pods(self, names: list[str]) -> None:
        for name in names:
            retry(functools.partial(self._delete_pod, name))
            self.deleted.add(name)

    def _delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def delete_nodes(self, names: list[str]) -> None:
        for name in names:
            retry(functools.partial(self.core.delete_node, name))
            self.nodes.remove(name)

    def bound(self) -> set[str]:
        return {
            p["metadata"]["name"]
            for p in checker.list_all(self.api, namespace=self.namespace)
            if (p.get("spec") or {}).get("nodeName")
        }

    def wait_bound_count(self, n: int, *, timeout: float = SETTLE_S) -> bool:
        """Wait until the checker has seen n pods bound; False (no failure) on timeout.

        A scenario goes on either way: verify() counts the pods that never bound as lost.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.watch.bound_at) >= n:
                return True
            time.sleep(0.5)
        return False

    # --- replicas ----------------------------------------------------------------------

    def start_replicas(
        self,
        count: int = 2,
        *,
        refresh: str = "5s",
        upstream: str = "api",
        prometheus_url: str | None = None,
        extra: list[str] | None = None,
        memory_limit_bytes: int | None = None,
        server_name: str = "127.0.0.1",
        ca_file: str | None = None,
    ) -> None:
        """Replicas r0..r(count-1), each with its identity and its proxy; wait for a leader.

        ``server_name``: the name the replicas call their proxy by (TLS checks the API
        server's certificate for it); ``ca_file``: a CA file the replicas read from disk
        (by path, not copied into their kubeconfig), instead of the cluster's CA.

        ``prometheus_url``: where the replicas query (e.g. a fault proxy in front of
        Prometheus); ``extra``: more operator flags; ``memory_limit_bytes``: each replica
        in a memory cgroup with that limit, where the machine allows (replicas.Replica)."""
        identity.ensure_cluster_role(self.api)
        host, port = self.cluster.api_client.configuration.host.removeprefix("https://").rsplit(
            ":", 1
        )
        for i in range(count):
            name = f"r{i}"
            token = identity.create_replica_identity(
                self.api, namespace=self.namespace, account=name, lease_name=self.lease
            )
            px = proxy_mod.FaultProxy(host, int(port), seed=i).start()
            kubeconfig = identity.write_kubeconfig(
                self._logs / f"{self.namespace}-{name}.kubeconfig",
                server=f"https://{server_name}:{px.port}",
                ca_file=ca_file or str(STATE / "pki" / "ca.crt"),
                token=token,
                embed_ca=ca_file is None,
            )
            metrics_port, health_port = replicas.free_port(), replicas.free_port()
            rep = replicas.Replica(
                name=name,
                argv=replicas.operator_argv(
                    kubeconfig=kubeconfig,
                    prometheus_url=prometheus_url or self.cluster.prometheus_url,
                    scheduler=self.scheduler,
                    lease_namespace=self.namespace,
                    lease_name=self.lease,
                    metrics_port=metrics_port,
                    health_port=health_port,
                    refresh_interval=refresh,
                    extra=extra,
                ),
                proxy=px,
                log=self._logs / f"{self.namespace}-{name}.log",
                health_port=health_port,
                metrics_port=metrics_port,
                memory_limit_bytes=memory_limit_bytes,
            )
            self.replicas.append(rep)
            rep.start()
        self.wait_leader()
        for rep in self.replicas:
            wait_for(f"replica {rep.name} ready", rep.ready, timeout=60)

    def users(self) -> frozenset[str]:
        return frozenset(identity.user_of(self.namespace, r.name) for r in self.replicas)

    def holder(self) -> str | None:
        with contextlib.suppress(Exception):
            coordination: Any = kubernetes.client.CoordinationV1Api(self.api)
            lease = coordination.read_namespaced_lease(
                self.lease, self.namespace, _request_timeout=5
            )
            return str(lease.spec.holder_identity or "") or None
        return None

    def leader(self) -> replicas.Replica:
        h = self.holder() or ""
        for r in self.replicas:
            if h.startswith(r.name + "_"):
                return r
        raise AssertionError(f"no replica holds the Lease (holder {h!r})")

    def wait_leader(
        self, *, other_than: replicas.Replica | None = None, timeout: float = 90
    ) -> replicas.Replica:
        def check() -> replicas.Replica | None:
            h = self.holder() or ""
            for r in self.replicas:
                if h.startswith(r.name + "_") and r is not other_than:
                    return r
            return None

        return wait_for("a Lease holder", check, timeout=timeout, interval=0.5)

    # --- faults ------------------------------------------------------------------------

    @contextlib.contextmanager
    def fault(self, what: str) -> Iterator[replicas.FaultWindow]:
        """Mark a fault in effect: exits during it (and shortly after) are explained."""
        window = replicas.FaultWindow(start=time.time())
        self.faults.append(window)
        try:
            yield window
        finally:
            window.end = time.time()
            self.extra.setdefault("faults", []).append(f"{what}: {window.end - window.start:.1f}s")

    def takeover_after(self, t: float, *, old_holder: str | None) -> float | None:
        """Seconds from t to the first Lease write naming another holder (audit log)."""
        since = datetime.datetime.fromtimestamp(t, datetime.UTC)
        for w in audit.lease_writes(self._audit(), namespace=self.namespace, name=self.lease):
            if w.time >= since and w.holder and w.holder != old_holder:
                return (w.time - since).total_seconds()
        return None

    def lost_leader(self, at: float, holder: str | None) -> None:
        """Note that the leader was lost at ``at``: verify() reports the takeover time."""
        self.leader_lost.append((at, holder))

    def wait_leader_change(self, old_holder: str | None, *, timeout: float = 90) -> str:
        """Wait until the Lease names a holder other than old_holder."""
        return str(
            wait_for(
                "a new Lease holder",
                lambda: (h := self.holder()) and h != old_holder and h,
                timeout=timeout,
                interval=0.25,
            )
        )

    def _audit(self) -> list[audit.Entry]:
        return list(audit.since(audit.read(STATE / "audit"), self.started))

    # --- verdict -----------------------------------------------------------------------

    def verify(
        self, *, recover_from: float | None = None, outage: bool = False, settle_s: float = SETTLE_S
    ) -> None:
        """Wait for the schedulable pods, record everything, assert the four invariants.

        recover_from: when the fault ended (first bind and drain are measured from it);
        outage: the fault was an API outage, so the report holds the first bind after it
        against its target.
        """
        expected = set(self.created) - self.deleted - self.unschedulable
        checker.wait_all_bound(self.api, self.namespace, expected, timeout=settle_s)
        time.sleep(AUDIT_FLUSH_S)
        if self.leader_lost:
            takeovers = [self.takeover_after(t, old_holder=h) for t, h in self.leader_lost]
            self.recovery["takeover_s"] = max((t for t in takeovers if t is not None), default=None)
            self.extra["takeovers_s"] = takeovers
        if recover_from is not None:
            first = self.watch.first_bind_after(recover_from)
            last = self.watch.last_bind(expected)
            self.recovery["first_bind_s"] = first
            self.recovery["drained_s"] = (
                max(0.0, last - recover_from)
                if last is not None and expected <= set(self.watch.bound_at)
                else None
            )
        pods = checker.list_all(self.api)
        mine = [p for p in pods if p["metadata"].get("namespace") == self.namespace]
        nodes = checker.list_nodes(self.api)
        node_names = {n["metadata"]["name"] for n in nodes}
        lost = checker.lost_pods(
            mine,
            created=self.created,
            deleted=self.deleted,
            unschedulable=self.unschedulable,
            node_names=node_names,
            seen_on=self.watch.node_of,
        )
        marked = checker.bound_but_marked_unschedulable(mine)
        over = checker.overcommitted(
            [
                n
                for n in nodes
                if (n["metadata"].get("labels") or {}).get(SET_LABEL) == self.namespace
            ],
            pods,
        )
        entries = self._audit()
        violations = audit.non_holder_writes(
            entries,
            lease_namespace=self.namespace,
            lease_name=self.lease,
            resource="pods/binding",
            users=self.users(),
            namespace=self.namespace,
            bound=frozenset(
                p["metadata"]["name"] for p in mine if (p.get("spec") or {}).get("nodeName")
            ),
        )
        loops = {
            r.name: len(r.unexplained_exits(self.faults))
            for r in self.replicas
            if r.unexplained_exits(self.faults)
        }
        record = {
            "title": self.title,
            "when": self.started.isoformat(timespec="seconds"),
            "pods": len(self.created),
            "unschedulable_by_design": len(self.unschedulable),
            "nodes": len(self.nodes),
            "fill": self._fill(),
            "invariants": {
                "pods_lost": len(lost),
                "overcommitted_nodes": len({o.node for o in over}),
                "non_holder_bindings": len(violations),
                "crash_loops": sum(loops.values()),
                "bound_marked_unschedulable": len(marked),
            },
            "recovery": self.recovery,
            "outage": outage,
            "bindings_by_replica": audit.count(
                entries, resource="pods/binding", users=self.users(), namespace=self.namespace
            ),
            "exits": {r.name: [dataclasses.asdict(e) for e in r.exits] for r in self.replicas},
            **self.extra,
        }
        record["passed"] = not (
            lost or over or violations or loops or marked
        ) and not self.extra.get("failures")
        self._save(record)
        problems = []
        if lost:
            problems.append(f"{len(lost)} pods lost, e.g. {lost[:5]}")
        if over:
            problems.append(f"{len(over)} overcommits, e.g. {over[:5]}")
        if violations:
            problems.append(
                f"{len(violations)} Bindings by a non-holder, e.g. "
                + "; ".join(
                    f"{v.entry.user} bound {v.entry.name} at {v.entry.time}: {v.why}"
                    for v in violations[:3]
                )
            )
        if loops:
            problems.append(f"crash loop (unexplained exits per replica): {loops}")
        if marked:
            problems.append(
                f"{len(marked)} bound pods marked PodScheduled=False, e.g. {marked[:3]}"
            )
        problems.extend(self.extra.get("failures", []))
        assert not problems, f"{self.key}: " + " | ".join(problems)

    def _fill(self) -> float:
        cap = len(self.nodes) * NODE_CPU_M
        used = (len(set(self.created) - self.deleted - self.unschedulable)) * POD_CPU_M
        return round(used / cap, 3) if cap else 0.0

    def _save(self, record: dict[str, Any]) -> None:
        path = results_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text())
        data[self.key] = record
        path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")

    # --- teardown ----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the replicas; delete the scenario's cluster-scoped objects and namespace
        (retrying: a scenario may end while kube-apiserver is still coming back)."""
        for r in self.replicas:
            r.stop()
        self.watch.stop()
        for cleanup in (
            functools.partial(identity.delete_cluster_bindings, self.api, self.namespace),
            functools.partial(
                self.core.delete_collection_node, label_selector=f"{SET_LABEL}={self.namespace}"
            ),
            functools.partial(self.core.delete_namespace, self.namespace),
        ):
            with contextlib.suppress(Exception):
                retry(cleanup, attempts=30)
