"""Operator configuration: command-line flags with METRICSCHED_* environment equivalents.

Arguments, defaults and their validation live here, apart from the algorithm. A flag given
on the command line wins over its environment variable, which wins over the default.
Secrets are never held here, only the paths of the files that contain them.

Each flag is written once, as a record of ``FLAGS``: its name, variable, kind, default, help
and the words of docs/operating.md's flag table. argparse (``add_run_arguments``), the
environment lookup (``from_args``) and that table (``python -m metricsched.config
--docs-table``) are made from it; ``from_args`` adds only the rules between flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import re
import sys
from collections.abc import Mapping, Sequence

from metricsched.core import model, policy_fields, promql_guard


class ConfigError(ValueError):
    """A flag or environment value the operator cannot start with."""


# cAdvisor's series as kube-prometheus-stack scrapes them (container!="" drops the pod-level
# sums cAdvisor also exports; max by container drops a second scrape of the same series);
# the 5m window matches the recipes' node metric (instance:node_cpu_utilisation:rate5m), so
# that what a pod shows here is what the node's sample shows of it. Cores and bytes.
DEFAULT_POD_CPU_QUERY = (
    "sum by (namespace, pod) (max by (namespace, pod, container) "
    '(rate(container_cpu_usage_seconds_total{container!="", image!=""}[5m])))'
)
DEFAULT_POD_MEMORY_QUERY = (
    "sum by (namespace, pod) (max by (namespace, pod, container) "
    '(container_memory_working_set_bytes{container!="", image!=""}))'
)


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """What `metricsched run` was given; made by from_args, its defaults are FLAGS's."""

    kubeconfig: str | None
    scheduler_names: frozenset[str]
    prometheus_url: str
    prometheus_token_file: str | None
    prometheus_ca_file: str | None
    prometheus_verify_tls: bool
    query_timeout_s: float
    refresh_interval_s: float
    default_fallback: model.FallbackStrategy
    namespaces: tuple[str, ...]  # empty = all namespaces
    metrics_port: int
    health_port: int
    metrics_secure: bool  # HTTPS, TokenReview and SubjectAccessReview (edges.metrics_auth)
    metrics_cert_dir: str | None
    bind_address: str
    log_format: str
    log_level: str
    leader_elect: bool
    leader_election_namespace: str
    leader_election_id: str
    bind_concurrency: int
    events_per_second: float
    events_burst: int
    # Tenant safety (README "Security"): what namespaced policies may query, answer caps.
    query_rules: promql_guard.Rules
    max_result_series: int
    # Measured per-pod usage (the Measured estimate, README "Placement on real load"): the
    # operator's own queries, one answer per refresh each; "" turns one off.
    pod_usage_cpu_query: str
    pod_usage_memory_query: str
    pod_usage_max_pods: int
    # Rebalancing (README "Rebalancing"): evictions per minute across every policy at most.
    rebalance_eviction_budget: int
    pod_usage_settled_s: float  # a pod counts in its workload's quantile once bound so long
    max_result_bytes: int
    # Memory bounds (docs/operating.md "Memory"): stored metric values across every
    # policy (about 100 bytes each: metrics x nodes), and objects per page of a LIST.
    max_metric_values: int
    list_page_size: int
    # More Prometheus credentials (README "Operator flags"): extra headers such as a
    # Mimir/Cortex tenant's X-Scope-OrgID, basic auth, a client certificate. Only the
    # paths of the files holding secrets are kept here.
    prometheus_headers: tuple[tuple[str, str], ...]
    # (name, path): a header whose value is a secret (an API key), read from its file
    # (a mounted Secret) for every query.
    prometheus_header_files: tuple[tuple[str, str], ...]
    prometheus_username: str | None
    prometheus_password_file: str | None
    prometheus_cert_file: str | None
    prometheus_key_file: str | None
    # The namespace opt-in webhook (README "Opt a namespace in without editing workloads"):
    # served by kopf's own WebhookServer on every replica, leader or not.
    webhook_enabled: bool
    webhook_bind_address: str
    webhook_port: int
    webhook_cert_file: str | None
    webhook_key_file: str | None
    webhook_scheduler_name: str  # what it sets; one of scheduler_names
    # Never mutated: kube-system always, the operator's own namespace, and these.
    webhook_excluded_namespaces: tuple[str, ...]
    # The pod label whose value opts one pod in (ours) or leaves it to another install.
    webhook_pod_label: str


def _env_bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"not a boolean: {value!r} (use true or false)")


def _duration(text: str) -> float:
    try:
        return policy_fields.parse_duration(text)
    except ValueError as e:
        raise ConfigError(str(e)) from e


_BYTE_UNITS = {"": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def _byte_size(text: str, *, name: str) -> int:
    """``8Mi``, ``512Ki`` or a plain number of bytes."""
    raw = text.strip()
    unit = raw[-2:] if raw[-2:] in _BYTE_UNITS else ""
    number = raw[: len(raw) - len(unit)]
    if not number.isdigit() or int(number) == 0:
        raise ConfigError(f"METRICSCHED_{name}: not a positive size: {text!r} (e.g. 8Mi)")
    return int(number) * _BYTE_UNITS[unit]


# --- the flag table ----------------------------------------------------------------------


class Kind(enum.Enum):
    """How a flag is given and read; its variable is always text."""

    TEXT = "text"  # a string ("" for an optional one that is unset)
    CHOICE = "choice"  # one of Flag.choices
    INT = "int"  # an integer within lo..hi
    FLOAT = "float"
    DURATION = "duration"  # 15s, 2m
    SIZE = "size"  # 8Mi, 512Ki, bytes
    ON = "on"  # --flag alone sets true
    SWITCH = "switch"  # --flag / --no-flag
    LIST = "list"  # repeatable; the variable is comma-separated


@dataclasses.dataclass(frozen=True, slots=True)
class Flag:
    """One flag of `metricsched run`, written once.

    ``default`` is in the variable's own words (``"15s"``, ``"8080"``, ``"a,b"``); None when
    ``from_args`` derives it from another value. ``{default}`` in ``help`` stands for it, and
    in ``docs`` for it in backquotes. ``docs`` is the third column of the docs' flag table;
    a flag with ``joins_row_above`` shares the row above (``--metrics-port`` /
    ``--health-port``), its docs words (if any) joined to that row's with `` / ``.
    """

    flag: str
    env: str  # the variable without its METRICSCHED_ prefix
    kind: Kind
    default: str | None
    help: str
    docs: str
    dest: str = ""  # argparse's, when it is not the flag's name
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    lo: int = 0
    hi: int = 0
    joins_row_above: bool = False

    @property
    def variable(self) -> str:
        return f"METRICSCHED_{self.env}"

    @property
    def attr(self) -> str:
        return self.dest or self.flag.removeprefix("--").replace("-", "_")

    def help_text(self) -> str:
        suffix = ", comma-separated" if self.kind is Kind.LIST else ""
        return f"{self.help.replace('{default}', self.default or '')} [{self.variable}{suffix}]"

    def docs_text(self) -> str:
        return self.docs.replace("{default}", f"`{self.default}`")


FLAGS: tuple[Flag, ...] = (
    Flag(
        "--kubeconfig", "KUBECONFIG", Kind.TEXT, "",
        help="kubeconfig file (default: in-cluster, then ~/.kube/config)",
        docs="in-cluster, then `~/.kube/config`",
    ),
    Flag(
        "--scheduler-name", "SCHEDULER_NAMES", Kind.LIST, "metricsched",
        dest="scheduler_names", metavar="NAME",
        help="schedulerName to serve; repeatable (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--prometheus-url", "PROMETHEUS_URL", Kind.TEXT, "http://127.0.0.1:9090",
        help="Prometheus base URL (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--prometheus-token-file", "PROMETHEUS_TOKEN_FILE", Kind.TEXT, "",
        help="file with a bearer token for Prometheus",
        docs="none (never logged)",
    ),
    Flag(
        "--prometheus-ca-file", "PROMETHEUS_CA_FILE", Kind.TEXT, "",
        help="CA bundle for Prometheus TLS",
        docs="system CAs",
    ),
    Flag(
        "--prometheus-header", "PROMETHEUS_HEADERS", Kind.LIST, "",
        dest="prometheus_headers", metavar="NAME=VALUE",
        help="HTTP header sent with every Prometheus query, e.g. X-Scope-OrgID=team-a for a "
        "Mimir or Cortex tenant; repeatable; not for secrets (Authorization is refused: use "
        "the token or basic auth)",
        docs="none; sent with every query, e.g. `X-Scope-OrgID=team-a` for a Mimir or Cortex "
        "tenant. Not for secrets: `Authorization`, `Proxy-Authorization` and `Cookie` are "
        "refused",
    ),
    Flag(
        "--prometheus-header-file", "PROMETHEUS_HEADER_FILES", Kind.LIST, "",
        dest="prometheus_header_files", metavar="NAME=PATH",
        help="HTTP header sent with every Prometheus query whose value is read from PATH for "
        "every query and never logged: a secret such as an API key, from a mounted Secret; "
        "repeatable",
        docs="none; a header whose value is a secret (an API key), read from its file for "
        "every query (a rotated Secret is used at once) and never logged; chart: "
        "`prometheus.headerSecrets: [{header, secretName, key}]`, mounted as files. "
        "`Authorization` only without the token or basic auth",
    ),
    Flag(
        "--prometheus-username", "PROMETHEUS_USERNAME", Kind.TEXT, "",
        help="username for HTTP basic auth to Prometheus, with --prometheus-password-file",
        docs="none; HTTP basic auth (both or neither, not with the token file); the password "
        "is read from its file for every query and never logged",
    ),
    Flag(
        "--prometheus-password-file", "PROMETHEUS_PASSWORD_FILE", Kind.TEXT, "",
        help="file with the basic-auth password, read for every query, never logged",
        docs="", joins_row_above=True,
    ),
    Flag(
        "--prometheus-cert-file", "PROMETHEUS_CERT_FILE", Kind.TEXT, "",
        help="client certificate (PEM) presented to Prometheus over TLS, with "
        "--prometheus-key-file",
        docs="none; a client certificate and its unencrypted key (PEM) presented to an "
        "`https://` Prometheus; loaded by each new connection, never logged",
    ),
    Flag(
        "--prometheus-key-file", "PROMETHEUS_KEY_FILE", Kind.TEXT, "",
        help="private key (PEM, unencrypted) of the client certificate",
        docs="", joins_row_above=True,
    ),
    Flag(
        "--prometheus-insecure-skip-verify", "PROMETHEUS_INSECURE_SKIP_VERIFY", Kind.ON, "false",
        help="do not verify Prometheus's TLS certificate (default: verify)",
        docs="false (TLS verified)",
    ),
    Flag(
        "--query-timeout", "QUERY_TIMEOUT", Kind.DURATION, "5s",
        help="timeout of one PromQL query (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--refresh-interval", "REFRESH_INTERVAL", Kind.DURATION, "15s",
        help="how often metrics are re-queried (default: {default})",
        docs="{default} (one query per metric per interval, never per pod)",
    ),
    Flag(
        "--default-fallback", "DEFAULT_FALLBACK", Kind.CHOICE, "LeastAllocated",
        choices=tuple(s.value for s in model.FallbackStrategy),
        help="strategy of the default policy, for pods no SchedulingPolicy governs "
        "(default: {default})",
        docs="{default}",
    ),
    Flag(
        "--namespace", "NAMESPACES", Kind.LIST, "",
        dest="namespaces", metavar="NS",
        help="watch only these namespaces; repeatable (default: all)",
        docs="all namespaces; narrows which pods are scheduled and which policies apply (pods "
        "of every namespace are still read: they share the nodes' capacity)",
    ),
    Flag(
        "--metrics-port", "METRICS_PORT", Kind.INT, "8080", lo=0, hi=65535,
        help="port of /metrics (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--health-port", "HEALTH_PORT", Kind.INT, "8081", lo=0, hi=65535,
        help="port of /healthz and /readyz (default: {default})",
        docs="{default}", joins_row_above=True,
    ),
    Flag(
        "--metrics-secure", "METRICS_SECURE", Kind.SWITCH, "false",
        help="serve /metrics over HTTPS to callers whose bearer token may get /metrics "
        "(TokenReview, SubjectAccessReview), as controller-runtime does; the probes stay "
        "plain HTTP on the health port (default: off; the Helm chart turns it on)",
        docs="false (plain HTTP, for local runs); the chart sets true: `/metrics` over HTTPS "
        "for callers whose bearer token may `get /metrics` (TokenReview and "
        "SubjectAccessReview, answers cached 1 min / allowed 5 min / denied 30 s, as "
        "controller-runtime caches them); the probes stay plain HTTP on the health port, "
        "which must then differ",
    ),
    Flag(
        "--metrics-cert-dir", "METRICS_CERT_DIR", Kind.TEXT, "",
        help="directory with tls.crt and tls.key for /metrics, re-read when they change "
        "(default: a self-signed certificate made at start)",
        docs="none: a self-signed certificate made with `openssl` at start; else a directory "
        "with `tls.crt` and `tls.key`, re-read when they change",
    ),
    Flag(
        "--bind-address", "BIND_ADDRESS", Kind.TEXT, "0.0.0.0",
        help="address the metrics and health servers listen on (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--log-format", "LOG_FORMAT", Kind.CHOICE, "json", choices=("json", "text"),
        help="(default: {default})",
        docs="{default} (`text` for humans)",
    ),
    Flag(
        "--log-level", "LOG_LEVEL", Kind.CHOICE, "info",
        choices=("debug", "info", "warning", "error"),
        help="(default: {default})",
        docs="{default} (or `debug`, `warning`, `error`)",
    ),
    Flag(
        "--leader-elect", "LEADER_ELECT", Kind.ON, "false",
        help="run leader election on a Lease so only one replica schedules",
        docs="false (local runs); true runs Lease-based election (metricsched's own elector, "
        "fenced; the chart sets true by default)",
    ),
    Flag(
        "--leader-election-namespace", "LEADER_ELECTION_NAMESPACE", Kind.TEXT, None,
        help="namespace of the Lease (default: the pod's namespace, else default)",
        docs="the pod's namespace (`POD_NAMESPACE`), else `default`",
    ),
    Flag(
        "--leader-election-id", "LEADER_ELECTION_ID", Kind.TEXT, "metricsched",
        help="name of the Lease; replicas sharing it share one leader (default: {default})",
        docs="{default} (the Lease's name; the chart uses the release's full name)",
        joins_row_above=True,
    ),
    Flag(
        "--bind-concurrency", "BIND_CONCURRENCY", Kind.INT, "64", lo=1, hi=512,
        help="Binding requests in flight (default: {default})",
        docs="{default} Bindings in flight; the scheduler decides at most twice that ahead of "
        "their answers. More binds faster behind a slow API server and costs memory (16 / 64 "
        "/ 128: ≈ 122 / 140 / 160 MiB in a 1,000-node backlog, [performance.md]"
        "(performance.md))",
    ),
    Flag(
        "--events-per-second", "EVENTS_PER_SECOND", Kind.FLOAT, "50",
        help="event budget, token bucket (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--query-allowed-metric", "QUERY_ALLOWED_METRICS", Kind.LIST, "",
        dest="query_allowed_metrics", metavar="PATTERN",
        help="metric name (shell pattern, e.g. node_*) a policy's PromQL may select; "
        "repeatable; set = every selector must name an allowed metric exactly (default: any)",
        docs="any metric; set: every selector of a policy's PromQL must name an allowed "
        "metric (shell pattern, e.g. `node_*`) exactly. See [Security](security.md#security)",
    ),
    Flag(
        "--query-required-matcher", "QUERY_REQUIRED_MATCHERS", Kind.LIST, "",
        dest="query_required_matchers", metavar="LABEL=VALUE",
        help="label matcher every selector of a policy's PromQL must carry; {namespace} "
        "stands for the policy's namespace, e.g. namespace={namespace}; repeatable "
        "(default: none)",
        docs="none; `LABEL=VALUE` every selector must carry, `{namespace}` = the policy's "
        "namespace, e.g. `namespace={namespace}`",
    ),
    Flag(
        "--max-result-series", "MAX_RESULT_SERIES", Kind.INT, "10000", lo=1, hi=10**7,
        help="series one query may return; more is a ResultTooLarge error "
        "(default: {default})",
        docs="{default} series per answer; more is `ResultTooLarge`",
    ),
    Flag(
        "--pod-usage-cpu-query", "POD_USAGE_CPU_QUERY", Kind.TEXT, DEFAULT_POD_CPU_QUERY,
        help="PromQL giving each running pod's cpu use in cores, labelled namespace and pod "
        "(the Measured estimate; '' turns it off; default: cAdvisor's "
        "container_cpu_usage_seconds_total as a 5m rate)",
        docs="each running pod's cpu in cores, labelled `namespace` and `pod` (the Measured "
        "estimate); default: cAdvisor's `container_cpu_usage_seconds_total` as a 5m rate, "
        "`container!=\"\"`; `''` turns it off. Chart: `prometheus.podUsage.cpuQuery`",
    ),
    Flag(
        "--pod-usage-memory-query", "POD_USAGE_MEMORY_QUERY", Kind.TEXT,
        DEFAULT_POD_MEMORY_QUERY,
        help="PromQL giving each running pod's memory use in bytes, labelled namespace and "
        "pod ('' turns it off; default: cAdvisor's container_memory_working_set_bytes)",
        docs="each running pod's memory in bytes; default: cAdvisor's "
        "`container_memory_working_set_bytes`; `''` turns it off. Chart: "
        "`prometheus.podUsage.memoryQuery`",
    ),
    Flag(
        "--rebalance-eviction-budget", "REBALANCE_EVICTION_BUDGET", Kind.INT, "10",
        lo=0, hi=10_000,
        help="evictions per minute across every policy's spec.rebalance at most, whatever "
        "the policies' own limits (0 sends none; default: {default})",
        docs="{default} evictions per minute across every policy's `spec.rebalance`, whatever "
        "the policies' own limits (`0` sends none; DryRun is not counted). Chart: "
        "`rebalance.evictionBudget`",
    ),
    Flag(
        "--pod-usage-max-pods", "POD_USAGE_MAX_PODS", Kind.INT, "50000", lo=1, hi=10**7,
        help="pods one per-pod usage answer may hold; more is an error and the last answer "
        "is kept (default: {default})",
        docs="{default} pods per per-pod answer; more is an error "
        "(`metricsched_pod_usage_errors_total`) and the last answer is kept",
    ),
    Flag(
        "--pod-usage-settle-time", "POD_USAGE_SETTLE_TIME", Kind.DURATION, "2m",
        help="how long a pod must have been bound before its measured usage counts in its "
        "workload's estimate (its ramp-up and the query's rate window behind it; default: "
        "{default})",
        docs="{default}: a pod's measured usage counts in its workload's estimate once it has "
        "been bound this long (ramp-up and the query's rate window behind it); pods still "
        "starting would pull the quantile down",
    ),
    Flag(
        "--max-result-bytes", "MAX_RESULT_BYTES", Kind.SIZE, "8Mi",
        help="bytes one query's answer may take, read incrementally; more is a "
        "ResultTooLarge error (default: {default})",
        docs="{default} per answer, read incrementally; more is `ResultTooLarge`",
    ),
    Flag(
        "--max-metric-values", "MAX_METRIC_VALUES", Kind.INT, "1000000", lo=1, hi=10**9,
        help="metric values (one per metric per node) the operator stores across every "
        "policy, about 100 bytes each; an answer that would pass it is a ResultTooLarge "
        "error of its metrics (default: {default}, for the chart's 512Mi memory limit)",
        docs="{default} metric values (one per metric per node) stored across every policy, "
        "about 100 bytes each (about 100 MB: room in the chart's 512Mi limit); an answer "
        "that would pass it is `ResultTooLarge` for its metrics, which keep their last values "
        "to age out; an answer shared by several metrics counts once; first stored, first "
        "served. Chart: `prometheus.maxMetricValues`; `metricsched_metric_values` shows the use",
    ),
    Flag(
        "--list-page-size", "LIST_PAGE_SIZE", Kind.INT, "500", lo=1, hi=10_000,
        help="objects per page of the informers' LISTs; lower it when pods are large "
        "(each page is read and decoded whole), at the cost of more requests per LIST "
        "(default: {default})",
        docs="{default} objects per page of the operator's own LISTs (bound pods, nodes and "
        "the other informer kinds, our pending pods), 1-10000. Each page is read and decoded "
        "whole: 500 pods of ~1.4 MB (large env values) is ~0.7 GB raw, plus decoded. Lower it "
        "where pods are large (50: ~70 MB); a LIST then takes 10x the requests, each a round "
        "trip to the API server, so a re-list of 10,000 pods takes 200 instead of 20. kopf's "
        "own LIST of pending pods and policies keeps pages of 500. Chart: `listPageSize`",
    ),
    Flag(
        "--webhook", "WEBHOOK", Kind.SWITCH, "false",
        help="serve the admission webhook that sets spec.schedulerName on pods created in "
        "namespaces labelled metricsched.io/scheduler=<name> (default: off; the chart "
        "turns it on with webhook.enabled)",
        docs="false; true serves the namespace opt-in admission webhook (kopf's "
        "`WebhookServer`, on every replica, leader or not); see [Opt a namespace in without "
        "editing workloads](using.md#opt-a-namespace-in-without-editing-workloads)",
    ),
    Flag(
        "--webhook-bind-address", "WEBHOOK_BIND_ADDRESS", Kind.TEXT, "0.0.0.0",
        help="address the webhook listens on (default: {default})",
        docs="{default}",
    ),
    Flag(
        "--webhook-port", "WEBHOOK_PORT", Kind.INT, "9443", lo=1, hi=65535,
        help="HTTPS port of the webhook (default: {default})",
        docs="{default} (HTTPS)", joins_row_above=True,
    ),
    Flag(
        "--webhook-cert-file", "WEBHOOK_CERT_FILE", Kind.TEXT, "",
        help="serving certificate of the webhook (PEM), re-read when it changes",
        docs="none; required with `--webhook`: the serving certificate and its unencrypted "
        "key (PEM), re-read within a minute when they change",
    ),
    Flag(
        "--webhook-key-file", "WEBHOOK_KEY_FILE", Kind.TEXT, "",
        help="private key of that certificate (PEM, unencrypted)",
        docs="", joins_row_above=True,
    ),
    Flag(
        "--webhook-scheduler-name", "WEBHOOK_SCHEDULER_NAME", Kind.TEXT, None,
        help="the schedulerName the webhook sets, and the value of the namespace label it "
        "answers to; one of --scheduler-name (default: the first)",
        docs="the first `--scheduler-name`; the `schedulerName` the webhook sets (and the "
        "value of the namespace label the chart's `namespaceSelector` matches)",
    ),
    Flag(
        "--webhook-exclude-namespace", "WEBHOOK_EXCLUDED_NAMESPACES", Kind.LIST, "",
        dest="webhook_excluded_namespaces", metavar="NS",
        help="namespace whose pods the webhook never changes; repeatable; kube-system and "
        "the operator's own namespace (POD_NAMESPACE) always are",
        docs="none; namespaces whose pods the webhook never changes, besides `kube-system` "
        "and the operator's own (`POD_NAMESPACE`), which it never changes in any case",
    ),
    Flag(
        "--webhook-pod-label", "WEBHOOK_POD_LABEL", Kind.TEXT, "metricsched.io/scheduler",
        help="the pod label that opts one pod in when its value is the webhook's scheduler "
        "name, or leaves the pod to another install when it names another (default: "
        "{default})",
        docs="{default}; the pod label that opts a pod in when it names the webhook's "
        "scheduler, or leaves it to another install when it names another (the pod's label "
        "wins over its namespace's)",
    ),
)  # fmt: skip
_BY_ATTR = {f.attr: f for f in FLAGS}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `metricsched run`, from FLAGS; each has a METRICSCHED_<NAME> equivalent.

    No argparse default: a flag left out is None, so that from_args reads its variable."""
    for f in FLAGS:
        if f.kind is Kind.ON:
            parser.add_argument(
                f.flag, dest=f.attr, action="store_const", const=True, help=f.help_text()
            )
        elif f.kind is Kind.SWITCH:
            parser.add_argument(
                f.flag, dest=f.attr, action=argparse.BooleanOptionalAction, help=f.help_text()
            )
        elif f.kind is Kind.LIST:
            parser.add_argument(
                f.flag, dest=f.attr, action="append", metavar=f.metavar, help=f.help_text()
            )
        elif f.kind in (Kind.INT, Kind.FLOAT):
            parser.add_argument(
                f.flag,
                dest=f.attr,
                type=int if f.kind is Kind.INT else float,
                help=f.help_text(),
            )
        else:
            parser.add_argument(
                f.flag, dest=f.attr, choices=list(f.choices) or None, help=f.help_text()
            )


class _Reader:
    """The value of each flag: the flag's if given, else its variable's, else its default.
    Each method reads one kind of flag and raises the messages operators see."""

    def __init__(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        self._args = args
        self._env = env

    def _flag(self, attr: str, *kinds: Kind) -> Flag:
        f = _BY_ATTR[attr]
        if f.kind not in kinds:
            raise TypeError(f"{f.flag} is a {f.kind.value} flag")
        return f

    def _raw(self, f: Flag, default: str | None) -> str:
        value = getattr(self._args, f.attr, None)
        if value is not None:
            return str(value)
        fallback = f.default if default is None else default
        return self._env.get(f.variable, fallback or "")

    def default(self, attr: str) -> str:
        return _BY_ATTR[attr].default or ""

    def text(self, attr: str, *, default: str | None = None) -> str:
        """A TEXT or CHOICE flag; ``default`` for one whose default is derived."""
        return self._raw(self._flag(attr, Kind.TEXT, Kind.CHOICE), default)

    def optional(self, attr: str) -> str | None:
        """A TEXT flag that is unset when empty (a file, a name)."""
        return self.text(attr) or None

    def integer(self, attr: str) -> int:
        f = self._flag(attr, Kind.INT)
        raw = self._raw(f, None)
        try:
            value = int(raw)
        except ValueError as e:
            raise ConfigError(f"{f.variable}: not an integer: {raw!r}") from e
        if not f.lo <= value <= f.hi:
            raise ConfigError(f"{f.variable}: {value} is outside {f.lo}..{f.hi}")
        return value

    def number(self, attr: str) -> float:
        return float(self._raw(self._flag(attr, Kind.FLOAT), None))

    def duration(self, attr: str) -> float:
        return _duration(self._raw(self._flag(attr, Kind.DURATION), None))

    def size(self, attr: str) -> int:
        f = self._flag(attr, Kind.SIZE)
        return _byte_size(self._raw(f, None), name=f.env)

    def boolean(self, attr: str) -> bool:
        f = self._flag(attr, Kind.ON, Kind.SWITCH)
        value = getattr(self._args, f.attr, None)
        if value is not None:
            return bool(value)
        return _env_bool(self._env.get(f.variable, f.default or "false"))

    def items(self, attr: str) -> tuple[str, ...]:
        """A LIST flag: every flag given (each may hold commas), else the variable's."""
        f = self._flag(attr, Kind.LIST)
        value = getattr(self._args, f.attr, None)
        if value:
            items = [v for item in value for v in str(item).split(",")]
        elif self._env.get(f.variable):
            items = self._env[f.variable].split(",")
        else:
            items = (f.default or "").split(",")
        return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    read = _Reader(args, env)
    names = read.items("scheduler_names")
    fallback_raw = read.text("default_fallback")
    try:
        fallback = model.FallbackStrategy(fallback_raw)
    except ValueError as e:
        allowed = ", ".join(s.value for s in model.FallbackStrategy)
        raise ConfigError(f"unknown default fallback {fallback_raw!r}; use one of {allowed}") from e
    refresh = read.duration("refresh_interval")
    timeout = read.duration("query_timeout")
    if refresh < 1:
        raise ConfigError("refresh interval must be at least 1s")
    insecure = read.boolean("prometheus_insecure_skip_verify")
    secure = read.boolean("metrics_secure")
    leader = read.boolean("leader_elect")
    url = read.text("prometheus_url").rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"Prometheus URL must start with http:// or https://: {url!r}")
    metrics_port = read.integer("metrics_port")
    health_port = read.integer("health_port")
    if secure and metrics_port == health_port != 0:
        raise ConfigError(
            "with --metrics-secure the metrics and health ports must differ: "
            "the probes stay plain HTTP on a port of their own"
        )
    events_rate = read.number("events_per_second")
    try:
        rules = promql_guard.Rules(
            allowed_metrics=read.items("query_allowed_metrics"),
            required_matchers=tuple(
                promql_guard.parse_required_matcher(m)
                for m in read.items("query_required_matchers")
            ),
        )
    except promql_guard.RuleError as e:
        raise ConfigError(str(e)) from e
    if events_rate <= 0:
        raise ConfigError("events per second must be positive")
    headers = tuple(_header(h) for h in read.items("prometheus_headers"))
    token_file = read.optional("prometheus_token_file")
    username = read.optional("prometheus_username")
    header_files = tuple(
        _header_file(h, authorization_set=token_file is not None or username is not None)
        for h in read.items("prometheus_header_files")
    )
    _no_header_twice([name for name, _ in (*headers, *header_files)])
    password_file = read.optional("prometheus_password_file")
    _check_basic_auth(username, password_file, token_file=token_file)
    cert_file = read.optional("prometheus_cert_file")
    key_file = read.optional("prometheus_key_file")
    _check_client_certificate(cert_file, key_file, url=url)
    webhook = read.boolean("webhook")
    webhook_cert = read.optional("webhook_cert_file")
    webhook_key = read.optional("webhook_key_file")
    _check_webhook_certificate(webhook_cert, webhook_key, webhook=webhook)
    webhook_name = read.text("webhook_scheduler_name", default=names[0])
    if webhook_name not in names:
        raise ConfigError(
            f"the webhook's scheduler name {webhook_name!r} is not one this operator serves "
            f"({', '.join(names)}): pods given it would wait for nobody"
        )
    webhook_excluded = read.items("webhook_excluded_namespaces") + tuple(
        n for n in ("kube-system", env.get("POD_NAMESPACE", "")) if n
    )
    return Config(
        kubeconfig=read.optional("kubeconfig"),
        scheduler_names=frozenset(names),
        prometheus_url=url,
        prometheus_token_file=token_file,
        prometheus_ca_file=read.optional("prometheus_ca_file"),
        prometheus_verify_tls=not insecure,
        query_timeout_s=timeout,
        refresh_interval_s=refresh,
        default_fallback=fallback,
        namespaces=read.items("namespaces"),
        metrics_port=metrics_port,
        health_port=health_port,
        metrics_secure=secure,
        metrics_cert_dir=read.optional("metrics_cert_dir"),
        bind_address=read.text("bind_address"),
        log_format=read.text("log_format"),
        log_level=read.text("log_level"),
        leader_elect=leader,
        leader_election_namespace=read.text(
            "leader_election_namespace", default=env.get("POD_NAMESPACE", "default")
        ),
        leader_election_id=read.text("leader_election_id"),
        bind_concurrency=read.integer("bind_concurrency"),
        events_per_second=events_rate,
        events_burst=max(1, int(events_rate * 2)),
        query_rules=rules,
        max_result_series=read.integer("max_result_series"),
        pod_usage_cpu_query=read.text("pod_usage_cpu_query"),
        pod_usage_memory_query=read.text("pod_usage_memory_query"),
        pod_usage_settled_s=read.duration("pod_usage_settle_time"),
        pod_usage_max_pods=read.integer("pod_usage_max_pods"),
        rebalance_eviction_budget=read.integer("rebalance_eviction_budget"),
        max_result_bytes=read.size("max_result_bytes"),
        max_metric_values=read.integer("max_metric_values"),
        list_page_size=read.integer("list_page_size"),
        prometheus_headers=headers,
        prometheus_header_files=header_files,
        prometheus_username=username,
        prometheus_password_file=password_file,
        prometheus_cert_file=cert_file,
        prometheus_key_file=key_file,
        webhook_enabled=webhook,
        webhook_bind_address=read.text("webhook_bind_address"),
        webhook_port=read.integer("webhook_port"),
        webhook_cert_file=webhook_cert,
        webhook_key_file=webhook_key,
        webhook_scheduler_name=webhook_name,
        webhook_excluded_namespaces=tuple(dict.fromkeys(webhook_excluded)),
        # An empty label would match no pod: the default stands in for it.
        webhook_pod_label=read.text("webhook_pod_label") or read.default("webhook_pod_label"),
    )


def _check_basic_auth(
    username: str | None, password_file: str | None, *, token_file: str | None
) -> None:
    if (username is None) != (password_file is None):
        raise ConfigError("basic auth needs both a Prometheus username and a password file")
    if username is not None and token_file is not None:
        raise ConfigError(
            "set a Prometheus bearer token file or basic auth, not both: each is the "
            "Authorization header"
        )
    if username is not None and ":" in username:
        raise ConfigError("a basic-auth username cannot contain ':'")


def _check_client_certificate(cert_file: str | None, key_file: str | None, *, url: str) -> None:
    if (cert_file is None) != (key_file is None):
        raise ConfigError("a Prometheus client certificate needs both a cert file and a key file")
    if cert_file is not None and not url.startswith("https://"):
        raise ConfigError("a Prometheus client certificate needs an https:// Prometheus URL")


def _check_webhook_certificate(
    cert_file: str | None, key_file: str | None, *, webhook: bool
) -> None:
    if (cert_file is None) != (key_file is None):
        raise ConfigError("the webhook needs both a certificate file and a key file")
    if webhook and cert_file is None:
        raise ConfigError(
            "the webhook needs --webhook-cert-file and --webhook-key-file: the API server "
            "calls it over HTTPS only (the chart makes them, or cert-manager does)"
        )


# An HTTP field name (RFC 9110 token); credentials have flags of their own.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def _header(item: str) -> tuple[str, str]:
    """``NAME=VALUE`` of --prometheus-header; the value is never echoed in errors."""
    name, sep, value = item.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not _HEADER_NAME.match(name):
        raise ConfigError(
            f"METRICSCHED_PROMETHEUS_HEADERS: not NAME=VALUE with a valid header name: {name!r}"
        )
    if name.lower() in _CREDENTIAL_HEADERS:
        raise ConfigError(
            f"METRICSCHED_PROMETHEUS_HEADERS: {name} carries credentials; use "
            "--prometheus-token-file or --prometheus-username/--prometheus-password-file, "
            "whose secrets stay in files"
        )
    if any(c in value for c in "\r\n\0"):
        raise ConfigError(f"METRICSCHED_PROMETHEUS_HEADERS: the value of {name} has a line break")
    return name, value


def _header_file(item: str, *, authorization_set: bool) -> tuple[str, str]:
    """``NAME=PATH`` of --prometheus-header-file. Any header may carry a secret here (the
    value stays in its file), but not Authorization beside the token or basic auth, which
    set it too."""
    name, sep, path = item.partition("=")
    name, path = name.strip(), path.strip()
    if not sep or not path or not _HEADER_NAME.match(name):
        raise ConfigError(
            f"METRICSCHED_PROMETHEUS_HEADER_FILES: not NAME=PATH with a valid header name: {name!r}"
        )
    if authorization_set and name.lower() in ("authorization", "proxy-authorization"):
        raise ConfigError(
            f"METRICSCHED_PROMETHEUS_HEADER_FILES: {name} is set by the bearer token or basic "
            "auth already; use one of them"
        )
    return name, path


def _no_header_twice(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise ConfigError(
                f"Prometheus header {name} is given twice (--prometheus-header and "
                "--prometheus-header-file together name each header once)"
            )
        seen.add(name.lower())


# --- the docs' flag table ----------------------------------------------------------------

DOCS_BEGIN = "<!-- flags: made by `python -m metricsched.config --docs-table`; do not edit -->"
DOCS_END = "<!-- flags: end -->"


def _docs_flag(f: Flag) -> str:
    if f.kind is Kind.SWITCH:
        return f"`{f.flag}` / `--no-{f.flag.removeprefix('--')}`"
    if f.kind is Kind.LIST:
        return f"`{f.flag} {f.metavar}` (repeatable)"
    return f"`{f.flag}`"


def _docs_variables(row: Sequence[Flag]) -> str:
    """``METRICSCHED_A_B`` / ``..._C``: the words the row's variables share said once."""
    words = [f.variable.split("_") for f in row]
    shared = 0
    while all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    names = [f"`{row[0].variable}`"] + [f"`..._{'_'.join(w[shared:])}`" for w in words[1:]]
    suffix = " (comma-separated)" if row[0].kind is Kind.LIST else ""
    return " / ".join(names) + suffix


def docs_table() -> str:
    """docs/operating.md's flag table, one row per flag or per joined flags."""
    rows: list[list[Flag]] = []
    for f in FLAGS:
        if f.joins_row_above:
            rows[-1].append(f)
        else:
            rows.append([f])
    lines = ["| flag | env | default |", "|---|---|---|"]
    for row in rows:
        flags = " / ".join(_docs_flag(f) for f in row)
        words = " / ".join(f.docs_text() for f in row if f.docs)
        lines.append(f"| {flags} | {_docs_variables(row)} | {words} |")
    return "\n".join(lines) + "\n"


def with_docs_table(text: str) -> str:
    """``text`` (a Markdown file) with the table between its markers made anew."""
    begin = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    end = text.index(DOCS_END, begin)
    return f"{text[:begin]}\n{docs_table()}{text[end:]}"


def main(argv: Sequence[str] | None = None) -> int:
    """``--docs-table`` prints the table; ``--write FILE`` puts it between FILE's markers."""
    parser = argparse.ArgumentParser(prog="python -m metricsched.config")
    parser.add_argument("--docs-table", action="store_true", help="print the docs' flag table")
    parser.add_argument("--write", metavar="FILE", help="rewrite the table in FILE")
    args = parser.parse_args(argv)
    if args.write:
        with open(args.write, encoding="utf-8") as fh:
            text = fh.read()
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write(with_docs_table(text))
    elif args.docs_table:
        sys.stdout.write(docs_table())
    else:
        parser.print_usage()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
