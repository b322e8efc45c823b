"""Operator configuration: command-line flags with METRICSCHED_* environment equivalents.

Arguments, defaults and their validation live here, apart from the algorithm. A flag given
on the command line wins over its environment variable, which wins over the default.
Secrets are never held here, only the paths of the files that contain them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence

from metricsched.core import model, policy, promql_guard


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
    query_rules: promql_guard.Rules = dataclasses.field(default_factory=promql_guard.Rules)
    max_result_series: int = 10_000
    # Measured per-pod usage (the Measured estimate, README "Placement on real load"): the
    # operator's own queries, one answer per refresh each; "" turns one off.
    pod_usage_cpu_query: str = DEFAULT_POD_CPU_QUERY
    pod_usage_memory_query: str = DEFAULT_POD_MEMORY_QUERY
    pod_usage_max_pods: int = 50_000
    # Rebalancing (README "Rebalancing"): evictions per minute across every policy at most.
    rebalance_eviction_budget: int = 10
    pod_usage_settled_s: float = 120.0  # a pod counts in its workload's quantile once bound so long
    max_result_bytes: int = 8 * 1024 * 1024
    # Memory bounds (docs/operating.md "Memory"): stored metric values across every
    # policy (about 100 bytes each: metrics x nodes), and objects per page of a LIST.
    max_metric_values: int = 1_000_000
    list_page_size: int = 500
    # More Prometheus credentials (README "Operator flags"): extra headers such as a
    # Mimir/Cortex tenant's X-Scope-OrgID, basic auth, a client certificate. Only the
    # paths of the files holding secrets are kept here.
    prometheus_headers: tuple[tuple[str, str], ...] = ()
    # (name, path): a header whose value is a secret (an API key), read from its file
    # (a mounted Secret) for every query.
    prometheus_header_files: tuple[tuple[str, str], ...] = ()
    prometheus_username: str | None = None
    prometheus_password_file: str | None = None
    prometheus_cert_file: str | None = None
    prometheus_key_file: str | None = None
    # The namespace opt-in webhook (README "Opt a namespace in without editing workloads"):
    # served by kopf's own WebhookServer on every replica, leader or not.
    webhook_enabled: bool = False
    webhook_bind_address: str = "0.0.0.0"
    webhook_port: int = 9443
    webhook_cert_file: str | None = None
    webhook_key_file: str | None = None
    webhook_scheduler_name: str = "metricsched"  # what it sets; one of scheduler_names
    # Never mutated: kube-system always, the operator's own namespace, and these.
    webhook_excluded_namespaces: tuple[str, ...] = ()
    # The pod label whose value opts one pod in (ours) or leaves it to another install.
    webhook_pod_label: str = "metricsched.io/scheduler"


def _env_bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"not a boolean: {value!r} (use true or false)")


def _duration(text: str) -> float:
    try:
        return policy.parse_duration(text)
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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `metricsched run`; each has a METRICSCHED_<NAME> environment equivalent."""
    a = parser.add_argument
    a(
        "--kubeconfig",
        help="kubeconfig file (default: in-cluster, then ~/.kube/config) [METRICSCHED_KUBECONFIG]",
    )
    a(
        "--scheduler-name",
        action="append",
        dest="scheduler_names",
        metavar="NAME",
        help="schedulerName to serve; repeatable (default: metricsched) "
        "[METRICSCHED_SCHEDULER_NAMES, comma-separated]",
    )
    a(
        "--prometheus-url",
        help="Prometheus base URL (default: http://127.0.0.1:9090) [METRICSCHED_PROMETHEUS_URL]",
    )
    a(
        "--prometheus-token-file",
        help="file with a bearer token for Prometheus [METRICSCHED_PROMETHEUS_TOKEN_FILE]",
    )
    a("--prometheus-ca-file", help="CA bundle for Prometheus TLS [METRICSCHED_PROMETHEUS_CA_FILE]")
    a(
        "--prometheus-header",
        action="append",
        dest="prometheus_headers",
        metavar="NAME=VALUE",
        help="HTTP header sent with every Prometheus query, e.g. X-Scope-OrgID=team-a for a "
        "Mimir or Cortex tenant; repeatable; not for secrets (Authorization is refused: use "
        "the token or basic auth) [METRICSCHED_PROMETHEUS_HEADERS, comma-separated]",
    )
    a(
        "--prometheus-header-file",
        action="append",
        dest="prometheus_header_files",
        metavar="NAME=PATH",
        help="HTTP header sent with every Prometheus query whose value is read from PATH for "
        "every query and never logged: a secret such as an API key, from a mounted Secret; "
        "repeatable [METRICSCHED_PROMETHEUS_HEADER_FILES, comma-separated]",
    )
    a(
        "--prometheus-username",
        help="username for HTTP basic auth to Prometheus, with --prometheus-password-file "
        "[METRICSCHED_PROMETHEUS_USERNAME]",
    )
    a(
        "--prometheus-password-file",
        help="file with the basic-auth password, read for every query, never logged "
        "[METRICSCHED_PROMETHEUS_PASSWORD_FILE]",
    )
    a(
        "--prometheus-cert-file",
        help="client certificate (PEM) presented to Prometheus over TLS, with "
        "--prometheus-key-file [METRICSCHED_PROMETHEUS_CERT_FILE]",
    )
    a(
        "--prometheus-key-file",
        help="private key (PEM, unencrypted) of the client certificate "
        "[METRICSCHED_PROMETHEUS_KEY_FILE]",
    )
    a(
        "--prometheus-insecure-skip-verify",
        action="store_const",
        const=True,
        default=None,
        help="do not verify Prometheus's TLS certificate (default: verify) "
        "[METRICSCHED_PROMETHEUS_INSECURE_SKIP_VERIFY]",
    )
    a(
        "--query-timeout",
        help="timeout of one PromQL query (default: 5s) [METRICSCHED_QUERY_TIMEOUT]",
    )
    a(
        "--refresh-interval",
        help="how often metrics are re-queried (default: 15s) [METRICSCHED_REFRESH_INTERVAL]",
    )
    a(
        "--default-fallback",
        choices=[s.value for s in model.FallbackStrategy],
        help="strategy of the default policy, for pods no SchedulingPolicy governs "
        "(default: LeastAllocated) [METRICSCHED_DEFAULT_FALLBACK]",
    )
    a(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="watch only these namespaces; repeatable (default: all) [METRICSCHED_NAMESPACES]",
    )
    a(
        "--metrics-port",
        type=int,
        help="port of /metrics (default: 8080) [METRICSCHED_METRICS_PORT]",
    )
    a(
        "--health-port",
        type=int,
        help="port of /healthz and /readyz (default: 8081) [METRICSCHED_HEALTH_PORT]",
    )
    a(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve /metrics over HTTPS to callers whose bearer token may get /metrics "
        "(TokenReview, SubjectAccessReview), as controller-runtime does; the probes stay "
        "plain HTTP on the health port (default: off; the Helm chart turns it on) "
        "[METRICSCHED_METRICS_SECURE]",
    )
    a(
        "--metrics-cert-dir",
        help="directory with tls.crt and tls.key for /metrics, re-read when they change "
        "(default: a self-signed certificate made at start) [METRICSCHED_METRICS_CERT_DIR]",
    )
    a(
        "--bind-address",
        help="address the metrics and health servers listen on "
        "(default: 0.0.0.0) [METRICSCHED_BIND_ADDRESS]",
    )
    a("--log-format", choices=["json", "text"], help="(default: json) [METRICSCHED_LOG_FORMAT]")
    a(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="(default: info) [METRICSCHED_LOG_LEVEL]",
    )
    a(
        "--leader-elect",
        action="store_const",
        const=True,
        default=None,
        help="run leader election on a Lease so only one replica schedules "
        "[METRICSCHED_LEADER_ELECT]",
    )
    a(
        "--leader-election-namespace",
        help="namespace of the Lease (default: the pod's "
        "namespace, else default) [METRICSCHED_LEADER_ELECTION_NAMESPACE]",
    )
    a(
        "--leader-election-id",
        help="name of the Lease; replicas sharing it share one leader "
        "(default: metricsched) [METRICSCHED_LEADER_ELECTION_ID]",
    )
    a(
        "--bind-concurrency",
        type=int,
        help="Binding requests in flight (default: 64) [METRICSCHED_BIND_CONCURRENCY]",
    )
    a(
        "--events-per-second",
        type=float,
        help="event budget, token bucket (default: 50) [METRICSCHED_EVENTS_PER_SECOND]",
    )
    a(
        "--query-allowed-metric",
        action="append",
        dest="query_allowed_metrics",
        metavar="PATTERN",
        help="metric name (shell pattern, e.g. node_*) a policy's PromQL may select; "
        "repeatable; set = every selector must name an allowed metric exactly (default: any) "
        "[METRICSCHED_QUERY_ALLOWED_METRICS, comma-separated]",
    )
    a(
        "--query-required-matcher",
        action="append",
        dest="query_required_matchers",
        metavar="LABEL=VALUE",
        help="label matcher every selector of a policy's PromQL must carry; {namespace} "
        "stands for the policy's namespace, e.g. namespace={namespace}; repeatable "
        "(default: none) [METRICSCHED_QUERY_REQUIRED_MATCHERS, comma-separated]",
    )
    a(
        "--max-result-series",
        type=int,
        help="series one query may return; more is a ResultTooLarge error "
        "(default: 10000) [METRICSCHED_MAX_RESULT_SERIES]",
    )
    a(
        "--pod-usage-cpu-query",
        help="PromQL giving each running pod's cpu use in cores, labelled namespace and pod "
        "(the Measured estimate; '' turns it off; default: cAdvisor's "
        "container_cpu_usage_seconds_total as a 5m rate) [METRICSCHED_POD_USAGE_CPU_QUERY]",
    )
    a(
        "--pod-usage-memory-query",
        help="PromQL giving each running pod's memory use in bytes, labelled namespace and "
        "pod ('' turns it off; default: cAdvisor's container_memory_working_set_bytes) "
        "[METRICSCHED_POD_USAGE_MEMORY_QUERY]",
    )
    a(
        "--rebalance-eviction-budget",
        type=int,
        help="evictions per minute across every policy's spec.rebalance at most, whatever "
        "the policies' own limits (0: none; default: 10) [METRICSCHED_REBALANCE_EVICTION_BUDGET]",
    )
    a(
        "--pod-usage-max-pods",
        type=int,
        help="pods one per-pod usage answer may hold; more is an error and the last answer "
        "is kept (default: 50000) [METRICSCHED_POD_USAGE_MAX_PODS]",
    )
    a(
        "--pod-usage-settle-time",
        help="how long a pod must have been bound before its measured usage counts in its "
        "workload's estimate (its ramp-up and the query's rate window behind it; default: 2m) "
        "[METRICSCHED_POD_USAGE_SETTLE_TIME]",
    )
    a(
        "--max-result-bytes",
        help="bytes one query's answer may take, read incrementally; more is a "
        "ResultTooLarge error (default: 8Mi) [METRICSCHED_MAX_RESULT_BYTES]",
    )
    a(
        "--max-metric-values",
        type=int,
        help="metric values (one per metric per node) the operator stores across every "
        "policy, about 100 bytes each; an answer that would pass it is a ResultTooLarge "
        "error of its metrics (default: 1000000, for the chart's 512Mi memory limit) "
        "[METRICSCHED_MAX_METRIC_VALUES]",
    )
    a(
        "--list-page-size",
        type=int,
        help="objects per page of the informers' LISTs; lower it when pods are large "
        "(each page is read and decoded whole), at the cost of more requests per LIST "
        "(default: 500) [METRICSCHED_LIST_PAGE_SIZE]",
    )
    a(
        "--webhook",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the admission webhook that sets spec.schedulerName on pods created in "
        "namespaces labelled metricsched.io/scheduler=<name> (default: off; the chart "
        "turns it on with webhook.enabled) [METRICSCHED_WEBHOOK]",
    )
    a(
        "--webhook-bind-address",
        help="address the webhook listens on (default: 0.0.0.0) [METRICSCHED_WEBHOOK_BIND_ADDRESS]",
    )
    a(
        "--webhook-port",
        type=int,
        help="HTTPS port of the webhook (default: 9443) [METRICSCHED_WEBHOOK_PORT]",
    )
    a(
        "--webhook-cert-file",
        help="serving certificate of the webhook (PEM), re-read when it changes "
        "[METRICSCHED_WEBHOOK_CERT_FILE]",
    )
    a(
        "--webhook-key-file",
        help="private key of that certificate (PEM, unencrypted) [METRICSCHED_WEBHOOK_KEY_FILE]",
    )
    a(
        "--webhook-scheduler-name",
        help="the schedulerName the webhook sets, and the value of the namespace label it "
        "answers to; one of --scheduler-name (default: the first) "
        "[METRICSCHED_WEBHOOK_SCHEDULER_NAME]",
    )
    a(
        "--webhook-exclude-namespace",
        action="append",
        dest="webhook_excluded_namespaces",
        metavar="NS",
        help="namespace whose pods the webhook never changes; repeatable; kube-system and "
        "the operator's own namespace (POD_NAMESPACE) always are "
        "[METRICSCHED_WEBHOOK_EXCLUDED_NAMESPACES, comma-separated]",
    )
    a(
        "--webhook-pod-label",
        help="the pod label that opts one pod in when its value is the webhook's scheduler "
        "name, or leaves the pod to another install when it names another (default: "
        "metricsched.io/scheduler) [METRICSCHED_WEBHOOK_POD_LABEL]",
    )


def from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env

    def pick(attr: str, name: str, default: str) -> str:
        value = getattr(args, attr, None)
        if value is not None:
            return str(value)
        return env.get(f"METRICSCHED_{name}", default)

    def pick_list(attr: str, name: str, default: Sequence[str]) -> tuple[str, ...]:
        value = getattr(args, attr, None)
        if value:
            items = [v for item in value for v in str(item).split(",")]
        elif env.get(f"METRICSCHED_{name}"):
            items = env[f"METRICSCHED_{name}"].split(",")
        else:
            items = list(default)
        return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))

    def pick_int(attr: str, name: str, default: int, lo: int, hi: int) -> int:
        raw = pick(attr, name, str(default))
        try:
            value = int(raw)
        except ValueError as e:
            raise ConfigError(f"METRICSCHED_{name}: not an integer: {raw!r}") from e
        if not lo <= value <= hi:
            raise ConfigError(f"METRICSCHED_{name}: {value} is outside {lo}..{hi}")
        return value

    names = pick_list("scheduler_names", "SCHEDULER_NAMES", ["metricsched"])
    fallback_raw = pick("default_fallback", "DEFAULT_FALLBACK", "LeastAllocated")
    try:
        fallback = model.FallbackStrategy(fallback_raw)
    except ValueError as e:
        allowed = ", ".join(s.value for s in model.FallbackStrategy)
        raise ConfigError(f"unknown default fallback {fallback_raw!r}; use one of {allowed}") from e
    refresh = _duration(pick("refresh_interval", "REFRESH_INTERVAL", "15s"))
    timeout = _duration(pick("query_timeout", "QUERY_TIMEOUT", "5s"))
    if refresh < 1:
        raise ConfigError("refresh interval must be at least 1s")
    insecure = getattr(args, "prometheus_insecure_skip_verify", None)
    if insecure is None:
        insecure = _env_bool(env.get("METRICSCHED_PROMETHEUS_INSECURE_SKIP_VERIFY", "false"))
    secure = getattr(args, "metrics_secure", None)
    if secure is None:
        secure = _env_bool(env.get("METRICSCHED_METRICS_SECURE", "false"))
    leader = getattr(args, "leader_elect", None)
    if leader is None:
        leader = _env_bool(env.get("METRICSCHED_LEADER_ELECT", "false"))
    url = pick("prometheus_url", "PROMETHEUS_URL", "http://127.0.0.1:9090").rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"Prometheus URL must start with http:// or https://: {url!r}")
    metrics_port = pick_int("metrics_port", "METRICS_PORT", 8080, 0, 65535)
    health_port = pick_int("health_port", "HEALTH_PORT", 8081, 0, 65535)
    if secure and metrics_port == health_port != 0:
        raise ConfigError(
            "with --metrics-secure the metrics and health ports must differ: "
            "the probes stay plain HTTP on a port of their own"
        )
    events_rate = float(pick("events_per_second", "EVENTS_PER_SECOND", "50"))
    try:
        rules = promql_guard.Rules(
            allowed_metrics=pick_list("query_allowed_metrics", "QUERY_ALLOWED_METRICS", []),
            required_matchers=tuple(
                promql_guard.parse_required_matcher(m)
                for m in pick_list("query_required_matchers", "QUERY_REQUIRED_MATCHERS", [])
            ),
        )
    except promql_guard.RuleError as e:
        raise ConfigError(str(e)) from e
    if events_rate <= 0:
        raise ConfigError("events per second must be positive")
    headers = tuple(_header(h) for h in pick_list("prometheus_headers", "PROMETHEUS_HEADERS", []))
    token_file = pick("prometheus_token_file", "PROMETHEUS_TOKEN_FILE", "") or None
    username = pick("prometheus_username", "PROMETHEUS_USERNAME", "") or None
    header_files = tuple(
        _header_file(h, authorization_set=token_file is not None or username is not None)
        for h in pick_list("prometheus_header_files", "PROMETHEUS_HEADER_FILES", [])
    )
    _no_header_twice([name for name, _ in (*headers, *header_files)])
    password_file = pick("prometheus_password_file", "PROMETHEUS_PASSWORD_FILE", "") or None
    if (username is None) != (password_file is None):
        raise ConfigError("basic auth needs both a Prometheus username and a password file")
    if username is not None and token_file is not None:
        raise ConfigError(
            "set a Prometheus bearer token file or basic auth, not both: each is the "
            "Authorization header"
        )
    if username is not None and ":" in username:
        raise ConfigError("a basic-auth username cannot contain ':'")
    cert_file = pick("prometheus_cert_file", "PROMETHEUS_CERT_FILE", "") or None
    key_file = pick("prometheus_key_file", "PROMETHEUS_KEY_FILE", "") or None
    if (cert_file is None) != (key_file is None):
        raise ConfigError("a Prometheus client certificate needs both a cert file and a key file")
    if cert_file is not None and not url.startswith("https://"):
        raise ConfigError("a Prometheus client certificate needs an https:// Prometheus URL")
    webhook = getattr(args, "webhook", None)
    if webhook is None:
        webhook = _env_bool(env.get("METRICSCHED_WEBHOOK", "false"))
    webhook_cert = pick("webhook_cert_file", "WEBHOOK_CERT_FILE", "") or None
    webhook_key = pick("webhook_key_file", "WEBHOOK_KEY_FILE", "") or None
    if (webhook_cert is None) != (webhook_key is None):
        raise ConfigError("the webhook needs both a certificate file and a key file")
    if webhook and webhook_cert is None:
        raise ConfigError(
            "the webhook needs --webhook-cert-file and --webhook-key-file: the API server "
            "calls it over HTTPS only (the chart makes them, or cert-manager does)"
        )
    webhook_name = pick("webhook_scheduler_name", "WEBHOOK_SCHEDULER_NAME", names[0])
    if webhook_name not in names:
        raise ConfigError(
            f"the webhook's scheduler name {webhook_name!r} is not one this operator serves "
            f"({', '.join(names)}): pods given it would wait for nobody"
        )
    webhook_excluded = pick_list(
        "webhook_excluded_namespaces", "WEBHOOK_EXCLUDED_NAMESPACES", []
    ) + tuple(n for n in ("kube-system", env.get("POD_NAMESPACE", "")) if n)
    return Config(
        kubeconfig=pick("kubeconfig", "KUBECONFIG", "") or None,
        scheduler_names=frozenset(names),
        prometheus_url=url,
        prometheus_token_file=token_file,
        prometheus_ca_file=pick("prometheus_ca_file", "PROMETHEUS_CA_FILE", "") or None,
        prometheus_verify_tls=not insecure,
        query_timeout_s=timeout,
        refresh_interval_s=refresh,
        default_fallback=fallback,
        namespaces=pick_list("namespaces", "NAMESPACES", []),
        metrics_port=metrics_port,
        health_port=health_port,
        metrics_secure=secure,
        metrics_cert_dir=pick("metrics_cert_dir", "METRICS_CERT_DIR", "") or None,
        bind_address=pick("bind_address", "BIND_ADDRESS", "0.0.0.0"),
        log_format=pick("log_format", "LOG_FORMAT", "json"),
        log_level=pick("log_level", "LOG_LEVEL", "info"),
        leader_elect=leader,
        leader_election_namespace=pick(
            "leader_election_namespace",
            "LEADER_ELECTION_NAMESPACE",
            env.get("POD_NAMESPACE", "default"),
        ),
        leader_election_id=pick("leader_election_id", "LEADER_ELECTION_ID", "metricsched"),
        bind_concurrency=pick_int("bind_concurrency", "BIND_CONCURRENCY", 64, 1, 512),
        events_per_second=events_rate,
        events_burst=max(1, int(events_rate * 2)),
        query_rules=rules,
        max_result_series=pick_int("max_result_series", "MAX_RESULT_SERIES", 10_000, 1, 10**7),
        pod_usage_cpu_query=pick(
            "pod_usage_cpu_query", "POD_USAGE_CPU_QUERY", DEFAULT_POD_CPU_QUERY
        ),
        pod_usage_memory_query=pick(
            "pod_usage_memory_query", "POD_USAGE_MEMORY_QUERY", DEFAULT_POD_MEMORY_QUERY
        ),
        pod_usage_settled_s=_duration(pick("pod_usage_settle_time", "POD_USAGE_SETTLE_TIME", "2m")),
        pod_usage_max_pods=pick_int("pod_usage_max_pods", "POD_USAGE_MAX_PODS", 50_000, 1, 10**7),
        rebalance_eviction_budget=pick_int(
            "rebalance_eviction_budget", "REBALANCE_EVICTION_BUDGET", 10, 0, 10_000
        ),
        max_result_bytes=_byte_size(
            pick("max_result_bytes", "MAX_RESULT_BYTES", "8Mi"), name="MAX_RESULT_BYTES"
        ),
        max_metric_values=pick_int("max_metric_values", "MAX_METRIC_VALUES", 1_000_000, 1, 10**9),
        list_page_size=pick_int("list_page_size", "LIST_PAGE_SIZE", 500, 1, 10_000),
        prometheus_headers=headers,
        prometheus_header_files=header_files,
        prometheus_username=username,
        prometheus_password_file=password_file,
        prometheus_cert_file=cert_file,
        prometheus_key_file=key_file,
        webhook_enabled=webhook,
        webhook_bind_address=pick("webhook_bind_address", "WEBHOOK_BIND_ADDRESS", "0.0.0.0"),
        webhook_port=pick_int("webhook_port", "WEBHOOK_PORT", 9443, 1, 65535),
        webhook_cert_file=webhook_cert,
        webhook_key_file=webhook_key,
        webhook_scheduler_name=webhook_name,
        webhook_excluded_namespaces=tuple(dict.fromkeys(webhook_excluded)),
        webhook_pod_label=pick("webhook_pod_label", "WEBHOOK_POD_LABEL", "")
        or "metricsched.io/scheduler",
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
