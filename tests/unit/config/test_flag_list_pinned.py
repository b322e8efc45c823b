"""The operator's flags, written out by hand: each flag's name, its METRICSCHED_* variable,
its argparse shape, its default and its error messages. A change to any of them is a change
of the operator's interface and must show up here as a failing test first."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from metricsched import config as config_mod
from metricsched.core import model, promql_guard

# (flag, variable, a value, the Config field it sets, what that value becomes,
#  other variables the value needs beside it).
PINNED: list[tuple[str, str, str | None, str, Any, dict[str, str]]] = [
    ("--kubeconfig", "METRICSCHED_KUBECONFIG", "/k", "kubeconfig", "/k", {}),
    (
        "--scheduler-name",
        "METRICSCHED_SCHEDULER_NAMES",
        "a",
        "scheduler_names",
        frozenset({"a"}),
        {},
    ),
    (
        "--prometheus-url",
        "METRICSCHED_PROMETHEUS_URL",
        "https://p:1/",
        "prometheus_url",
        "https://p:1",
        {},
    ),
    (
        "--prometheus-token-file",
        "METRICSCHED_PROMETHEUS_TOKEN_FILE",
        "/t",
        "prometheus_token_file",
        "/t",
        {},
    ),
    (
        "--prometheus-ca-file",
        "METRICSCHED_PROMETHEUS_CA_FILE",
        "/c",
        "prometheus_ca_file",
        "/c",
        {},
    ),
    (
        "--prometheus-header",
        "METRICSCHED_PROMETHEUS_HEADERS",
        "X-A=1",
        "prometheus_headers",
        (("X-A", "1"),),
        {},
    ),
    (
        "--prometheus-header-file",
        "METRICSCHED_PROMETHEUS_HEADER_FILES",
        "X-B=/f",
        "prometheus_header_files",
        (("X-B", "/f"),),
        {},
    ),
    (
        "--prometheus-username",
        "METRICSCHED_PROMETHEUS_USERNAME",
        "u",
        "prometheus_username",
        "u",
        {"METRICSCHED_PROMETHEUS_PASSWORD_FILE": "/p"},
    ),
    (
        "--prometheus-password-file",
        "METRICSCHED_PROMETHEUS_PASSWORD_FILE",
        "/p",
        "prometheus_password_file",
        "/p",
        {"METRICSCHED_PROMETHEUS_USERNAME": "u"},
    ),
    (
        "--prometheus-cert-file",
        "METRICSCHED_PROMETHEUS_CERT_FILE",
        "/c",
        "prometheus_cert_file",
        "/c",
        {"METRICSCHED_PROMETHEUS_KEY_FILE": "/k", "METRICSCHED_PROMETHEUS_URL": "https://p"},
    ),
    (
        "--prometheus-key-file",
        "METRICSCHED_PROMETHEUS_KEY_FILE",
        "/k",
        "prometheus_key_file",
        "/k",
        {"METRICSCHED_PROMETHEUS_CERT_FILE": "/c", "METRICSCHED_PROMETHEUS_URL": "https://p"},
    ),
    (
        "--prometheus-insecure-skip-verify",
        "METRICSCHED_PROMETHEUS_INSECURE_SKIP_VERIFY",
        None,
        "prometheus_verify_tls",
        False,
        {},
    ),
    ("--query-timeout", "METRICSCHED_QUERY_TIMEOUT", "7s", "query_timeout_s", 7.0, {}),
    ("--refresh-interval", "METRICSCHED_REFRESH_INTERVAL", "30s", "refresh_interval_s", 30.0, {}),
    (
        "--default-fallback",
        "METRICSCHED_DEFAULT_FALLBACK",
        "Wait",
        "default_fallback",
        model.FallbackStrategy.WAIT,
        {},
    ),
    ("--namespace", "METRICSCHED_NAMESPACES", "a", "namespaces", ("a",), {}),
    ("--metrics-port", "METRICSCHED_METRICS_PORT", "9000", "metrics_port", 9000, {}),
    ("--health-port", "METRICSCHED_HEALTH_PORT", "9001", "health_port", 9001, {}),
    ("--metrics-secure", "METRICSCHED_METRICS_SECURE", None, "metrics_secure", True, {}),
    ("--metrics-cert-dir", "METRICSCHED_METRICS_CERT_DIR", "/d", "metrics_cert_dir", "/d", {}),
    ("--bind-address", "METRICSCHED_BIND_ADDRESS", "127.0.0.1", "bind_address", "127.0.0.1", {}),
    ("--log-format", "METRICSCHED_LOG_FORMAT", "text", "log_format", "text", {}),
    ("--log-level", "METRICSCHED_LOG_LEVEL", "debug", "log_level", "debug", {}),
    ("--leader-elect", "METRICSCHED_LEADER_ELECT", None, "leader_elect", True, {}),
    (
        "--leader-election-namespace",
        "METRICSCHED_LEADER_ELECTION_NAMESPACE",
        "ns",
        "leader_election_namespace",
        "ns",
        {},
    ),
    (
        "--leader-election-id",
        "METRICSCHED_LEADER_ELECTION_ID",
        "id",
        "leader_election_id",
        "id",
        {},
    ),
    ("--bind-concurrency", "METRICSCHED_BIND_CONCURRENCY", "8", "bind_concurrency", 8, {}),
    ("--events-per-second", "METRICSCHED_EVENTS_PER_SECOND", "10", "events_per_second", 10.0, {}),
    (
        "--query-allowed-metric",
        "METRICSCHED_QUERY_ALLOWED_METRICS",
        "node_*",
        "query_rules",
        promql_guard.Rules(allowed_metrics=("node_*",)),
        {},
    ),
    (
        "--query-required-matcher",
        "METRICSCHED_QUERY_REQUIRED_MATCHERS",
        "namespace={namespace}",
        "query_rules",
        promql_guard.Rules(
            required_matchers=(promql_guard.parse_required_matcher("namespace={namespace}"),)
        ),
        {},
    ),
    ("--max-result-series", "METRICSCHED_MAX_RESULT_SERIES", "5", "max_result_series", 5, {}),
    (
        "--pod-usage-cpu-query",
        "METRICSCHED_POD_USAGE_CPU_QUERY",
        "q",
        "pod_usage_cpu_query",
        "q",
        {},
    ),
    (
        "--pod-usage-memory-query",
        "METRICSCHED_POD_USAGE_MEMORY_QUERY",
        "q",
        "pod_usage_memory_query",
        "q",
        {},
    ),
    (
        "--rebalance-eviction-budget",
        "METRICSCHED_REBALANCE_EVICTION_BUDGET",
        "3",
        "rebalance_eviction_budget",
        3,
        {},
    ),
    ("--pod-usage-max-pods", "METRICSCHED_POD_USAGE_MAX_PODS", "7", "pod_usage_max_pods", 7, {}),
    (
        "--pod-usage-settle-time",
        "METRICSCHED_POD_USAGE_SETTLE_TIME",
        "1m",
        "pod_usage_settled_s",
        60.0,
        {},
    ),
    ("--max-result-bytes", "METRICSCHED_MAX_RESULT_BYTES", "1Ki", "max_result_bytes", 1024, {}),
    ("--max-metric-values", "METRICSCHED_MAX_METRIC_VALUES", "9", "max_metric_values", 9, {}),
    ("--list-page-size", "METRICSCHED_LIST_PAGE_SIZE", "50", "list_page_size", 50, {}),
    (
        "--webhook",
        "METRICSCHED_WEBHOOK",
        None,
        "webhook_enabled",
        True,
        {"METRICSCHED_WEBHOOK_CERT_FILE": "/c", "METRICSCHED_WEBHOOK_KEY_FILE": "/k"},
    ),
    (
        "--webhook-bind-address",
        "METRICSCHED_WEBHOOK_BIND_ADDRESS",
        "127.0.0.1",
        "webhook_bind_address",
        "127.0.0.1",
        {},
    ),
    ("--webhook-port", "METRICSCHED_WEBHOOK_PORT", "9444", "webhook_port", 9444, {}),
    (
        "--webhook-cert-file",
        "METRICSCHED_WEBHOOK_CERT_FILE",
        "/c",
        "webhook_cert_file",
        "/c",
        {"METRICSCHED_WEBHOOK_KEY_FILE": "/k"},
    ),
    (
        "--webhook-key-file",
        "METRICSCHED_WEBHOOK_KEY_FILE",
        "/k",
        "webhook_key_file",
        "/k",
        {"METRICSCHED_WEBHOOK_CERT_FILE": "/c"},
    ),
    (
        "--webhook-scheduler-name",
        "METRICSCHED_WEBHOOK_SCHEDULER_NAME",
        "b",
        "webhook_scheduler_name",
        "b",
        {"METRICSCHED_SCHEDULER_NAMES": "a,b"},
    ),
    (
        "--webhook-exclude-namespace",
        "METRICSCHED_WEBHOOK_EXCLUDED_NAMESPACES",
        "x",
        "webhook_excluded_namespaces",
        ("x", "kube-system"),
        {},
    ),
    ("--webhook-pod-label", "METRICSCHED_WEBHOOK_POD_LABEL", "l", "webhook_pod_label", "l", {}),
]

# Each flag's argparse shape: (option strings, dest, action, type, choices, metavar, const).
SHAPES: list[tuple[tuple[str, ...], str, str, Any, Any, Any, Any]] = [
    (("--kubeconfig",), "kubeconfig", "_StoreAction", None, None, None, None),
    (("--scheduler-name",), "scheduler_names", "_AppendAction", None, None, "NAME", None),
    (("--prometheus-url",), "prometheus_url", "_StoreAction", None, None, None, None),
    (("--prometheus-token-file",), "prometheus_token_file", "_StoreAction", None, None, None, None),
    (("--prometheus-ca-file",), "prometheus_ca_file", "_StoreAction", None, None, None, None),
    (
        ("--prometheus-header",),
        "prometheus_headers",
        "_AppendAction",
        None,
        None,
        "NAME=VALUE",
        None,
    ),
    (
        ("--prometheus-header-file",),
        "prometheus_header_files",
        "_AppendAction",
        None,
        None,
        "NAME=PATH",
        None,
    ),
    (("--prometheus-username",), "prometheus_username", "_StoreAction", None, None, None, None),
    (
        ("--prometheus-password-file",),
        "prometheus_password_file",
        "_StoreAction",
        None,
        None,
        None,
        None,
    ),
    (("--prometheus-cert-file",), "prometheus_cert_file", "_StoreAction", None, None, None, None),
    (("--prometheus-key-file",), "prometheus_key_file", "_StoreAction", None, None, None, None),
    (
        ("--prometheus-insecure-skip-verify",),
        "prometheus_insecure_skip_verify",
        "_StoreConstAction",
        None,
        None,
        None,
        True,
    ),
    (("--query-timeout",), "query_timeout", "_StoreAction", None, None, None, None),
    (("--refresh-interval",), "refresh_interval", "_StoreAction", None, None, None, None),
    (
        ("--default-fallback",),
        "default_fallback",
        "_StoreAction",
        None,
        ["LeastAllocated", "MostAllocated", "RoundRobin", "Random", "Wait"],
        None,
        None,
    ),
    (("--namespace",), "namespaces", "_AppendAction", None, None, "NS", None),
    (("--metrics-port",), "metrics_port", "_StoreAction", int, None, None, None),
    (("--health-port",), "health_port", "_StoreAction", int, None, None, None),
    (
        ("--metrics-secure", "--no-metrics-secure"),
        "metrics_secure",
        "BooleanOptionalAction",
        None,
        None,
        None,
        None,
    ),
    (("--metrics-cert-dir",), "metrics_cert_dir", "_StoreAction", None, None, None, None),
    (("--bind-address",), "bind_address", "_StoreAction", None, None, None, None),
    (("--log-format",), "log_format", "_StoreAction", None, ["json", "text"], None, None),
    (
        ("--log-level",),
        "log_level",
        "_StoreAction",
        None,
        ["debug", "info", "warning", "error"],
        None,
        None,
    ),
    (("--leader-elect",), "leader_elect", "_StoreConstAction", None, None, None, True),
    (
        ("--leader-election-namespace",),
        "leader_election_namespace",
        "_StoreAction",
        None,
        None,
        None,
        None,
    ),
    (("--leader-election-id",), "leader_election_id", "_StoreAction", None, None, None, None),
    (("--bind-concurrency",), "bind_concurrency", "_StoreAction", int, None, None, None),
    (("--events-per-second",), "events_per_second", "_StoreAction", float, None, None, None),
    (
        ("--query-allowed-metric",),
        "query_allowed_metrics",
        "_AppendAction",
        None,
        None,
        "PATTERN",
        None,
    ),
    (
        ("--query-required-matcher",),
        "query_required_matchers",
        "_AppendAction",
        None,
        None,
        "LABEL=VALUE",
        None,
    ),
    (("--max-result-series",), "max_result_series", "_StoreAction", int, None, None, None),
    (("--pod-usage-cpu-query",), "pod_usage_cpu_query", "_StoreAction", None, None, None, None),
    (
        ("--pod-usage-memory-query",),
        "pod_usage_memory_query",
        "_StoreAction",
        None,
        None,
        None,
        None,
    ),
    (
        ("--rebalance-eviction-budget",),
        "rebalance_eviction_budget",
        "_StoreAction",
        int,
        None,
        None,
        None,
    ),
    (("--pod-usage-max-pods",), "pod_usage_max_pods", "_StoreAction", int, None, None, None),
    (("--pod-usage-settle-time",), "pod_usage_settle_time", "_StoreAction", None, None, None, None),
    (("--max-result-bytes",), "max_result_bytes", "_StoreAction", None, None, None, None),
    (("--max-metric-values",), "max_metric_values", "_StoreAction", int, None, None, None),
    (("--list-page-size",), "list_page_size", "_StoreAction", int, None, None, None),
    (("--webhook", "--no-webhook"), "webhook", "BooleanOptionalAction", None, None, None, None),
    (("--webhook-bind-address",), "webhook_bind_address", "_StoreAction", None, None, None, None),
    (("--webhook-port",), "webhook_port", "_StoreAction", int, None, None, None),
    (("--webhook-cert-file",), "webhook_cert_file", "_StoreAction", None, None, None, None),
    (("--webhook-key-file",), "webhook_key_file", "_StoreAction", None, None, None, None),
    (
        ("--webhook-scheduler-name",),
        "webhook_scheduler_name",
        "_StoreAction",
        None,
        None,
        None,
        None,
    ),
    (
        ("--webhook-exclude-namespace",),
        "webhook_excluded_namespaces",
        "_AppendAction",
        None,
        None,
        "NS",
        None,
    ),
    (("--webhook-pod-label",), "webhook_pod_label", "_StoreAction", None, None, None, None),
]

DEFAULTS = config_mod.Config(
    kubeconfig=None,
    scheduler_names=frozenset({"metricsched"}),
    prometheus_url="http://127.0.0.1:9090",
    prometheus_token_file=None,
    prometheus_ca_file=None,
    prometheus_verify_tls=True,
    query_timeout_s=5.0,
    refresh_interval_s=15.0,
    default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
    namespaces=(),
    metrics_port=8080,
    health_port=8081,
    metrics_secure=False,
    metrics_cert_dir=None,
    bind_address="0.0.0.0",
    log_format="json",
    log_level="info",
    leader_elect=False,
    leader_election_namespace="default",
    leader_election_id="metricsched",
    bind_concurrency=64,
    events_per_second=50.0,
    events_burst=100,
    query_rules=promql_guard.Rules(allowed_metrics=(), required_matchers=()),
    max_result_series=10000,
    pod_usage_cpu_query="sum by (namespace, pod) (max by (namespace, pod, container) "
    '(rate(container_cpu_usage_seconds_total{container!="", image!=""}[5m])))',
    pod_usage_memory_query="sum by (namespace, pod) (max by (namespace, pod, container) "
    '(container_memory_working_set_bytes{container!="", image!=""}))',
    pod_usage_max_pods=50000,
    rebalance_eviction_budget=10,
    pod_usage_settled_s=120.0,
    max_result_bytes=8388608,
    max_metric_values=1000000,
    list_page_size=500,
    prometheus_headers=(),
    prometheus_header_files=(),
    prometheus_username=None,
    prometheus_password_file=None,
    prometheus_cert_file=None,
    prometheus_key_file=None,
    webhook_enabled=False,
    webhook_bind_address="0.0.0.0",
    webhook_port=9443,
    webhook_cert_file=None,
    webhook_key_file=None,
    webhook_scheduler_name="metricsched",
    webhook_excluded_namespaces=("kube-system",),
    webhook_pod_label="metricsched.io/scheduler",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return parser


def _parse(argv: list[str], env: dict[str, str]) -> config_mod.Config:
    return config_mod.from_args(_parser().parse_args(argv), env)


def _argv(flag: str, value: str | None) -> list[str]:
    return [flag] if value is None else [f"{flag}={value}"]


def test_the_flags_and_their_argparse_shapes_are_the_pinned_ones() -> None:
    actions = [a for a in _parser()._actions if a.dest != "help"]
    shapes = [
        (
            tuple(a.option_strings),
            a.dest,
            type(a).__name__,
            a.type,
            a.choices,
            a.metavar,
            a.const,
        )
        for a in actions
    ]
    assert shapes == SHAPES
    assert all(a.default is None for a in actions)
    assert [p[0] for p in PINNED] == [s[0][0] for s in SHAPES]


def test_the_defaults_are_the_pinned_ones() -> None:
    assert _parse([], {}) == DEFAULTS


@pytest.mark.parametrize("row", PINNED, ids=[p[0] for p in PINNED])
def test_each_flag_and_its_variable_set_the_same_field(
    row: tuple[str, str, str | None, str, Any, dict[str, str]],
) -> None:
    flag, var, value, field, expected, beside = row
    by_flag = _parse(_argv(flag, value), beside)
    by_var = _parse([], {**beside, var: "true" if value is None else value})
    assert getattr(by_flag, field) == expected
    assert getattr(by_var, field) == expected
    # The flag wins: its variable is not read at all, even when it would be refused.
    assert getattr(_parse(_argv(flag, value), {**beside, var: "zz-refused-zz"}), field) == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"METRICSCHED_METRICS_PORT": "x"}, "METRICSCHED_METRICS_PORT: not an integer: 'x'"),
        (
            {"METRICSCHED_METRICS_PORT": "70000"},
            "METRICSCHED_METRICS_PORT: 70000 is outside 0..65535",
        ),
        (
            {"METRICSCHED_BIND_CONCURRENCY": "0"},
            "METRICSCHED_BIND_CONCURRENCY: 0 is outside 1..512",
        ),
        ({"METRICSCHED_LEADER_ELECT": "maybe"}, "not a boolean: 'maybe' (use true or false)"),
        (
            {"METRICSCHED_MAX_RESULT_BYTES": "8M"},
            "METRICSCHED_MAX_RESULT_BYTES: not a positive size: '8M' (e.g. 8Mi)",
        ),
        ({"METRICSCHED_QUERY_TIMEOUT": "soon"}, "not a duration: 'soon'"),
        (
            {"METRICSCHED_PROMETHEUS_URL": "ftp://x"},
            "Prometheus URL must start with http:// or https://: 'ftp://x'",
        ),
        (
            {"METRICSCHED_DEFAULT_FALLBACK": "Fast"},
            "unknown default fallback 'Fast'; use one of LeastAllocated, MostAllocated, "
            "RoundRobin, Random, Wait",
        ),
        ({"METRICSCHED_REFRESH_INTERVAL": "0.5s"}, "refresh interval must be at least 1s"),
        ({"METRICSCHED_EVENTS_PER_SECOND": "x"}, "could not convert string to float: 'x'"),
        ({"METRICSCHED_EVENTS_PER_SECOND": "0"}, "events per second must be positive"),
        (
            {"METRICSCHED_WEBHOOK": "true"},
            "the webhook needs --webhook-cert-file and --webhook-key-file: the API server "
            "calls it over HTTPS only (the chart makes them, or cert-manager does)",
        ),
    ],
)
def test_the_error_messages_are_the_pinned_ones(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _parse([], env)
    assert str(caught.value) == message


def test_the_variables_with_defaults_of_their_own() -> None:
    assert _parse([], {"POD_NAMESPACE": "ops"}).leader_election_namespace == "ops"
    assert _parse([], {"POD_NAMESPACE": "ops"}).webhook_excluded_namespaces == (
        "kube-system",
        "ops",
    )
    assert _parse([], {"METRICSCHED_SCHEDULER_NAMES": "b,a"}).webhook_scheduler_name == "b"
    assert _parse([], {"METRICSCHED_WEBHOOK_POD_LABEL": ""}).webhook_pod_label == (
        "metricsched.io/scheduler"
    )
    assert _parse([], {"METRICSCHED_BIND_ADDRESS": ""}).bind_address == ""
    assert _parse([], {"METRICSCHED_POD_USAGE_CPU_QUERY": ""}).pod_usage_cpu_query == ""
    assert _parse([], {"METRICSCHED_NAMESPACES": "a, b,a,"}).namespaces == ("a", "b")
