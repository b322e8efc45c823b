"""Operator configuration: flags beat METRICSCHED_* variables, which beat defaults."""

from __future__ import annotations

import argparse

import pytest

from metricsched import config as config_mod
from metricsched.core import model


def _parse(argv: list[str], env: dict[str, str] | None = None) -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args(argv), env or {})


def test_defaults_match_the_documented_ones() -> None:
    cfg = _parse([])
    assert cfg.scheduler_names == frozenset({"metricsched"})
    assert cfg.refresh_interval_s == 15.0
    assert cfg.default_fallback is model.FallbackStrategy.LEAST_ALLOCATED
    assert cfg.prometheus_verify_tls is True
    assert cfg.log_format == "json"
    assert cfg.leader_elect is False


def test_environment_variables_configure_the_operator() -> None:
    cfg = _parse(
        [],
        {
            "METRICSCHED_SCHEDULER_NAMES": "a, b",
            "METRICSCHED_REFRESH_INTERVAL": "30s",
            "METRICSCHED_PROMETHEUS_INSECURE_SKIP_VERIFY": "true",
            "METRICSCHED_LEADER_ELECT": "1",
            "METRICSCHED_DEFAULT_FALLBACK": "Wait",
        },
    )
    assert cfg.scheduler_names == frozenset({"a", "b"})
    assert cfg.refresh_interval_s == 30.0
    assert cfg.prometheus_verify_tls is False
    assert cfg.leader_elect is True
    assert cfg.default_fallback is model.FallbackStrategy.WAIT


def test_a_flag_wins_over_its_environment_variable() -> None:
    cfg = _parse(
        ["--refresh-interval", "5s", "--scheduler-name", "x"],
        {"METRICSCHED_REFRESH_INTERVAL": "30s", "METRICSCHED_SCHEDULER_NAMES": "y"},
    )
    assert cfg.refresh_interval_s == 5.0
    assert cfg.scheduler_names == frozenset({"x"})


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"METRICSCHED_REFRESH_INTERVAL": "soon"}, "duration"),
        ({"METRICSCHED_DEFAULT_FALLBACK": "Fastest"}, "LeastAllocated"),
        ({"METRICSCHED_PROMETHEUS_URL": "prometheus:9090"}, "http://"),
        ({"METRICSCHED_METRICS_PORT": "70000"}, "outside"),
        ({"METRICSCHED_LEADER_ELECT": "maybe"}, "boolean"),
        ({"METRICSCHED_REFRESH_INTERVAL": "100ms"}, "at least 1s"),
    ],
)
def test_bad_values_give_a_clear_error(env: dict[str, str], needle: str) -> None:
    with pytest.raises(config_mod.ConfigError, match=needle):
        _parse([], env)


def test_secure_metrics_are_off_unless_asked_for_by_flag_or_environment() -> None:
    assert _parse([]).metrics_secure is False
    assert _parse(["--metrics-secure"]).metrics_secure is True
    assert _parse([], {"METRICSCHED_METRICS_SECURE": "true"}).metrics_secure is True
    on_by_env = {"METRICSCHED_METRICS_SECURE": "true"}
    assert _parse(["--no-metrics-secure"], on_by_env).metrics_secure is False
    assert _parse(["--metrics-cert-dir=/certs"]).metrics_cert_dir == "/certs"


def test_secure_metrics_need_a_health_port_of_their_own() -> None:
    with pytest.raises(config_mod.ConfigError, match="must differ"):
        _parse(["--metrics-secure", "--metrics-port=9000", "--health-port=9000"])
